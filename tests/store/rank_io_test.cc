#include "ckpt/store/rank_io.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "ckpt/base/hash.h"
#include "tests/common/test_util.h"

namespace ckpt::rank_io_test {
namespace {

using testing::TempDir;

Result<Manifest> write_sample(const std::string& dir, Node* root) {
  root->attrs["step"] = int64_t{7};
  return store::write_rank(Env::posix(), dir, 0, 7, 1, root);
}

TEST_CASE("every dtype, 0-d, empty and aliased tensors round trip bit-exactly", "[h5]") {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  auto m = write_sample(tmp.path(), &root);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  for (const auto& e : m->tensors) {
    if (e.nbytes > 0) REQUIRE(e.offset % 4096 == 0);
  }
  auto back = store::read_rank(Env::posix(), tmp.path(), 0);
  REQUIRE(back.is_ok());
  const Node& model = back->children.at("model");
  const Node& orig = root.children.at("model");
  for (const auto& [name, t] : orig.tensors) {
    INFO(name);
    const Tensor& b = model.tensors.at(name);
    if (!t.alias_of.empty()) {
      REQUIRE(b.alias_of == t.alias_of);
      REQUIRE(b.data == model.tensors.at("layer.weight").data);
      continue;
    }
    REQUIRE(b.dtype == t.dtype);
    REQUIRE(b.shape == t.shape);
    REQUIRE(b.nbytes == t.nbytes);
    // memcmp with a null pointer is undefined even for 0 bytes (UBSan says so)
    REQUIRE((t.nbytes == 0 || std::memcmp(b.data, t.data, t.nbytes) == 0));
  }
  REQUIRE(model.tensors.at("scalar").shape.empty());
  REQUIRE(model.tensors.at("empty").shape == std::vector<int64_t>{0, 4});
  REQUIRE(back->attrs.at("step") == AttrValue(int64_t{7}));
  const Node& opt = back->children.at("optimizer");
  for (const auto& [name, v] : root.children.at("optimizer").attrs) {
    INFO(name);
    REQUIRE(opt.attrs.at(name) == v);
  }
}

TEST_CASE("read_rank places tensors into caller memory and filters components", "[h5]") {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  REQUIRE(write_sample(tmp.path(), &root).is_ok());
  std::vector<unsigned char> dest(64 * 33 * 4, 0);
  store::ReadOptions opts;
  opts.components = {"model"};
  opts.place = [&](const std::string& path, const Tensor& meta) -> Result<void*> {
    if (path == "/model/layer.weight") {
      REQUIRE(meta.nbytes == dest.size());
      return static_cast<void*>(dest.data());
    }
    return static_cast<void*>(nullptr);
  };
  store::RankReadStats stats;
  auto back = store::read_rank(Env::posix(), tmp.path(), 0, opts, &stats);
  REQUIRE(back.is_ok());
  REQUIRE(stats.placed == 1);
  REQUIRE(std::memcmp(dest.data(), root.children["model"].tensors["layer.weight"].data,
                      dest.size()) == 0);
  // The optimizer's tensor was not requested: present in the tree, without bytes.
  REQUIRE(back->children.at("optimizer")
              .children.at("state")
              .children.at("layer.weight")
              .tensors.at("exp_avg")
              .data == nullptr);
}

TEST_CASE("h5py and h5dump read the rank file", "[h5]") {
  TempDir tmp;
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  REQUIRE(write_sample(tmp.path(), &root).is_ok());
  const std::string file = tmp.path() + "/rank-00000.h5";
  std::string out;
  if (testing::run_command("/usr/bin/python3 -c 'import h5py'", &out) != 0) {
    WARN("python3-h5py not installed; skipping the h5py cross-check");
  } else {
    const std::string py =
        "import h5py,sys; f=h5py.File(sys.argv[1],'r'); "
        "print(sorted(f.keys())); print(f['model/layer.weight'].shape, "
        "f['model/layer.weight'].dtype); "
        "print(f['model/t_float16'].dtype); print(f['optimizer'].attrs['type']); "
        "print(list(f['optimizer'].attrs['betas'])); print(f['model/layer.weight'].attrs['xxh3'])";
    REQUIRE(testing::run_command("/usr/bin/python3 -c \"" + py + "\" " + file, &out) == 0);
    CHECK(out.find("['model', 'optimizer']") != std::string::npos);
    CHECK(out.find("(64, 33) float32") != std::string::npos);
    CHECK(out.find("float16") != std::string::npos);
    CHECK(out.find("adamw") != std::string::npos);
    CHECK(out.find("[0.9, 0.999]") != std::string::npos);
    const Tensor& w = root.children["model"].tensors["layer.weight"];
    CHECK(out.find(hex64(w.xxh3)) != std::string::npos);
  }
  REQUIRE(testing::run_command("h5dump -n " + file, &out) == 0);
  CHECK(out.find("group      /model") != std::string::npos);
  CHECK(out.find("dataset    /model/layer.weight") != std::string::npos);
  CHECK(out.find("group      /optimizer/state") != std::string::npos);
}

TEST_CASE("write_rank refuses an alias of nothing", "[h5]") {
  TempDir tmp;
  Node root;
  root.child("model").tensors["b"] = Tensor::borrow(DType::kFloat32, {}, nullptr, 0);
  root.child("model").tensors["b"].alias_of = "/model/a";
  auto m = store::write_rank(Env::posix(), tmp.path(), 0, 1, 1, &root);
  REQUIRE(m.status().code() == Code::kInvalidArgument);
  REQUIRE(m.status().message().find("\"/model/b\" is an alias of \"/model/a\"") !=
          std::string::npos);
}

}  // namespace
}  // namespace ckpt::rank_io_test
