#include "tests/common/test_util.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ckpt::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/ckpt-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }

Node sample_tree(std::vector<std::vector<unsigned char>>* storage) {
  Node root;
  auto add = [&](Node& n, const std::string& name, DType dt, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (auto d : shape) numel *= d;
    storage->emplace_back(static_cast<size_t>(numel) * dtype_size(dt));
    auto& bytes = storage->back();
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<unsigned char>(i * 37 + name.size());
    n.tensors[name] = Tensor::borrow(dt, std::move(shape), bytes.data(), bytes.size());
  };
  Node& model = root.child("model");
  const DType all[] = {
      DType::kBool,       DType::kUInt8,      DType::kInt8,         DType::kInt16,
      DType::kInt32,      DType::kInt64,      DType::kFloat16,      DType::kBFloat16,
      DType::kFloat32,    DType::kFloat64,    DType::kComplex32,    DType::kComplex64,
      DType::kComplex128, DType::kQInt8,      DType::kQUInt8,       DType::kQInt32,
      DType::kQUInt4x2,   DType::kFloat8E5M2, DType::kFloat8E4M3FN, DType::kUInt16,
      DType::kUInt32,     DType::kUInt64};
  for (DType dt : all) add(model, std::string("t_") + dtype_name(dt), dt, {3, 5});
  add(model, "layer.weight", DType::kFloat32, {64, 33});
  add(model, "scalar", DType::kFloat64, {});
  add(model, "empty", DType::kFloat32, {0, 4});
  model.tensors["tied.weight"] = Tensor::borrow(DType::kFloat32, {}, nullptr, 0);
  model.tensors["tied.weight"].alias_of = "/model/layer.weight";
  Node& opt = root.child("optimizer");
  opt.attrs["type"] = std::string("adamw");
  opt.attrs["flag"] = true;
  opt.attrs["count"] = int64_t{-7};
  opt.attrs["lr"] = 3e-4;
  opt.attrs["betas"] = std::vector<double>{0.9, 0.999};
  opt.attrs["ids"] = std::vector<int64_t>{1, 2, 3};
  opt.attrs["names"] = std::vector<std::string>{"a", "b.c", ""};
  opt.attrs["none"] = std::vector<int64_t>{};
  add(opt.child("state").child("layer.weight"), "exp_avg", DType::kFloat32, {64, 33});
  return root;
}

int run_command(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  std::string s;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
  int rc = pclose(p);
  if (out != nullptr) *out = s;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void flip_bits(const std::string& path, uint64_t offset, unsigned char mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ mask);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

void ByteSum::run(const unsigned char* bytes, size_t n, void* arg) {
  auto* s = static_cast<ByteSum*>(arg);
  for (size_t i = 0; i < n; ++i) s->sum += bytes[i];
}

uint64_t byte_sum(const std::string& s, size_t from, size_t n) {
  uint64_t sum = 0;
  for (size_t i = from; i < from + n; ++i) sum += static_cast<unsigned char>(s[i]);
  return sum;
}

}  // namespace ckpt::testing
