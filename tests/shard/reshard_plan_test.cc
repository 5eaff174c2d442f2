// Resharding read plans: a checkpoint saved at one layout, planned for another, and the plan
// applied to the saved bytes gives every target exactly the bytes of its part of the global
// tensor. Also: a rank reads only the files its boxes overlap.
#include "resume/reshard_plan.h"

#include <catch2/catch.hpp>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_tiling.h"
#include "tests/shard/shard_layout.h"

namespace ckpt::resume::reshard_plan_test {
namespace {

using store::Extent;
using store::make_extent;
using testing::mesh_box;
using testing::nothing;
using testing::SyntheticTensor;

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Boxes of every tensor on a mesh, by placements (tensor dimension per mesh dimension).
std::vector<std::vector<Extent>> layout(const std::vector<SyntheticTensor>& tensors,
                                        const std::vector<int64_t>& mesh,
                                        const std::vector<std::vector<int>>& placements) {
  std::vector<std::vector<Extent>> out;
  for (size_t t = 0; t < tensors.size(); ++t) {
    std::vector<Extent> boxes;
    for (int64_t r = 0; r < product(mesh); ++r) {
      boxes.push_back(mesh_box(tensors[t].shape, mesh, placements[t], r));
    }
    out.push_back(boxes);
  }
  return out;
}

// Plans and applies every rank of the target layout; checks every target's bytes. Returns the
// plans (per target rank).
std::vector<ReshardPlan> restore_all(const testing::SavedCheckpoint& saved,
                                     const std::vector<SyntheticTensor>& tensors,
                                     const std::vector<std::vector<Extent>>& target_boxes,
                                     int64_t target_ranks) {
  std::vector<ReshardPlan> plans;
  for (int64_t r = 0; r < target_ranks; ++r) {
    std::vector<TargetBox> targets;
    for (size_t t = 0; t < tensors.size(); ++t)
      targets.push_back({tensors[t].name, target_boxes[t][r]});
    auto plan = plan_reshard(saved.index, targets);
    INFO("target rank " << r << ": " << plan.status().to_string());
    REQUIRE(plan.is_ok());
    const std::vector<std::string> got = testing::apply_plan(saved, *plan);
    for (size_t t = 0; t < tensors.size(); ++t) {
      INFO("tensor " << tensors[t].name << " target " << store::extent_string(targets[t].extent));
      CHECK(got[t] == testing::expected_bytes(tensors[t], targets[t].extent));
    }
    plans.push_back(std::move(*plan));
  }
  return plans;
}

const std::vector<SyntheticTensor> kModel = {
    {"w1", {16, 12}, DType::kFloat32, 1}, {"w2", {12, 16}, DType::kBFloat16, 2},
    {"bias", {16}, DType::kFloat64, 3},   {"uneven", {17, 5}, DType::kInt32, 4},
    {"step", {}, DType::kInt64, 5},       {"cube", {4, 6, 10}, DType::kUInt8, 6}};

// Shard(0) of every tensor with a dimension (FSDP2). The 0-d step is restored on every rank
// but, replicated, saved by rank 0 only.
std::vector<std::vector<Extent>> fsdp(int64_t ranks, bool saving = false) {
  auto boxes = layout(kModel, {ranks}, {{0}, {0}, {0}, {0}, {-1}, {0}});
  for (int64_t r = 1; saving && r < ranks; ++r) boxes[4][r] = nothing();
  return boxes;
}

TEST_CASE("reshard: FSDP saved at 2 ranks, restored at 1, 2, 3 and 4", "[shard][resume]") {
  auto saved = testing::save_synthetic(kModel, fsdp(2, true), 2);
  CHECK(store::check_index_tiling(saved.index).ok());
  for (int64_t target : {1, 2, 3, 4}) {
    INFO("restored at " << target);
    auto boxes = fsdp(target);
    restore_all(saved, kModel, boxes, target);
  }
}

TEST_CASE("reshard: a rank reads only the files its boxes overlap", "[shard][resume]") {
  auto saved = testing::save_synthetic(kModel, fsdp(4, true), 4);
  // Same layout: rank r reads its own file (and rank 0's for the 0-d step).
  auto same = restore_all(saved, kModel, fsdp(4), 4);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<std::string> names;
    for (const ReshardFile& f : same[r].files) names.push_back(f.name);
    std::vector<std::string> want = {"rank-00000.h5"};
    if (r > 0) want.push_back("rank-0000" + std::to_string(r) + ".h5");
    CHECK(names == want);
    // Whole boxes: one run per box, the bytes read are the bytes wanted.
    CHECK(same[r].run_bytes == same[r].box_bytes);
  }
  // 4 -> 2: rank 0 of 2 reads files 0 and 1 only; rank 1 reads files 2 and 3, file 0 for the
  // step, and file 1 for row 9 of "uneven" (saved 5, 5, 5, 2; restored 9, 8).
  auto halves = restore_all(saved, kModel, fsdp(2), 2);
  auto names = [](const ReshardPlan& p) {
    std::vector<std::string> out;
    for (const ReshardFile& f : p.files) out.push_back(f.name);
    return out;
  };
  CHECK(names(halves[0]) == std::vector<std::string>{"rank-00000.h5", "rank-00001.h5"});
  CHECK(names(halves[1]) == std::vector<std::string>{"rank-00000.h5", "rank-00001.h5",
                                                     "rank-00002.h5", "rank-00003.h5"});
  const ReshardFile& row9 = halves[1].files[1];
  REQUIRE(row9.runs.size() == 1);
  CHECK(row9.runs[0].nbytes == 5 * 4);
  CHECK(row9.boxes.size() == 1);
}

TEST_CASE("reshard: a 2x2 mesh (Shard(0), Shard(1)) restored at 2 (FSDP) and at 1",
          "[shard][resume]") {
  const std::vector<std::vector<int>> tp = {{0, 1}, {1, 0}, {0, -1}, {0, 1}, {-1, -1}, {2, 1}};
  auto saved_boxes = layout(kModel, {2, 2}, tp);
  // Replicated pieces are written once: bias on mesh column 0, step on rank 0.
  for (int64_t r = 0; r < 4; ++r) {
    if (r % 2 == 1) saved_boxes[2][r] = nothing();
    if (r > 0) saved_boxes[4][r] = nothing();
  }
  auto saved = testing::save_synthetic(kModel, saved_boxes, 4);
  CHECK(store::check_index_tiling(saved.index).ok());
  restore_all(saved, kModel, fsdp(2), 2);
  auto whole = restore_all(saved, kModel, fsdp(1), 1);
  CHECK(whole[0].files.size() == 4);
  // Shard(1) saved, whole restored: one run per row of each saved box.
  bool strided = false;
  for (const ReshardFile& f : whole[0].files) {
    for (const ReshardRun& r : f.runs) strided = strided || r.nbytes < 16 * 4;
  }
  CHECK(strided);
}

TEST_CASE("reshard: uneven rows and an empty local shard", "[shard][resume]") {
  const std::vector<SyntheticTensor> model = {{"u", {17, 3}, DType::kFloat32, 9},
                                              {"tiny", {3, 2}, DType::kInt16, 8}};
  auto boxes4 = layout(model, {4}, {{0}, {0}});
  REQUIRE(boxes4[0][3] == make_extent({15, 0}, {2, 3}));  // 5, 5, 5, 2
  REQUIRE(boxes4[1][3].empty());                          // 1, 1, 1, 0
  auto saved = testing::save_synthetic(model, boxes4, 4);
  CHECK(saved.index.tensor(saved.index.find_tensor("tiny")).box_count == 3);
  auto plans = restore_all(saved, model, layout(model, {3}, {{0}, {0}}), 3);  // 6, 6, 5
  CHECK(plans[2].files.size() == 2);  // rows 12..16 of u: files 2 and 3
  // Restored at 4 again: rank 3's tiny shard is empty and reads nothing for it.
  auto again = restore_all(saved, model, boxes4, 4);
  CHECK(again[3].target_bytes[1] == 0);
  for (const ReshardFile& f : again[3].files) {
    for (const ReshardRun& r : f.runs) CHECK(r.target == 0);
  }
}

TEST_CASE("reshard: boxes that are not a grid (a tall box beside short ones)", "[shard][resume]") {
  // [0:4, 0:2] on rank 0 spans both row cells that ranks 1 and 2 cut at row 2: a target in rows
  // 2..3 must still find it, though its first row is 0.
  const std::vector<SyntheticTensor> model = {{"t", {4, 4}, DType::kFloat32, 5}};
  auto saved = testing::save_synthetic(
      model,
      {{make_extent({0, 0}, {4, 2}), make_extent({0, 2}, {2, 2}), make_extent({2, 2}, {2, 2})}}, 3);
  REQUIRE(saved.index.tensor(0).max_row_span == 1);
  REQUIRE_FALSE(saved.index.tensor(0).cell_aligned);
  restore_all(
      saved, model,
      {{make_extent({2, 0}, {2, 4}), make_extent({0, 0}, {2, 4}), make_extent({1, 1}, {2, 2})}}, 3);
}

TEST_CASE("reshard: flat ranges (ZeRO-style row boxes) restored as Shard(0) and whole",
          "[shard][resume]") {
  // 20 elements of a [5, 4] tensor cut into flat ranges [0, 7), [7, 14), [14, 20), each split into
  // a partial first row, whole rows and a partial last row; one box per file here.
  const std::vector<SyntheticTensor> model = {{"flat", {5, 4}, DType::kInt16, 6}};
  const std::vector<Extent> boxes = {make_extent({0, 0}, {1, 4}), make_extent({1, 0}, {1, 3}),
                                     make_extent({1, 3}, {1, 1}), make_extent({2, 0}, {1, 4}),
                                     make_extent({3, 0}, {1, 2}), make_extent({3, 2}, {1, 2}),
                                     make_extent({4, 0}, {1, 4})};
  auto saved = testing::save_synthetic(model, {boxes}, 7);
  CHECK(store::check_index_tiling(saved.index).ok());
  restore_all(saved, model, layout(model, {2}, {{0}}), 2);
  restore_all(saved, model, layout(model, {1}, {{-1}}), 1);
}

TEST_CASE("reshard: runs adjacent in a file are one read", "[shard][resume]") {
  // Four row boxes of a [4, 1024] float32 tensor in one file, each exactly 4 KiB, back to back.
  const std::vector<SyntheticTensor> model = {{"rows", {4, 1024}, DType::kFloat32, 7}};
  auto saved = testing::save_synthetic(model, layout(model, {4}, {{0}}), 1, {0, 0, 0, 0});
  auto plans = restore_all(saved, model, {{make_extent({0, 0}, {4, 1024})}}, 1);
  REQUIRE(plans[0].files.size() == 1);
  CHECK(plans[0].files[0].runs.size() == 4);
  REQUIRE(plans[0].files[0].reads.size() == 1);
  CHECK(plans[0].files[0].reads[0].offset == 4096);
  CHECK(plans[0].files[0].reads[0].nbytes == 4 * 4096);
  // Two targets reading the middle rows: one read serves both.
  auto two = plan_reshard(saved.index, {{"rows", make_extent({1, 0}, {1, 1024})},
                                        {"rows", make_extent({2, 0}, {1, 1024})}});
  REQUIRE(two.is_ok());
  REQUIRE(two->files[0].reads.size() == 1);
  CHECK(two->files[0].reads[0].offset == 2 * 4096);
  CHECK(two->files[0].reads[0].nbytes == 2 * 4096);
}

TEST_CASE("reshard: runs are maximal in the saved box and the target", "[shard][resume]") {
  // Saved as column halves of a [4, 8] tensor.
  const std::vector<SyntheticTensor> model = {{"m", {4, 8}, DType::kFloat32, 3}};
  auto saved = testing::save_synthetic(model, layout(model, {2}, {{1}}), 2);
  auto plan = plan_reshard(saved.index, {{"m", make_extent({1, 0}, {2, 4})}});
  REQUIRE(plan.is_ok());
  REQUIRE(plan->files.size() == 1);
  // Rows 1..2 of the left half: contiguous in the saved box and in the target.
  REQUIRE(plan->files[0].runs.size() == 1);
  CHECK(plan->files[0].runs[0].nbytes == 2 * 4 * 4);
  CHECK(testing::apply_plan(saved, *plan)[0] ==
        testing::expected_bytes(model[0], make_extent({1, 0}, {2, 4})));
  // A target across both halves: one run per row per half.
  auto across = plan_reshard(saved.index, {{"m", make_extent({0, 2}, {4, 4})}});
  REQUIRE(across.is_ok());
  REQUIRE(across->files.size() == 2);
  CHECK(across->files[0].runs.size() == 4);
  CHECK(across->files[0].runs[0].nbytes == 2 * 4);
}

TEST_CASE("reshard: what the planner refuses", "[shard][resume]") {
  const std::vector<SyntheticTensor> model = {{"m", {8, 4}, DType::kFloat32, 3}};
  auto gapped_boxes = layout(model, {4}, {{0}});
  gapped_boxes[0][2] = nothing();  // rows 4..6 saved by nobody
  auto gapped = testing::save_synthetic(model, gapped_boxes, 4);
  auto s = plan_reshard(gapped.index, {{"m", make_extent({0, 0}, {8, 4})}});
  CHECK(s.status().code() == Code::kCorrupt);
  CHECK(s.status().message() ==
        "reshard plan: tensor \"m\" target [0:8, 0:4]: the saved boxes cover 24 of its 32 "
        "elements (the index does not tile the tensor)");
  auto fine = testing::save_synthetic(model, layout(model, {4}, {{0}}), 4);
  CHECK(plan_reshard(fine.index, {{"x", make_extent({0}, {1})}}).status().code() ==
        Code::kNotFound);
  CHECK(plan_reshard(fine.index, {{"m", make_extent({4, 0}, {5, 4})}}).status().message() ==
        "reshard plan: tensor \"m\" target [4:9, 0:4]: is outside the tensor (dimension 0 has 8 "
        "elements)");
  CHECK(plan_reshard(fine.index, {{"m", make_extent({0}, {8})}}).status().code() ==
        Code::kInvalidArgument);
}

TEST_CASE("reshard: the touched boxes as manifest entries for the planned reader",
          "[shard][resume]") {
  const std::vector<SyntheticTensor> model = {{"m", {8, 4}, DType::kFloat32, 3}};
  auto saved = testing::save_synthetic(model, layout(model, {2}, {{0}}), 2);
  auto plan = plan_reshard(saved.index, {{"m", make_extent({2, 0}, {4, 4})}});
  REQUIRE(plan.is_ok());
  REQUIRE(plan->files.size() == 2);
  const std::vector<ManifestEntry> e = box_entries(saved.index, plan->files[1]);
  REQUIRE(e.size() == 1);
  CHECK(e[0].path == "/m");
  CHECK(e[0].shape == std::vector<int64_t>{4, 4});
  CHECK(e[0].offset == 4096);
  CHECK(e[0].nbytes == 64);
  const std::string bytes = saved.files[1].substr(4096, 64);
  CHECK(e[0].xxh3 == xxh3_64(bytes.data(), bytes.size()));
  CHECK(plan->files[1].run_bytes == 32);  // rows 4..5 of the box
  CHECK(plan->files[1].box_bytes == 64);
}

}  // namespace
}  // namespace ckpt::resume::reshard_plan_test
