// The tiling check: exact tilings pass; a gap, an overlap, a box out of bounds are each refused
// naming the tensor and the element range. Loss accounting names what a missing file takes.
#include <catch2/catch.hpp>

#include "ckpt/store/box_tiling.h"
#include "tests/shard/shard_layout.h"

namespace ckpt::store::tiling_test {
namespace {

using testing::mesh_box;

std::vector<Extent> grid_boxes(const std::vector<int64_t>& shape, const std::vector<int64_t>& mesh,
                               const std::vector<int>& dims) {
  int64_t ranks = 1;
  for (int64_t m : mesh) ranks *= m;
  std::vector<Extent> out;
  for (int64_t r = 0; r < ranks; ++r) out.push_back(mesh_box(shape, mesh, dims, r));
  return out;
}

TilingReport check(const std::vector<int64_t>& shape, const std::vector<Extent>& boxes) {
  TilingReport r;
  check_tensor_tiling("w", shape, boxes, &r);
  return r;
}

TEST_CASE("tiling: exact tilings pass", "[shard]") {
  CHECK(check({8, 16}, grid_boxes({8, 16}, {2, 2}, {0, 1})).ok());
  CHECK(check({17, 3}, grid_boxes({17, 3}, {4}, {0})).ok());          // 5, 5, 5, 2
  CHECK(check({3, 3}, grid_boxes({3, 3}, {4}, {0})).ok());            // 1, 1, 1, 0 (empty)
  CHECK(check({64, 48}, grid_boxes({64, 48}, {8, 4}, {0, 0})).ok());  // nested Shard(0)
  CHECK(check({6, 10, 4}, grid_boxes({6, 10, 4}, {2, 5}, {2, 1})).ok());
  CHECK(check({}, {Extent{}}).ok());  // a 0-d tensor
  CHECK(check({0, 5}, {}).ok());      // no elements, no box
  // Flat ranges of a [5, 4] tensor as row boxes, not a grid.
  CHECK(check({5, 4}, {make_extent({0, 0}, {2, 4}), make_extent({2, 0}, {1, 2}),
                       make_extent({2, 2}, {1, 2}), make_extent({3, 0}, {2, 4})})
            .ok());
}

TEST_CASE("tiling: a gap is refused naming its element range", "[shard]") {
  std::vector<Extent> boxes = grid_boxes({8, 16}, {2, 2}, {0, 1});
  boxes.erase(boxes.begin() + 3);  // [4:8, 8:16]
  const TilingReport r = check({8, 16}, boxes);
  REQUIRE(r.findings.size() == 1);
  CHECK(r.findings[0].problem == TilingProblem::kGap);
  CHECK(r.findings[0].range == make_extent({4, 8}, {4, 8}));
  CHECK(r.findings[0].message == "tensor \"w\": gap: elements [4:8, 8:16] are in no box");

  // A gap along dimension 0 covers whole rows; no box at all leaves the whole tensor.
  const TilingReport rows =
      check({17, 3}, {make_extent({0, 0}, {5, 3}), make_extent({7, 0}, {10, 3})});
  REQUIRE(rows.findings.size() == 1);
  CHECK(rows.findings[0].range == make_extent({5, 0}, {2, 3}));
  const TilingReport none = check({4}, {});
  REQUIRE(none.findings.size() == 1);
  CHECK(none.findings[0].range == make_extent({0}, {4}));
  CHECK(check({}, {}).findings.size() == 1);  // a 0-d tensor without its box
}

TEST_CASE("tiling: an overlap is refused naming both boxes and the shared range", "[shard]") {
  std::vector<Extent> boxes = grid_boxes({8, 16}, {2, 2}, {0, 1});
  boxes[1] = make_extent({0, 6}, {4, 10});  // reaches 2 columns into box 0
  const TilingReport r = check({8, 16}, boxes);
  REQUIRE(r.findings.size() == 1);
  CHECK(r.findings[0].problem == TilingProblem::kOverlap);
  CHECK(r.findings[0].range == make_extent({0, 6}, {4, 2}));
  CHECK(r.findings[0].boxes == std::vector<size_t>{0, 1});
  CHECK(r.findings[0].message ==
        "tensor \"w\": overlap: elements [0:4, 6:8] are in both box 0 [0:4, 0:8] and box 1 "
        "[0:4, 6:16]");
  // The same box twice (a replicated tensor written by two ranks) is one overlap.
  const TilingReport twice =
      check({4, 4}, {make_extent({0, 0}, {4, 4}), make_extent({0, 0}, {4, 4})});
  REQUIRE(twice.findings.size() == 1);
  CHECK(twice.findings[0].range == make_extent({0, 0}, {4, 4}));
}

TEST_CASE("tiling: a box outside the tensor is refused naming it", "[shard]") {
  std::vector<Extent> boxes = grid_boxes({8, 16}, {2}, {0});
  boxes[1] = make_extent({4, 0}, {5, 16});
  const TilingReport r = check({8, 16}, boxes);
  REQUIRE(!r.findings.empty());
  CHECK(r.findings[0].problem == TilingProblem::kOutOfBounds);
  CHECK(
      r.findings[0].message ==
      "tensor \"w\": out of bounds: box 1 [4:9, 0:16] is outside the tensor's bounds [0:8, 0:16]");
  // The out-of-bounds box is left out of the sweep, so its rows are a gap as well.
  REQUIRE(r.findings.size() == 2);
  CHECK(r.findings[1].range == make_extent({4, 0}, {4, 16}));
  CHECK(check({8}, {make_extent({-1}, {9})}).findings[0].problem == TilingProblem::kOutOfBounds);
  CHECK(check({8}, {make_extent({0, 0}, {8, 1})}).findings[0].problem ==
        TilingProblem::kOutOfBounds);  // another rank
}

TEST_CASE("tiling: findings are capped and counted", "[shard]") {
  std::vector<Extent> boxes;
  for (int64_t i = 0; i < 100; i += 2) boxes.push_back(make_extent({i}, {1}));  // every other one
  TilingReport r;
  check_tensor_tiling("w", {100}, boxes, &r, 10);
  CHECK(r.findings.size() == 10);
  CHECK(r.left_off == 40);
  CHECK(tiling_status(r, "INDEX").message() ==
        "INDEX: boxes do not tile: tensor \"w\": gap: elements [1:2] are in no box (and 49 more)");
}

TEST_CASE("tiling: the check of a whole index names file and box", "[shard]") {
  std::vector<testing::SyntheticTensor> tensors = {{"a", {8, 16}}, {"b", {17, 3}}};
  std::vector<std::vector<Extent>> boxes = {grid_boxes({8, 16}, {2, 2}, {0, 1}),
                                            grid_boxes({17, 3}, {4}, {0})};
  auto saved = testing::save_synthetic(tensors, boxes, 4);
  const TilingReport ok = check_index_tiling(saved.index);
  CHECK(ok.ok());
  CHECK(ok.tensors == 2);
  CHECK(ok.boxes == 8);

  boxes[1][2] = make_extent({9, 0}, {6, 3});  // overlaps rank 1's [5:10]
  auto bad = testing::save_synthetic(tensors, boxes, 4);
  const Status s = tiling_status(check_index_tiling(bad.index), "run/step-000000000007/INDEX");
  CHECK(s.code() == Code::kCorrupt);
  CHECK(s.message() ==
        "run/step-000000000007/INDEX: boxes do not tile: tensor \"b\": overlap: elements "
        "[9:10, 0:3] are in both box 1 [5:10, 0:3] in rank-00001.h5 and box 2 [9:15, 0:3] in "
        "rank-00002.h5");
}

TEST_CASE("tiling: a large grid is checked per slab", "[shard]") {
  // 4,096 x 8 boxes (FSDP x TP at 32k ranks) of one tensor: exact, then one box removed.
  const std::vector<int64_t> shape = {65536, 4096};
  std::vector<Extent> boxes = grid_boxes(shape, {4096, 8}, {0, 1});
  CHECK(check(shape, boxes).ok());
  boxes.erase(boxes.begin() + 12345);
  const TilingReport r = check(shape, boxes);
  REQUIRE(r.findings.size() == 1);
  CHECK(r.findings[0].range == mesh_box(shape, {4096, 8}, {0, 1}, 12345));
}

TEST_CASE("loss: a missing rank file names the tensors and ranges it held", "[shard]") {
  std::vector<testing::SyntheticTensor> tensors = {{"a", {8, 16}}, {"b", {17, 3}}, {"c", {4}}};
  std::vector<std::vector<Extent>> boxes = {grid_boxes({8, 16}, {2, 2}, {0, 1}),
                                            grid_boxes({17, 3}, {4}, {0}),
                                            {make_extent({0}, {4})}};  // rank 0 only
  auto saved = testing::save_synthetic(tensors, boxes, 4);
  auto loss = account_loss(saved.index, std::vector<std::string>{"rank-00003.h5"});
  REQUIRE(loss.is_ok());
  REQUIRE(loss->tensors.size() == 2);
  CHECK(loss->tensors[0].tensor == "a");
  CHECK(loss->tensors[0].ranges == std::vector<Extent>{make_extent({4, 8}, {4, 8})});
  CHECK(loss->tensors[1].tensor == "b");
  CHECK(loss->tensors[1].ranges == std::vector<Extent>{make_extent({15, 0}, {2, 3})});
  CHECK(loss->lost_bytes == (32 + 6) * 4);
  CHECK(loss->lines() == std::vector<std::string>{
                             "tensor \"a\" loses 32 of 128 elements: [4:8, 8:16] (rank-00003.h5)",
                             "tensor \"b\" loses 6 of 51 elements: [15:17, 0:3] (rank-00003.h5)"});

  auto two = account_loss(saved.index, std::vector<std::string>{"rank-00000.h5", "rank-00002.h5"});
  REQUIRE(two.is_ok());
  REQUIRE(two->tensors.size() == 3);
  CHECK(two->tensors[0].ranges ==
        std::vector<Extent>{make_extent({0, 0}, {4, 8}), make_extent({4, 0}, {4, 8})});
  CHECK(two->tensors[0].files == std::vector<std::string>{"rank-00000.h5", "rank-00002.h5"});
  CHECK(two->tensors[2].whole());
  CHECK(two->lines()[2] == "tensor \"c\" loses all 4 of 4 elements: [0:4] (rank-00000.h5)");

  CHECK(account_loss(saved.index, std::vector<std::string>{}).value().tensors.empty());
  auto unknown = account_loss(saved.index, std::vector<std::string>{"rank-00009.h5"});
  CHECK(unknown.status().code() == Code::kInvalidArgument);
  CHECK(unknown.status().message() == "account_loss: \"rank-00009.h5\" is not a file of the index");
}

}  // namespace
}  // namespace ckpt::store::tiling_test
