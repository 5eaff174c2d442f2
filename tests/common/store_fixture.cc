#include "tests/common/store_fixture.h"

#include "ckpt/io/fault_injection_env.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_util.h"

namespace ckpt::testing {

Status write_and_commit(Env* env, const std::string& run, int64_t step, Node* root,
                        const TinySave& how) {
  CKPT_ASSIGN_OR_RETURN(const std::string dir, store::save_dir(env, run, step));
  CKPT_RETURN_IF_ERROR(env->make_dirs(dir));
  CKPT_RETURN_IF_ERROR(store::write_rank(env, dir, 0, step, 1, root).status());
  CKPT_RETURN_IF_ERROR(store::commit(env, run, step, 1, how.components));
  if (how.keep_last <= 0) return Status::ok();
  return store::apply_retention(env, run, how.keep_last, 0);
}

Status save_tiny(Env* env, const std::string& run, int64_t step, float value, const TinySave& how) {
  std::vector<float> data(1000, value);
  Node root;
  root.attrs["step"] = step;
  if (how.record_components) root.attrs["components"] = how.components;
  root.child("model").tensors["w"] =
      Tensor::borrow(DType::kFloat32, {1000}, data.data(), data.size() * sizeof(float));
  return write_and_commit(env, run, step, &root, how);
}

Result<uint64_t> operations_of_a_save(const TinySave& how) {
  TempDir tmp;
  FaultInjectionEnv env(Env::posix());
  CKPT_RETURN_IF_ERROR(save_tiny(&env, tmp.path(), 10, 1.0f, how));
  const uint64_t before = env.operations();
  CKPT_RETURN_IF_ERROR(save_tiny(&env, tmp.path(), 20, 2.0f, how));
  return env.operations() - before;
}

}  // namespace ckpt::testing
