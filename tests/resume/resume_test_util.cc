#include "resume_test_util.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ckpt/store/rank_io.h"

namespace ckpt::resume_test {

Node varied_tree(std::vector<std::vector<unsigned char>>* storage) {
  Node root;
  root.attrs["step"] = int64_t{42};
  uint32_t seed = 1;
  auto add = [&](Node& n, const std::string& name, DType dt, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (auto d : shape) numel *= d;
    storage->emplace_back(static_cast<size_t>(numel) * dtype_size(dt));
    auto& bytes = storage->back();
    for (auto& b : bytes) {
      seed = seed * 1664525u + 1013904223u;
      b = static_cast<unsigned char>(seed >> 24);
    }
    n.tensors[name] = Tensor::borrow(dt, std::move(shape), bytes.data(), bytes.size());
  };
  Node& model = root.child("model");
  add(model, "empty", DType::kFloat32, {0, 7});
  add(model, "one_byte", DType::kUInt8, {1});
  add(model, "three", DType::kInt8, {3});
  add(model, "scalar", DType::kFloat64, {});
  add(model, "page_minus", DType::kUInt8, {4095});
  add(model, "page_plus", DType::kUInt8, {4097});
  add(model, "odd", DType::kInt8, {12345});
  add(model, "c64k_minus", DType::kUInt8, {65535});
  add(model, "c64k", DType::kFloat32, {16384});
  add(model, "c64k_plus", DType::kUInt8, {65537});
  add(model, "big", DType::kFloat32, {75000});          // 300 KB
  add(model, "bigger", DType::kBFloat16, {550, 1000});  // 1.1 MB
  model.attrs["param_names"] = std::vector<std::string>{"big", "bigger"};
  model.tensors["tied"] = Tensor::borrow(DType::kFloat32, {}, nullptr, 0);
  model.tensors["tied"].alias_of = "/model/big";
  Node& opt = root.child("optimizer");
  opt.attrs["type"] = std::string("adamw");
  opt.attrs["lr"] = 3e-4;
  for (int i = 0; i < 20; ++i) {
    Node& st = opt.child("state").child("p" + std::to_string(i));
    add(st, "exp_avg", DType::kFloat32, {i * 37 + 1});
    add(st, "exp_avg_sq", DType::kFloat32, {i * 37 + 1});
    st.attrs["step"] = int64_t{100};
  }
  add(root.child("rng").child("cpu"), "state", DType::kUInt8, {5056});
  root.child("loader").attrs["position"] = int64_t{1234};
  add(root.child("extra"), "note", DType::kInt64, {3, 3});
  return root;
}

std::string compare_trees(const Node& a, const Node& b, const std::string& path) {
  if (a.attrs != b.attrs) return path + ": attributes differ";
  if (a.tensors.size() != b.tensors.size()) return path + ": tensor count differs";
  for (const auto& [name, ta] : a.tensors) {
    const std::string p = path + "/" + name;
    auto it = b.tensors.find(name);
    if (it == b.tensors.end()) return p + ": missing";
    const Tensor& tb = it->second;
    if (ta.dtype != tb.dtype || ta.shape != tb.shape || ta.nbytes != tb.nbytes ||
        ta.xxh3 != tb.xxh3 || ta.alias_of != tb.alias_of) {
      return p + ": metadata differs";
    }
    if ((ta.data == nullptr) != (tb.data == nullptr)) return p + ": bytes present in one only";
    if (ta.data != nullptr && std::memcmp(ta.data, tb.data, ta.nbytes) != 0) {
      return p + ": bytes differ";
    }
  }
  if (a.children.size() != b.children.size()) return path + ": group count differs";
  for (const auto& [name, ca] : a.children) {
    auto it = b.children.find(name);
    if (it == b.children.end()) return path + "/" + name + ": group missing";
    std::string d = compare_trees(ca, it->second, path + "/" + name);
    if (!d.empty()) return d;
  }
  return "";
}

uint64_t padding_offset(const Manifest& m) {
  std::vector<ManifestEntry> t = m.tensors;
  std::sort(t.begin(), t.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < t.size(); ++i) {
    const uint64_t end = t[i - 1].offset + t[i - 1].nbytes;
    if (t[i - 1].nbytes > 0 && t[i].offset > end) return end;
  }
  FAIL("no padding between tensors");
  return 0;
}

void flip_bit(const std::string& file, uint64_t offset) {
  FILE* f = std::fopen(file.c_str(), "r+b");
  if (f == nullptr) throw std::runtime_error("cannot open " + file);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  std::fputc(c ^ 0x10, f);
  std::fclose(f);
}

void save_varied(SavedRank* s) {
  s->tree = varied_tree(&s->storage);
  auto m = store::write_rank(Env::posix(), s->dir.path(), 0, 42, 1, &s->tree);
  REQUIRE(m.is_ok());
  s->manifest = *m;
}

}  // namespace ckpt::resume_test
