#include "ckpt/torch/scheduler_state.h"

#include <limits>
#include <string>
#include <vector>

namespace ckpt::torch_adapter {

namespace {
constexpr const char* kStepLRType = "torch.StepLR";
}  // namespace

ResumableStepLR::ResumableStepLR(torch::optim::Optimizer& optimizer, unsigned step_size,
                                 double gamma)
    : torch::optim::StepLR(optimizer, step_size, gamma),
      step_size_copy_(step_size),
      gamma_copy_(gamma),
      optimizer_ref_(optimizer) {}

Status capture_step_lr(const ResumableStepLR& s, Node* out) {
  Node node;
  node.attrs["type"] = std::string(kStepLRType);
  node.attrs["step_size"] = static_cast<int64_t>(s.step_size());
  node.attrs["gamma"] = s.gamma();
  node.attrs["step_count"] = s.step_count();
  std::vector<double> lrs;
  for (const auto& group : s.optimizer().param_groups()) lrs.push_back(group.options().get_lr());
  node.attrs["last_lr"] = std::move(lrs);
  *out = std::move(node);
  return Status::ok();
}

Status restore_step_lr(const Node& in, ResumableStepLR& s) {
  const std::string type = in.get_string("type");
  if (type != kStepLRType) {
    return mismatch(std::string("scheduler type mismatch (expected ") + kStepLRType + ", got \"" +
                    type + "\")");
  }
  const int64_t step_size = in.get_int("step_size", -1);
  if (step_size != static_cast<int64_t>(s.step_size())) {
    return mismatch("scheduler step_size mismatch (expected " + std::to_string(s.step_size()) +
                    ", got " + std::to_string(step_size) + ")");
  }
  const AttrValue* gamma = in.find_attr("gamma");
  if (gamma == nullptr || !std::holds_alternative<double>(*gamma) ||
      std::get<double>(*gamma) != s.gamma()) {
    return mismatch("scheduler gamma mismatch (expected " + std::to_string(s.gamma()) + ", got " +
                    (gamma && std::holds_alternative<double>(*gamma)
                         ? std::to_string(std::get<double>(*gamma))
                         : std::string("no double")) +
                    ")");
  }
  const AttrValue* count = in.find_attr("step_count");
  if (count == nullptr || !std::holds_alternative<int64_t>(*count) ||
      std::get<int64_t>(*count) < 0 ||
      std::get<int64_t>(*count) > std::numeric_limits<unsigned>::max()) {
    return corrupt("scheduler: attribute \"step_count\" is missing or out of range");
  }
  s.set_step_count(static_cast<unsigned>(std::get<int64_t>(*count)));
  return Status::ok();
}

}  // namespace ckpt::torch_adapter
