// ckpt's own HDF5 encoder (ckpt/h5/encode.h) against HDF5's writer: the same tree written both
// ways reads back the same through the HDF5 library (every attribute, dtype, shape, hash, alias
// and box), HDF5 finds each dataset where the encoder put it, h5dump reads the file, and the
// trees the encoder does not take still go through HDF5's writer.
#include "ckpt/h5/encode.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ckpt/h5/rank_file.h"
#include "tests/common/test_util.h"

namespace ckpt::encode_test {
namespace {

using testing::TempDir;

// sample_tree (every dtype, 0-d, empty and aliased tensors, every attribute type) and what the
// encoder treats apart: boxes (sharded, and one another rank writes), a group of more than 8
// links and attributes (HDF5's phase change values), 300 links in one group, UTF-8 and NUL in
// strings, deep nesting, an empty group.
Node wide_tree(std::vector<std::vector<unsigned char>>* storage) {
  Node root = testing::sample_tree(storage);
  root.attrs["format_version"] = int64_t{2};
  root.attrs["text"] = std::string("gr\xc3\xbc\xc3\x9f \xe2\x9c\x93");
  root.attrs["cut"] = std::string("before\0after", 12);
  root.attrs["long"] = std::string(5000, 'x');
  Node& shard = root.child("sharded");
  storage->emplace_back(8 * 4);
  shard.tensors["w"] = Tensor::borrow(DType::kFloat32, {2, 4}, storage->back().data(), 32);
  shard.tensors["w"].box = BoxOf{{6, 4}, {2, 0}, "sharded", -1};
  shard.tensors["r"] = Tensor::borrow(DType::kFloat32, {}, nullptr, 0);
  shard.tensors["r"].box = BoxOf{{3}, {0}, "replicated", 1};
  Node& many = root.child("many");
  for (int i = 0; i < 12; ++i) many.attrs["a" + std::to_string(i)] = int64_t{i};
  for (int i = 0; i < 300; ++i) {
    storage->emplace_back(4, static_cast<unsigned char>(i));
    many.tensors["p" + std::to_string(i)] =
        Tensor::borrow(DType::kInt32, {1}, storage->back().data(), 4);
  }
  root.child("a").child("b").child("c").child("d").attrs["deep"] = true;
  root.child("empty_group");
  return root;
}

void set_hashes(Node* n) {
  for (auto& [name, t] : n->tensors) {
    if (t.data != nullptr) t.xxh3 = 0x0123456789abcdefULL ^ t.nbytes ^ name.size();
  }
  for (auto& [name, c] : n->children) set_hashes(&c);
}

void same_tree(const Node& a, const Node& b, const std::string& path) {
  INFO(path);
  CHECK(a.attrs == b.attrs);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    INFO(name);
    REQUIRE(b.tensors.count(name) == 1);
    const Tensor& u = b.tensors.at(name);
    CHECK(t.dtype == u.dtype);
    CHECK(t.shape == u.shape);
    CHECK(t.xxh3 == u.xxh3);
    CHECK(t.alias_of == u.alias_of);
    CHECK(t.box == u.box);
  }
  REQUIRE(a.children.size() == b.children.size());
  for (const auto& [name, c] : a.children) {
    REQUIRE(b.children.count(name) == 1);
    same_tree(c, b.children.at(name), path + "/" + name);
  }
}

TEST_CASE("the encoder's file reads back as HDF5's writer's does", "[h5]") {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  Node root = wide_tree(&storage);
  set_hashes(&root);
  REQUIRE(h5::encode_structure(root).has_value());
  const std::string ours = tmp.path() + "/ours.h5", theirs = tmp.path() + "/theirs.h5";
  auto ext = h5::write_structure(ours, root);
  INFO(ext.status().to_string());
  REQUIRE(ext.is_ok());
  REQUIRE(h5::write_structure_hdf5(theirs, root).is_ok());
  std::vector<h5::DatasetInfo> ds_ours, ds_theirs;
  auto back_ours = h5::read_structure(ours, &ds_ours);
  INFO(back_ours.status().to_string());
  REQUIRE(back_ours.is_ok());
  auto back_theirs = h5::read_structure(theirs, &ds_theirs);
  REQUIRE(back_theirs.is_ok());
  same_tree(*back_theirs, *back_ours, "");
  // What the writer wrote is what HDF5's reader finds: a NUL ends a string, as in HDF5's writer.
  CHECK(back_ours->attrs.at("cut") == AttrValue(std::string("before")));
  CHECK(back_ours->attrs.at("long") == AttrValue(std::string(5000, 'x')));
  CHECK(back_ours->children.at("many").tensors.size() == 300);
  // HDF5 places each dataset where the encoder said, 4 KiB aligned, none overlapping.
  std::map<std::string, uint64_t> where;
  for (const auto& e : *ext) where[e.path] = e.offset;
  uint64_t end = 0;
  for (const auto& e : *ext) {
    INFO(e.path);
    if (e.tensor->nbytes == 0) continue;
    CHECK(e.offset % 4096 == 0);
    CHECK(e.offset >= end);
    end = e.offset + e.tensor->nbytes;
  }
  size_t with_bytes = 0;
  for (const auto& d : ds_ours) {
    INFO(d.path);
    if (d.nbytes == 0) continue;
    ++with_bytes;
    REQUIRE(where.count(d.path) == 1);
    CHECK(d.offset == where.at(d.path));
  }
  size_t theirs_with_bytes = 0;
  for (const auto& d : ds_theirs) theirs_with_bytes += d.nbytes > 0 ? 1 : 0;
  CHECK(with_bytes == theirs_with_bytes);
  CHECK(with_bytes == ext->size() - 1);  // less the empty one (aliases and boxes held elsewhere
                                         // have no extent)
  std::string out;
  REQUIRE(testing::run_command("h5dump -A " + ours, &out) == 0);
  CHECK(out.find("DATASET \"layer.weight\"") != std::string::npos);
  CHECK(out.find("\"adamw\"") != std::string::npos);
  CHECK(out.find("H5T_IEEE_F64LE") != std::string::npos);
}

// A random tree: groups up to three deep, tensors of every dtype and of 0-3 dimensions (sizes
// 0-5), every attribute kind with empty and NUL-holding values, names of arbitrary bytes.
Node random_tree(std::mt19937* rng, std::vector<std::vector<unsigned char>>* storage, int depth) {
  auto pick = [&](int n) { return static_cast<int>((*rng)() % static_cast<unsigned>(n)); };
  auto name = [&]() {
    static const char* pieces[] = {"w", "bias", ".", "0", "\xc3\xa9", " ", "x.y", "ckpt.kind", "%"};
    std::string n;
    for (int k = 0, len = 1 + pick(3); k < len; ++k) n += pieces[pick(9)];
    return n == "." ? std::string("dot") : n;
  };
  auto text = [&]() {
    std::string t;
    for (int k = 0, len = pick(12); k < len; ++k) t.push_back(static_cast<char>(pick(256)));
    return t;
  };
  static const DType dtypes[] = {
      DType::kBool,       DType::kUInt8,    DType::kInt8,       DType::kInt16,
      DType::kInt32,      DType::kInt64,    DType::kFloat16,    DType::kBFloat16,
      DType::kFloat32,    DType::kFloat64,  DType::kComplex32,  DType::kComplex64,
      DType::kComplex128, DType::kQUInt4x2, DType::kFloat8E5M2, DType::kUInt64};
  Node n;
  for (int k = 0, count = pick(10); k < count; ++k) {
    const std::string a = name();
    switch (pick(7)) {
      case 0:
        n.attrs[a] = pick(2) == 1;
        break;
      case 1:
        n.attrs[a] = static_cast<int64_t>((*rng)()) - (int64_t{1} << 31);
        break;
      case 2:
        n.attrs[a] = pick(1000) / 7.0;
        break;
      case 3:
        n.attrs[a] = text();
        break;
      case 4:
        n.attrs[a] = std::vector<int64_t>(static_cast<size_t>(pick(4)), pick(99));
        break;
      case 5:
        n.attrs[a] = std::vector<double>(static_cast<size_t>(pick(4)), 0.25);
        break;
      default: {
        std::vector<std::string> v;
        for (int j = 0, len = pick(4); j < len; ++j) v.push_back(text());
        n.attrs[a] = v;
      }
    }
  }
  for (int k = 0, count = pick(12); k < count; ++k) {
    const DType dt = dtypes[pick(16)];
    std::vector<int64_t> shape(static_cast<size_t>(pick(4)));
    int64_t numel = 1;
    for (auto& d : shape) numel *= (d = pick(6));
    storage->emplace_back(static_cast<size_t>(numel) * dtype_size(dt));
    for (auto& b : storage->back()) b = static_cast<unsigned char>(pick(256));
    Tensor t = Tensor::borrow(dt, shape, storage->back().data(), storage->back().size());
    t.xxh3 = (*rng)();
    n.tensors[name()] = t;
  }
  if (depth < 3) {
    for (int k = 0, count = pick(4); k < count; ++k) {
      const std::string c = name();
      if (n.tensors.count(c) == 0) n.children[c] = random_tree(rng, storage, depth + 1);
    }
  }
  return n;
}

TEST_CASE("random trees: the encoder's file reads back as HDF5's writer's does", "[h5]") {
  TempDir tmp;
  std::mt19937 rng(20261204);
  int encoded = 0;
  for (int i = 0; i < 60; ++i) {
    INFO("tree " << i);
    std::vector<std::vector<unsigned char>> storage;
    const Node root = random_tree(&rng, &storage, 0);
    if (!h5::encode_structure(root).has_value()) continue;
    ++encoded;
    const std::string ours = tmp.path() + "/o" + std::to_string(i) + ".h5";
    const std::string theirs = tmp.path() + "/t" + std::to_string(i) + ".h5";
    auto ext = h5::write_structure(ours, root);
    REQUIRE(ext.is_ok());
    REQUIRE(h5::write_structure_hdf5(theirs, root).is_ok());
    std::vector<h5::DatasetInfo> ds;
    auto a = h5::read_structure(ours, &ds);
    INFO(a.status().to_string());
    REQUIRE(a.is_ok());
    auto b = h5::read_structure(theirs, nullptr);
    REQUIRE(b.is_ok());
    same_tree(*b, *a, "");
    std::map<std::string, uint64_t> where;
    for (const auto& e : *ext) where[e.path] = e.offset;
    for (const auto& d : ds) {
      if (d.nbytes > 0) CHECK(d.offset == where.at(d.path));
    }
  }
  CHECK(encoded >= 50);
}

TEST_CASE("the encoder's checksum is HDF5's", "[h5]") {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  set_hashes(&root);
  REQUIRE(h5::write_structure_hdf5(tmp.path() + "/f.h5", root).is_ok());
  // HDF5's version-2 superblock: 44 bytes, then their lookup3 checksum.
  const std::string sb = testing::read_file(tmp.path() + "/f.h5").substr(0, 48);
  REQUIRE(sb[8] == 2);
  uint32_t stored = 0;
  std::memcpy(&stored, sb.data() + 44, 4);
  CHECK(h5::lookup3(sb.data(), 44) == stored);
  // Bob Jenkins' published values of hashlittle with seed 0 (lookup3.c's driver5).
  CHECK(h5::lookup3("", 0) == 0xdeadbeefu);
  CHECK(h5::lookup3("Four score and seven years ago", 30) == 0x17770551u);
}

TEST_CASE("trees the encoder does not take go through HDF5's writer", "[h5]") {
  TempDir tmp;
  Node root;
  Node& wide = root.child("wide");
  for (size_t i = 0; i <= h5::kEncodeMaxLinks; ++i) wide.child("g" + std::to_string(i));
  CHECK_FALSE(h5::encode_structure(root).has_value());
  Node attrs;
  for (size_t i = 0; i <= h5::kEncodeMaxAttrs; ++i) attrs.attrs["a" + std::to_string(i)] = 1.0;
  CHECK_FALSE(h5::encode_structure(attrs).has_value());
  Node big;
  big.attrs["ids"] = std::vector<int64_t>(9000, 7);  // 72 KB: more than a header message holds
  CHECK_FALSE(h5::encode_structure(big).has_value());
  Node deep;  // 33 dimensions: more than HDF5 has
  static const unsigned char one = 1;
  deep.tensors["t"] = Tensor::borrow(DType::kUInt8, std::vector<int64_t>(33, 1), &one, 1);
  CHECK_FALSE(h5::encode_structure(deep).has_value());
  Node slash;
  slash.child("a/b");
  CHECK_FALSE(h5::encode_structure(slash).has_value());
  auto bad = h5::write_structure(tmp.path() + "/slash.h5", slash);
  CHECK_FALSE(bad.is_ok());  // HDF5's writer refuses it, with its message
  auto ok = h5::write_structure(tmp.path() + "/big.h5", big);
  REQUIRE(ok.is_ok());
  auto back = h5::read_structure(tmp.path() + "/big.h5", nullptr);
  REQUIRE(back.is_ok());
  CHECK(back->attrs.at("ids") == AttrValue(std::vector<int64_t>(9000, 7)));
}

}  // namespace
}  // namespace ckpt::encode_test
