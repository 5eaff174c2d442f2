// Tied weights through the Checkpointer: stored once (alias_of = the target's full path in the
// file), restored into a fresh tied model with the tie kept, refused for an untied model.
#include <torch/torch.h>
#ifndef CATCH_VERSION_MAJOR  // else Catch's, from an earlier file of a unity batch
#undef CHECK                 // glog's CHECK (via libtorch) clashes with Catch's
#endif
#include <catch2/catch.hpp>

#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"
#include "ckpt/store/rank_io.h"
#include "tests/common/test_util.h"
#include "train/checkpointer.h"

namespace ckpt::tied_test {
namespace {

struct TiedImpl : torch::nn::Module {
  explicit TiedImpl(bool tie) : emb(register_module("emb", torch::nn::Embedding(10, 4))) {
    out_weight = register_parameter("out_weight", tie ? emb->weight : torch::randn({10, 4}));
  }
  torch::nn::Embedding emb;
  torch::Tensor out_weight;
};
TORCH_MODULE(Tied);

using Dir = testing::TempDir;

Status save_tied(const std::string& dir, Tied& m, torch::optim::Adam& opt) {
  CheckpointerOptions o;
  o.run_dir = dir;
  Checkpointer ck(o);
  Tracked t;
  t.model = m.ptr().get();
  t.optimizer = &opt;
  ck.track(t);
  return ck.save(2);
}

TEST_CASE("a tied weight is saved once and restored tied", "[torch]") {
  Dir d;
  torch::manual_seed(1);
  Tied a(true);
  torch::optim::Adam opt(a->parameters(), torch::optim::AdamOptions(0.1));
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    a->emb->forward(torch::tensor({1, 3})).sum().backward();
    opt.step();
  }
  Status s = save_tied(d.path(), a, opt);
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  auto root = store::read_rank(Env::posix(), path_join(d.path(), step_dir_name(2)), 0);
  REQUIRE(root.is_ok());
  // named_parameters lists the module's own out_weight before the child's emb.weight
  const Tensor* tied = store::find_tensor(&*root, "/model/emb.weight");
  REQUIRE(tied != nullptr);
  REQUIRE(tied->alias_of == "/model/out_weight");

  torch::manual_seed(2);
  Tied b(true);
  torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(0.1));
  CheckpointerOptions o;
  o.run_dir = d.path();
  Checkpointer ck(o);
  Tracked t;
  t.model = b.ptr().get();
  t.optimizer = &opt_b;
  ck.track(t);
  auto r = ck.restore_latest();
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  REQUIRE(r->restored);
  REQUIRE(torch::equal(a->emb->weight, b->emb->weight));
  REQUIRE(b->out_weight.data_ptr() == b->emb->weight.data_ptr());

  Tied c(false);  // the same names, but two tensors: the saved tie cannot be reproduced
  torch::optim::Adam opt_c(c->parameters(), torch::optim::AdamOptions(0.1));
  Checkpointer ck_c(o);
  Tracked tc;
  tc.model = c.ptr().get();
  ck_c.track(tc);
  auto rc = ck_c.restore_latest();
  REQUIRE_FALSE(rc.is_ok());
  REQUIRE(rc.status().message().find("separate tensors") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::tied_test
