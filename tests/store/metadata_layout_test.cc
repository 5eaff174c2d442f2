// How write_structure lays out a rank file whose tree holds many groups without tensors (a
// Hugging Face log_history that `ckpt convert` writes, issue 27 item 11): those groups are packed
// (not one 4 KiB block each), the tensors stay 4 KiB aligned, everything reads back the same and
// the checkpoint verifies; and the space reserved while writing is given back.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_util.h"

namespace ckpt::metadata_layout_test {
namespace {

using testing::TempDir;

constexpr int kEntries = 3000;

// /model with two tensors, /extra/log_history a list of `entries` dicts of five scalars and a
// None (the layout convert writes for trainer_state.json), /extra/small a tensor next to it.
Node log_tree(int entries, std::vector<std::vector<unsigned char>>* storage) {
  Node root;
  root.attrs["step"] = int64_t{6};
  auto add = [&](Node* n, const std::string& name, size_t floats) {
    storage->emplace_back(floats * 4);
    for (size_t i = 0; i < storage->back().size(); ++i) storage->back()[i] = (i * 7 + floats) % 251;
    n->tensors[name] = Tensor::borrow(DType::kFloat32, {static_cast<int64_t>(floats)},
                                      storage->back().data(), floats * 4);
  };
  Node& model = root.child("model");
  add(&model, "fc.weight", 3000);
  add(&model, "fc.bias", 3);
  Node& extra = root.child("extra");
  add(&extra, "small", 1);
  Node& log = extra.child("trainer_state.json").child("log_history");
  log.attrs["ckpt.kind"] = std::string("list");
  log.attrs["ckpt.len"] = int64_t{entries};
  for (int i = 0; i < entries; ++i) {
    Node& e = log.child(std::to_string(i));
    e.attrs["ckpt.kind"] = std::string("dict");
    e.attrs["epoch"] = i / 10.0;
    e.attrs["step"] = int64_t{i};
    e.attrs["loss"] = 2.5 - i * 1e-4;
    e.attrs["learning_rate"] = 1e-4;
    e.attrs["grad_norm"] = 0.5;
    e.attrs["ckpt.none"] = std::vector<std::string>{"eval_loss"};
  }
  extra.child("trainer_state.json").attrs["ckpt.kind"] = std::string("dict");
  extra.child("trainer_state.json").attrs["global_step"] = int64_t{6};
  return root;
}

TEST_CASE("thousands of tensor-free groups are packed, read back the same and verify",
          "[h5][store]") {
  TempDir tmp;
  const std::string run = tmp.path();
  const std::string dir = path_join(run, step_dir_name(6));
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  std::vector<std::vector<unsigned char>> storage;
  Node root = log_tree(kEntries, &storage);
  store::RankWriteStats stats;
  auto m = store::write_rank(Env::posix(), dir, 0, 6, 1, &root, &stats);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  // One 4 KiB-aligned block per group (the layout before) is over 4 KiB a group; packed, a group
  // of six attributes takes well under one.
  INFO("rank file " << stats.file_bytes << " bytes for " << kEntries << " groups");
  CHECK(stats.file_bytes < uint64_t{kEntries} * 1024);
  for (const auto& e : m->tensors) {
    INFO(e.path);
    if (e.nbytes > 0) CHECK(e.offset % 4096 == 0);
  }
  REQUIRE(store::commit(Env::posix(), run, 6, 1, {"extra", "model"}).is_ok());
  const store::VerifyReport rep = store::verify_checkpoint(Env::posix(), dir);
  INFO((rep.problems.empty() ? std::string() : rep.problems.front()));
  CHECK(rep.problems.empty());

  auto back = store::read_rank(Env::posix(), dir, 0);
  REQUIRE(back.is_ok());
  const Node& log =
      back->children.at("extra").children.at("trainer_state.json").children.at("log_history");
  const Node& want =
      root.children.at("extra").children.at("trainer_state.json").children.at("log_history");
  REQUIRE(log.children.size() == size_t{kEntries});
  CHECK(log.attrs == want.attrs);
  for (const auto& [name, e] : want.children) {
    INFO(name);
    REQUIRE(log.children.at(name).attrs == e.attrs);
  }
  CHECK(back->children.at("extra").children.at("trainer_state.json").attrs ==
        root.children.at("extra").children.at("trainer_state.json").attrs);
  for (const char* path : {"model/fc.weight", "model/fc.bias", "extra/small"}) {
    INFO(path);
    const std::string p(path);
    const std::string group = p.substr(0, p.find('/')), name = p.substr(p.find('/') + 1);
    const Tensor& got = back->children.at(group).tensors.at(name);
    const Tensor& orig = root.children.at(group).tensors.at(name);
    REQUIRE(got.nbytes == orig.nbytes);
    CHECK(std::memcmp(got.data, orig.data, orig.nbytes) == 0);
  }
}

TEST_CASE("the space reserved while a rank file is written is given back", "[h5][store]") {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  Node root = log_tree(10, &storage);
  // The reserve counts 16 bytes for each double of an array attribute; HDF5 stores 8.
  root.child("train").attrs["losses"] = std::vector<double>(200000, 0.25);
  REQUIRE(store::write_rank(Env::posix(), tmp.path(), 0, 6, 1, &root).is_ok());
  struct stat st;
  REQUIRE(::stat(path_join(tmp.path(), rank_file_name(0)).c_str(), &st) == 0);
  // What stays allocated is the file itself, to the filesystem's block.
  INFO("size " << st.st_size << ", allocated " << st.st_blocks * 512);
  CHECK(uint64_t(st.st_blocks) * 512 <= uint64_t(st.st_size) + (64u << 10));
}

}  // namespace
}  // namespace ckpt::metadata_layout_test
