// ckpt_cross: the C++ side of python/tests/test_cross.py, which checks that the Python package and
// the C++ Checkpointer read each other's checkpoints (model, optimizer, rng cpu, loader cursor,
// train counters), bit-exact on tensors.
//   ckpt_cross write RUN_DIR DUMP.json   trains 3 steps, saves step 3, dumps what it saved
//   ckpt_cross read  RUN_DIR DUMP.json   restores the latest checkpoint into fresh objects, dumps
//                                        what it restored
//   ckpt_cross tied  RUN_DIR DUMP.json   saves a model with a tied weight, restores it in C++
// The model is torch::nn::Sequential(Linear(4, 8), ReLU, Linear(8, 2)) with AdamW(lr 1e-2), the
// loader ckpt's sampler over 40 samples, batch 4, seed 7 — the same as the Python side's. The dump
// is JSON: tensor bytes as hex, optimizer step counts, the CPU generator state, cursor, counters.
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/torch/optimizer_state.h"
#include "train/checkpointer.h"

namespace {

std::string hex_of(const at::Tensor& t) {
  at::Tensor c = t.detach().contiguous().cpu();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

struct Run {
  torch::nn::Sequential model{torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 2)};
  torch::optim::AdamW opt{model->parameters(), torch::optim::AdamWOptions(1e-2)};
  ckpt::loader::ResumableSampler sampler{spec(), 0};
  ckpt::TrainCounters counters;

  static ckpt::loader::SamplerSpec spec() {
    ckpt::loader::SamplerSpec s;
    s.dataset_size = 40;
    s.seed = 7;
    s.batch_size = 4;
    return s;
  }
  ckpt::Tracked tracked() {
    ckpt::Tracked t;
    t.model = model.ptr().get();
    t.optimizer = &opt;
    t.sampler = &sampler;
    t.counters = &counters;
    return t;
  }
};

nlohmann::json dump(Run& r, const at::Tensor& rng_state) {
  nlohmann::json j;
  for (const auto& p : r.model->named_parameters()) j["model"][p.key()] = hex_of(p.value());
  ckpt::Node opt;
  ckpt::Status s = ckpt::torch_adapter::capture_optimizer(r.opt, *r.model, &opt);
  if (!s.is_ok()) throw std::runtime_error(s.message());
  for (const auto& [name, sn] : opt.find_child("state")->children) {
    for (const auto& [t, tensor] : sn.tensors) {
      j["optimizer"][name][t] = hex_of(torch::from_blob(
          const_cast<void*>(tensor.data), {static_cast<int64_t>(tensor.nbytes)}, torch::kUInt8));
    }
    j["optimizer"][name]["step"] = sn.get_int("step");
  }
  j["lr"] = opt.find_child("groups")->find_child("0")->get_double("lr");
  j["rng_cpu"] = hex_of(rng_state);
  j["loader"] = {{"epoch", r.sampler.cursor().epoch}, {"position", r.sampler.cursor().position}};
  j["train"] = {{"global_step", r.counters.global_step},
                {"epoch", r.counters.epoch},
                {"samples_seen", r.counters.samples_seen}};
  return j;
}

// A tied embedding / output weight: "proj_weight" is "emb.weight" (one tensor, two names).
struct TiedImpl : torch::nn::Module {
  TiedImpl() : emb(register_module("emb", torch::nn::Embedding(10, 4))) {
    proj_weight = register_parameter("proj_weight", emb->weight);
  }
  torch::nn::Embedding emb;
  torch::Tensor proj_weight;
};
TORCH_MODULE(Tied);

// Saves a tied model at step 1 and restores it into a fresh one through a second Checkpointer.
nlohmann::json tied(const ckpt::CheckpointerOptions& o) {
  torch::manual_seed(5);
  Tied a;
  {
    ckpt::Checkpointer ck(o);
    ckpt::Tracked t;
    t.model = a.ptr().get();
    ck.track(t);
    ckpt::Status s = ck.save(1);
    if (!s.is_ok()) throw std::runtime_error("save: " + s.message());
  }
  torch::manual_seed(6);
  Tied b;
  ckpt::Checkpointer ck(o);
  ckpt::Tracked t;
  t.model = b.ptr().get();
  ck.track(t);
  auto rep = ck.restore_latest();
  if (!rep.is_ok()) throw std::runtime_error("restore: " + rep.status().message());
  return {{"equal", torch::equal(a->emb->weight, b->emb->weight)},
          {"still_tied", b->proj_weight.data_ptr() == b->emb->weight.data_ptr()},
          {"model", {{"emb.weight", hex_of(a->emb->weight)}}}};
}

int fail(const std::string& what) {
  std::fprintf(stderr, "ckpt_cross: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: ckpt_cross write|read RUN_DIR DUMP.json");
  const std::string mode = argv[1];
  ckpt::CheckpointerOptions o;
  o.run_dir = argv[2];
  nlohmann::json out;
  try {
    if (mode == "write") {
      torch::manual_seed(11);
      Run r;
      for (int step = 1; step <= 3; ++step) {
        r.sampler.next_batch();
        r.opt.zero_grad();
        r.model->forward(torch::randn({4, 4})).pow(2).mean().backward();
        r.opt.step();
        r.counters.global_step = step;
        r.counters.samples_seen += 4;
      }
      ckpt::Checkpointer ck(o);
      ck.track(r.tracked());
      const at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
      ckpt::Status s = ck.save(3);
      if (!s.is_ok()) return fail(s.message());
      out = dump(r, rng);
    } else if (mode == "read") {
      torch::manual_seed(99);
      Run r;
      ckpt::Checkpointer ck(o);
      ck.track(r.tracked());
      auto rep = ck.restore_latest();
      if (!rep.is_ok()) return fail(rep.status().message());
      if (!rep->restored) return fail("no checkpoint in " + o.run_dir);
      out = dump(r, at::detail::getDefaultCPUGenerator().get_state());
      out["components"] = ckpt::component_names(rep->components);
      out["missing"] = ckpt::component_names(rep->missing);
    } else if (mode == "tied") {
      out = tied(o);
    } else {
      return fail("unknown mode " + mode);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::ofstream(argv[3]) << out.dump(1) << "\n";
  return 0;
}
