#include "ckpt/torch/torch_layout.h"

#include <string>
#include <vector>

#include "ckpt/torch/optimizer_state.h"

namespace ckpt::torch_adapter {

Result<Node> optimizer_from_torch_layout(const Node& in, const torch::optim::Optimizer& opt,
                                         const torch::nn::Module& m) {
  Node live;
  CKPT_RETURN_IF_ERROR(capture_optimizer(opt, m, &live));
  return ckpt::optimizer_from_torch_layout(in, live.get_strings("param_names"),
                                           live.get_string("type"));
}

}  // namespace ckpt::torch_adapter
