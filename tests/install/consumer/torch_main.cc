// Uses the installed libtorch adapter (ckpt::torch): trains a Linear layer with AdamW for a few
// steps, saves through ckpt::Checkpointer, restores into fresh objects in a second Checkpointer and
// compares every parameter bit for bit. Usage: torch_main RUN_DIR. Prints "torch_main ok".
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "ckpt/train/checkpointer.h"

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "torch_main: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: torch_main RUN_DIR");
  torch::manual_seed(3);
  torch::nn::Linear model(4, 2);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-2));
  ckpt::TrainCounters counters;
  for (int step = 1; step <= 3; ++step) {
    opt.zero_grad();
    model->forward(torch::randn({8, 4})).pow(2).mean().backward();
    opt.step();
    counters.global_step = step;
  }
  {
    ckpt::CheckpointerOptions o;
    o.run_dir = argv[1];
    ckpt::Checkpointer ck(o);
    ckpt::Tracked t;
    t.model = model.ptr().get();
    t.optimizer = &opt;
    t.counters = &counters;
    ck.track(t);
    ckpt::Status s = ck.save(3);
    if (!s.is_ok()) return fail(s.message());
  }
  torch::manual_seed(99);
  torch::nn::Linear fresh(4, 2);
  torch::optim::AdamW fresh_opt(fresh->parameters(), torch::optim::AdamWOptions(1e-2));
  ckpt::TrainCounters fresh_counters;
  ckpt::CheckpointerOptions o;
  o.run_dir = argv[1];
  ckpt::Checkpointer ck(o);
  ckpt::Tracked t;
  t.model = fresh.ptr().get();
  t.optimizer = &fresh_opt;
  t.counters = &fresh_counters;
  ck.track(t);
  auto rep = ck.restore_latest();
  if (!rep.is_ok()) return fail(rep.status().message());
  if (!rep->restored || rep->step != 3) return fail("nothing restored at step 3");
  if (fresh_counters.global_step != 3) return fail("train counters not restored");
  auto a = model->parameters();
  auto b = fresh->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return fail("parameter " + std::to_string(i) + " differs");
  }
  std::printf("torch_main ok: %zu parameters restored bit for bit\n", a.size());
  return 0;
}
