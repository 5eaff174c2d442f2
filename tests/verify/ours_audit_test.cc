// The auditor on our own format when a component was removed behind the library's back (h5py
// `del f["optimizer"]`): every component is still judged, the manifest mismatch is a finding, and
// auditing the run directory says since which step the group has been missing.
#include <catch2/catch.hpp>
#include <vector>

#define CKPT_TEST_WITH_OURS_READER
#include "ckpt/loader/sampler_node.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_readers.h"
#include "tests/common/test_util.h"
#include "verify/audit/audit.h"
#include "verify/audit/diff.h"
#include "verify/ours/ours_reader.h"

namespace ckpt::ours_audit_test {
namespace {

using testing::TempDir;
using verify::AuditComponent;
using verify::ComponentStatus;

Status save(Env* env, const std::string& run, int64_t step, bool with_optimizer = true,
            float w0 = 1.0f) {
  static std::vector<float> w(64, 1.0f), m(64, 0.5f);
  w[0] = w0;
  Node root;
  root.attrs["step"] = step;
  root.child("model").tensors["w"] =
      Tensor::borrow(DType::kFloat32, {64}, w.data(), w.size() * sizeof(float));
  Node& opt = root.child("optimizer");
  opt.attrs["type"] = std::string("adamw");
  opt.attrs["param_names"] = std::vector<std::string>{"w"};
  Node& ps = opt.child("state").child("w");
  ps.attrs["step"] = step;
  ps.tensors["exp_avg"] = Tensor::borrow(DType::kFloat32, {64}, m.data(), m.size() * 4);
  ps.tensors["exp_avg_sq"] = Tensor::borrow(DType::kFloat32, {64}, m.data(), m.size() * 4);
  root.child("train").attrs["global_step"] = step;
  root.child("train").attrs["epoch"] = int64_t{0};
  std::vector<std::string> components{"model", "optimizer", "train"};
  if (!with_optimizer) {
    root.children.erase("optimizer");
    components = {"model", "train"};
  }
  root.attrs["components"] = components;
  const std::string dir = path_join(run, step_dir_name(step));
  CKPT_RETURN_IF_ERROR(env->make_dirs(dir));
  CKPT_RETURN_IF_ERROR(store::write_rank(env, dir, 0, step, 1, &root).status());
  return store::commit(env, run, step, 1, components);
}

// Deletes a group with h5py, as a user would (Debian's python3-h5py, which CI has).
void h5py_delete(const std::string& file, const std::string& group) {
  std::string out;
  const int rc = testing::run_command("/usr/bin/python3 -c 'import h5py; f = h5py.File(\"" + file +
                                          "\", \"r+\"); del f[\"" + group + "\"]; f.close()' 2>&1",
                                      &out);
  INFO(out);
  REQUIRE(rc == 0);
}

bool has_finding(const verify::AuditReport& r, const std::string& text) {
  for (const auto& f : r.findings) {
    if (f.message.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a group deleted with h5py is audited per component, not refused", "[verify]") {
  TempDir tmp;
  Env* env = Env::posix();
  for (int64_t s : {10, 20, 30}) REQUIRE(save(env, tmp.path(), s).is_ok());
  {
    auto ok = verify::audit_path(test::all_readers(), Env::posix(), tmp.path(), {});
    REQUIRE(ok.is_ok());
    CHECK(ok->find(AuditComponent::kOptimizer)->status == ComponentStatus::kPresent);
  }
  h5py_delete(tmp.path() + "/step-000000000020/rank-00000.h5", "optimizer");
  h5py_delete(tmp.path() + "/step-000000000030/rank-00000.h5", "optimizer");

  auto one =
      verify::audit_path(test::all_readers(), Env::posix(), tmp.path() + "/step-000000000030", {});
  REQUIRE(one.is_ok());  // was: Corrupt (exit 65) with no components
  CHECK_FALSE(one->complete);
  CHECK(one->find(AuditComponent::kOptimizer)->status == ComponentStatus::kMissing);
  CHECK(one->find(AuditComponent::kModel)->status == ComponentStatus::kPresent);
  CHECK(one->find(AuditComponent::kCounters)->status == ComponentStatus::kPresent);
  CHECK(one->find(AuditComponent::kOptimizer)->evidence.find("no /optimizer group") !=
        std::string::npos);
  std::string all;
  for (const auto& f : one->findings) all += f.message + "\n";
  INFO(all);
  CHECK(has_finding(*one, "manifest"));
  CHECK(verify::report_to_json(*one)["components"]["optimizer"]["status"] == "missing");

  auto run = verify::audit_path(test::all_readers(), Env::posix(), tmp.path(), {});
  REQUIRE(run.is_ok());
  CHECK(run->find(AuditComponent::kOptimizer)->status == ComponentStatus::kMissing);
  CHECK(has_finding(*run, "/optimizer has been missing since step 20"));
}

TEST_CASE("a run's history reaches back through the journal past retention", "[verify]") {
  TempDir tmp;
  Env* env = Env::posix();
  // Steps 10 and 20 were saved and then removed by retention: only the journal remembers them.
  // Step 10 had the optimizer, step 20 did not; the committed 30 and 40 lack it too.
  {
    auto journal = store::Journal::open(env, tmp.path());
    REQUIRE(journal.is_ok());
    REQUIRE((*journal)
                ->append(store::JournalEventType::kSave,
                         {{"step", 10}, {"components", {"model", "optimizer", "train"}}}, true)
                .is_ok());
    REQUIRE((*journal)
                ->append(store::JournalEventType::kSave,
                         {{"step", 20}, {"components", {"model", "train"}}}, true)
                .is_ok());
  }
  for (int64_t s : {30, 40}) REQUIRE(save(env, tmp.path(), s, false).is_ok());
  auto run = verify::audit_path(test::all_readers(), Env::posix(), tmp.path(), {});
  REQUIRE(run.is_ok());
  std::string all;
  for (const auto& f : run->findings) all += f.message + "\n";
  INFO(all);
  CHECK(run->find(AuditComponent::kOptimizer)->status == ComponentStatus::kMissing);
  CHECK(has_finding(*run, "/optimizer has been missing since step 20 (journal.jsonl's save event"));

  // Without the journal, nothing committed ever held an optimizer: no history to tell.
  REQUIRE(env->remove_file(tmp.path() + "/journal.jsonl").is_ok());
  auto bare = verify::audit_path(test::all_readers(), Env::posix(), tmp.path(), {});
  REQUIRE(bare.is_ok());
  CHECK(bare->find(AuditComponent::kOptimizer)->status == ComponentStatus::kMissing);
  CHECK_FALSE(has_finding(*bare, "/optimizer has been missing since"));
}

}  // namespace ckpt::ours_audit_test

namespace ckpt::ours_audit_test {

TEST_CASE("diff --deep compares the model values of our own format", "[verify]") {
  TempDir tmp;
  Env* env = Env::posix();
  const std::string a = path_join(tmp.path(), "a"), b = path_join(tmp.path(), "b");
  REQUIRE(save(env, a, 10).is_ok());
  REQUIRE(save(env, b, 10, true, 1.25f).is_ok());  // one element of /model/w differs by 0.25

  auto shallow = verify::diff_paths(test::all_readers(), Env::posix(), a, b, false);
  REQUIRE(shallow.is_ok());
  CHECK(shallow->changed.empty());  // same dtype and shape: not a change without --deep

  auto deep = verify::diff_paths(test::all_readers(), Env::posix(), a, b, true);
  REQUIRE(deep.is_ok());
  REQUIRE(deep->changed.size() == 1);
  CHECK(deep->changed[0].name == "w");
  REQUIRE(deep->changed[0].max_abs_diff.has_value());
  CHECK(*deep->changed[0].max_abs_diff == Approx(0.25));

  auto same = verify::diff_paths(test::all_readers(), Env::posix(), a, a, true);
  REQUIRE(same.is_ok());
  CHECK(same->changed.empty());
}

}  // namespace ckpt::ours_audit_test

namespace ckpt::ours_audit_test {
namespace {

// A one-rank checkpoint whose loader cursor stands at `cursor` (100 samples, batch 4) and whose
// counters say `global_step` optimizer steps of `accum` batches each (+ `pos`); `journal` (lines
// of journal.jsonl) is written into the run directory first.
verify::AuditReport audit_loader(int64_t global_step, int64_t accum, int64_t pos,
                                 loader::LoaderCursor cursor, const std::string& journal) {
  TempDir tmp;
  if (!journal.empty()) testing::write_file(path_join(tmp.path(), "journal.jsonl"), journal);
  static std::vector<float> w(8, 1.0f);
  Node root;
  root.attrs["step"] = global_step;
  root.child("model").tensors["w"] = Tensor::borrow(DType::kFloat32, {8}, w.data(), 32);
  loader::SamplerSpec spec;
  spec.dataset_size = 100;
  spec.batch_size = 4;
  loader::sampler_to_node(spec, cursor, &root.child("loader"));
  Node& t = root.child("train");
  t.attrs["global_step"] = global_step;
  t.attrs["epoch"] = static_cast<int64_t>(cursor.epoch);
  t.attrs["grad_accum_steps"] = accum;
  t.attrs["grad_accum_pos"] = pos;
  const std::vector<std::string> components{"loader", "model", "train"};
  root.attrs["components"] = components;
  const std::string dir = path_join(tmp.path(), step_dir_name(global_step));
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  REQUIRE(store::write_rank(Env::posix(), dir, 0, global_step, 1, &root).is_ok());
  REQUIRE(store::commit(Env::posix(), tmp.path(), global_step, 1, components).is_ok());
  auto r = verify::audit_path(test::all_readers(), Env::posix(), dir, {});
  REQUIRE(r.is_ok());
  return *r;
}

// The cursor `batches` global batches of 4 into the run, no journal.
verify::AuditReport audit_cursor(int64_t global_step, int64_t accum, int64_t pos,
                                 uint64_t batches) {
  const uint64_t spe = 100 / 4;
  return audit_loader(global_step, accum, pos, {batches / spe, (batches % spe) * 4}, "");
}

TEST_CASE("after a restore the loader cursor is counted from the one restored", "[verify]") {
  // Saved at 2 ranks (global batch 8) up to step 5: position 40; restored at 1 rank (batch 4)
  // from there, 4 more steps: position 56, which counting from step 0 at batch 4 calls 36.
  const std::string journal =
      R"({"event":"save","step":5,"checkpoint":"step-000000000005"})"
      "\n"
      R"({"event":"restore","step":5,"checkpoint":"step-000000000005","loader":{"epoch":0,"position":40}})"
      "\n"
      R"({"event":"save","step":9,"checkpoint":"step-000000000009"})"
      "\n";
  verify::AuditReport ok = audit_loader(9, 1, 0, {0, 56}, journal);
  CHECK_FALSE(has_finding(ok, "loader cursor"));
  CHECK(ok.find(AuditComponent::kLoader)->status == ComponentStatus::kPresent);
  // Without the journal the same checkpoint is judged from step 0 (what it can know).
  CHECK(has_finding(audit_loader(9, 1, 0, {0, 56}, ""), "implies epoch 0 position 36"));
  // A loader reset after that restore (back at the start of the epoch) is still caught.
  verify::AuditReport reset = audit_loader(9, 1, 0, {0, 16}, journal);
  CHECK(has_finding(reset,
                    "implies epoch 0 position 56, counted from the cursor restored at step 5"));
  CHECK(reset.find(AuditComponent::kLoader)->status == ComponentStatus::kInconsistent);
}

TEST_CASE("with gradient accumulation a step consumes grad_accum batches of the loader",
          "[verify]") {
  // 7 optimizer steps of 3 batches, 1 more drawn for the 8th: 22 batches, epoch 0 position 88.
  verify::AuditReport ok = audit_cursor(7, 3, 1, 22);
  CHECK_FALSE(has_finding(ok, "loader cursor"));
  CHECK(ok.find(AuditComponent::kLoader)->status == ComponentStatus::kPresent);
  // 30 batches: past an epoch boundary, still consistent.
  CHECK_FALSE(has_finding(audit_cursor(10, 3, 0, 30), "loader cursor"));
  // A cursor at one batch per step (the accumulation forgotten) is the reset it would be.
  verify::AuditReport bad = audit_cursor(7, 3, 1, 7);
  CHECK(has_finding(bad,
                    "but global step 7 (22 batches with gradient accumulation 3) implies "
                    "epoch 0 position 88"));
  // Without accumulation a step is one batch, as before.
  CHECK_FALSE(has_finding(audit_cursor(12, 1, 0, 12), "loader cursor"));
  CHECK(has_finding(audit_cursor(12, 1, 0, 3), "but global step 12 implies epoch 0 position 48"));
}

// A one-rank checkpoint at global step 9 whose scheduler stepped `last_step` times, with the
// train component's scheduler_steps_per_step `k` (0: not recorded).
verify::AuditReport audit_scheduler_steps(int64_t last_step, int64_t k) {
  TempDir tmp;
  static std::vector<float> w(8, 1.0f);
  Node root;
  root.attrs["step"] = int64_t{9};
  root.child("model").tensors["w"] = Tensor::borrow(DType::kFloat32, {8}, w.data(), 32);
  Node& s = root.child("scheduler");
  s.attrs["kind"] = std::string("linear");
  s.attrs["last_step"] = last_step;
  s.attrs["base_lr"] = 0.1;
  s.attrs["last_lr"] = 0.1;
  Node& t = root.child("train");
  t.attrs["global_step"] = int64_t{9};
  t.attrs["epoch"] = int64_t{0};
  if (k > 0) t.attrs["scheduler_steps_per_step"] = k;
  const std::vector<std::string> components{"model", "scheduler", "train"};
  root.attrs["components"] = components;
  const std::string dir = path_join(tmp.path(), step_dir_name(9));
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  REQUIRE(store::write_rank(Env::posix(), dir, 0, 9, 1, &root).is_ok());
  REQUIRE(store::commit(Env::posix(), tmp.path(), 9, 1, components).is_ok());
  auto r = verify::audit_path(test::all_readers(), Env::posix(), dir, {});
  REQUIRE(r.is_ok());
  return *r;
}

TEST_CASE("a scheduler stepped once per process is judged by the recorded count", "[verify]") {
  // Accelerate with 2 processes: 18 scheduler steps in 9 optimizer steps, recorded as 2 a step.
  verify::AuditReport two = audit_scheduler_steps(18, 2);
  CHECK(two.find(AuditComponent::kScheduler)->status == ComponentStatus::kPresent);
  CHECK(two.find(AuditComponent::kScheduler)->evidence.find("scheduler_steps_per_step 2") !=
        std::string::npos);
  // The same count unrecorded, and a scheduler that stepped once a step where 2 were recorded
  // (re-created on resume, say), are the mismatch they look like.
  CHECK(has_finding(audit_scheduler_steps(18, 0), "last_epoch 18 != global_step 9"));
  CHECK(has_finding(audit_scheduler_steps(9, 2), "last_epoch 9 != 2 x global_step 9"));
  CHECK(audit_scheduler_steps(9, 1).find(AuditComponent::kScheduler)->status ==
        ComponentStatus::kPresent);
}

}  // namespace
}  // namespace ckpt::ours_audit_test
