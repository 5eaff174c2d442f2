// Uses the installed core (ckpt::ckpt, no libtorch): writes a checkpoint of two tensors, an
// attribute and a sampler cursor, commits it, finds it again and reads it back, comparing bytes.
// Usage: core_main RUN_DIR. Prints "core_main ok" and exits 0, or one line and exits 1.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "core_main: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: core_main RUN_DIR");
  const std::string run_dir = argv[1];
  ckpt::Env* env = ckpt::Env::posix();

  std::vector<float> weight(12);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 0.25f * static_cast<float>(i) - 1.0f;
  std::vector<int64_t> counts = {3, 1, 4, 1, 5};
  ckpt::loader::SamplerSpec spec;
  spec.dataset_size = 100;
  spec.batch_size = 8;
  ckpt::loader::ResumableSampler sampler(spec, 0);
  for (int i = 0; i < 3; ++i) sampler.next_batch();

  ckpt::Node root;
  ckpt::Node& model = root.child("model");
  model.tensors["w"] =
      ckpt::Tensor::borrow(ckpt::DType::kFloat32, {3, 4}, weight.data(), weight.size() * 4);
  model.tensors["counts"] =
      ckpt::Tensor::borrow(ckpt::DType::kInt64, {5}, counts.data(), counts.size() * 8);
  root.child("train").attrs["global_step"] = int64_t{7};
  root.child("loader").attrs["position"] = static_cast<int64_t>(sampler.cursor().position);

  const int64_t step = 7;
  const std::string dir = ckpt::path_join(run_dir, ckpt::step_dir_name(step));
  ckpt::Status s = env->make_dirs(dir);
  if (!s.is_ok()) return fail(s.message());
  auto manifest = ckpt::store::write_rank(env, dir, 0, step, 1, &root);
  if (!manifest.is_ok()) return fail(manifest.status().message());
  s = ckpt::store::commit(env, run_dir, step, 1, {"loader", "model", "train"});
  if (!s.is_ok()) return fail(s.message());

  auto latest = ckpt::store::find_latest(env, run_dir);
  if (!latest.is_ok()) return fail(latest.status().message());
  if (latest->step != step) return fail("LATEST is step " + std::to_string(latest->step));
  auto back = ckpt::store::read_rank(env, latest->dir, 0);
  if (!back.is_ok()) return fail(back.status().message());
  const ckpt::Tensor* w = ckpt::store::find_tensor(&*back, "/model/w");
  const ckpt::Tensor* c = ckpt::store::find_tensor(&*back, "/model/counts");
  if (w == nullptr || c == nullptr) return fail("a tensor is missing after the read");
  if (w->nbytes != weight.size() * 4 || std::memcmp(w->data, weight.data(), w->nbytes) != 0)
    return fail("/model/w differs after the read");
  if (c->nbytes != counts.size() * 8 || std::memcmp(c->data, counts.data(), c->nbytes) != 0)
    return fail("/model/counts differs after the read");
  const ckpt::Node* loader = back->find_child("loader");
  if (loader == nullptr || loader->get_int("position", -1) != 24)
    return fail("loader position is not 24 after the read");
  ckpt::store::VerifyReport rep = ckpt::store::verify_checkpoint(env, latest->dir);
  if (!rep.problems.empty()) return fail("verify: " + rep.problems.front());
  std::printf("core_main ok: %zu tensors, %llu bytes verified\n", rep.tensors,
              static_cast<unsigned long long>(rep.bytes));
  return 0;
}
