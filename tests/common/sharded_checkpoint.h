// A sharded checkpoint (format version 2) written with the store for the tests of `ckpt export`,
// `ckpt verify` and `ckpt audit`: 2 ranks, a Shard(0) weight, a Shard(1) weight, a replicated
// bias that rank 1 writes, a plain tensor on every rank, and an AdamW moment sharded like its
// parameter; and the same global tensors as a plain 1-rank checkpoint. Every float32 element i
// of a global tensor is base + i, so a test knows what each whole tensor must hold.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/format/tree.h"
#include "ckpt/io/env.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace ckpt_test::sharded {

using namespace ckpt;

// A float32 global tensor whose element i is base + i.
struct Global {
  std::string path;  // "/model/w"
  std::vector<int64_t> shape;
  float base = 0;
  std::vector<float> values() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
    return v;
  }
};

// The node of `root` that holds `path`'s tensor, and the tensor's name in it.
inline std::pair<Node*, std::string> place(Node* root, const std::string& path) {
  Node* n = root;
  size_t at = 1;
  for (size_t slash; (slash = path.find('/', at)) != std::string::npos; at = slash + 1)
    n = &n->child(path.substr(at, slash - at));
  return {n, path.substr(at)};
}

struct Ranks {
  std::vector<Node> roots;
  std::vector<std::vector<float>> storage;  // the boxes' bytes, alive until written
};

// Rank `r` writes the box offsets..offsets+sizes of `g` (2-D or 1-D).
inline void box(Ranks* rk, int r, const Global& g, std::vector<int64_t> off,
                std::vector<int64_t> sz, const std::string& placement = "sharded") {
  const auto all = g.values();
  std::vector<float> piece;
  if (g.shape.size() == 1) {
    for (int64_t i = 0; i < sz[0]; ++i) piece.push_back(all[static_cast<size_t>(off[0] + i)]);
  } else {
    for (int64_t i = 0; i < sz[0]; ++i)
      for (int64_t j = 0; j < sz[1]; ++j)
        piece.push_back(all[static_cast<size_t>((off[0] + i) * g.shape[1] + off[1] + j)]);
  }
  rk->storage.push_back(std::move(piece));
  const auto& bytes = rk->storage.back();
  auto [node, name] = place(&rk->roots[r], g.path);
  Tensor t = Tensor::borrow(DType::kFloat32, sz, bytes.data(), bytes.size() * sizeof(float));
  t.box = BoxOf{g.shape, off, placement, -1};
  node->tensors[name] = t;
}

// Rank `r` records that `owner` writes the whole of `g` (a replica it does not write).
inline void elsewhere(Ranks* rk, int r, const Global& g, int owner) {
  auto [node, name] = place(&rk->roots[r], g.path);
  Tensor t = Tensor::borrow(DType::kFloat32, {}, nullptr, 0);
  t.box = BoxOf{g.shape, std::vector<int64_t>(g.shape.size(), 0), "replicated", owner};
  node->tensors[name] = t;
}

// Rank `r` writes `g` whole, as a plain (version 1) tensor.
inline void whole(Ranks* rk, int r, const Global& g) {
  rk->storage.push_back(g.values());
  const auto& bytes = rk->storage.back();
  auto [node, name] = place(&rk->roots[r], g.path);
  node->tensors[name] =
      Tensor::borrow(DType::kFloat32, g.shape, bytes.data(), bytes.size() * sizeof(float));
}

inline const Global kW{"/model/layers.0.weight", {5, 3}, 0};    // Shard(0): rows 0..3 | 3..5
inline const Global kV{"/model/layers.1.weight", {2, 6}, 100};  // Shard(1): cols 0..4 | 4..6
inline const Global kB{"/model/layers.1.bias", {2}, 200};       // replicated, written by rank 1
inline const Global kP{"/model/scale", {3}, 300};               // plain, on every rank
inline const Global kM{"/optimizer/state/layers.0.weight/exp_avg", {5, 3}, 400};

constexpr int64_t kStep = 7;

inline std::string step_dir(const std::string& run) { return run + "/step-000000000007"; }

// RUN with one committed 2-rank sharded checkpoint at step 7; `bump` is added to the elements of
// rank 1's box of kW (a checkpoint that differs from the others in rank 1's file alone).
inline void write_sharded(const std::string& run, float bump = 0) {
  Ranks rk;
  rk.roots.resize(2);
  box(&rk, 0, kW, {0, 0}, {3, 3});
  box(&rk, 1, kW, {3, 0}, {2, 3});
  for (float& x : rk.storage.back()) x += bump;
  box(&rk, 0, kV, {0, 0}, {2, 4});
  box(&rk, 1, kV, {0, 4}, {2, 2});
  elsewhere(&rk, 0, kB, 1);
  box(&rk, 1, kB, {0}, {2}, "replicated");
  whole(&rk, 0, kP);
  whole(&rk, 1, kP);
  box(&rk, 0, kM, {0, 0}, {3, 3});
  box(&rk, 1, kM, {3, 0}, {2, 3});
  const std::string dir = step_dir(run);
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  for (int r = 0; r < 2; ++r) {
    rk.roots[r].attrs["step"] = kStep;
    auto m = store::write_rank(Env::posix(), dir, r, kStep, 2, &rk.roots[r]);
    INFO(m.status().to_string());
    REQUIRE(m.is_ok());
  }
  Status s = store::commit(Env::posix(), run, kStep, 2, {"model", "optimizer"});
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  REQUIRE(std::filesystem::exists(dir + "/INDEX"));
}

// RUN with one committed 1-rank plain checkpoint holding the same global tensors.
inline void write_plain(const std::string& run) {
  Ranks rk;
  rk.roots.resize(1);
  for (const Global* g : {&kW, &kV, &kB, &kP, &kM}) whole(&rk, 0, *g);
  const std::string dir = step_dir(run);
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  rk.roots[0].attrs["step"] = kStep;
  REQUIRE(store::write_rank(Env::posix(), dir, 0, kStep, 1, &rk.roots[0]).is_ok());
  REQUIRE(store::commit(Env::posix(), run, kStep, 1, {"model", "optimizer"}).is_ok());
  REQUIRE_FALSE(std::filesystem::exists(dir + "/INDEX"));
}

}  // namespace ckpt_test::sharded
