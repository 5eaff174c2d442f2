// `ckpt verify` and `ckpt audit` of a sharded checkpoint (format version 2) through the
// executable: the INDEX matched against COMMIT.json, decoded and its tiling proven; a rank file
// deleted or damaged names per tensor the element ranges it loses (exit 2); an INDEX crafted with
// the encoder whose boxes overlap and leave a gap (listed in COMMIT.json with its true hash, so
// only the tiling check can see it) is refused with the tensor and the ranges.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/run_cli.h"
#include "tests/common/sharded_checkpoint.h"
#include "tests/common/test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using namespace ckpt_test::sharded;
using nlohmann::json;
using testing::TempDir;

json run_json(const std::string& cmd, const std::string& path, int* rc) {
  return ckpt_test::run_ckpt_json(cmd + " --json " + ckpt_test::quote(path), rc);
}

bool has(const json& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.get<std::string>().find(text) != std::string::npos) return true;
  }
  return false;
}

bool has_finding(const json& audit, const std::string& severity, const std::string& text) {
  for (const auto& f : audit["findings"]) {
    if (f["severity"] == severity &&
        f["message"].get<std::string>().find(text) != std::string::npos)
      return true;
  }
  return false;
}

TEST_CASE("verify of a sharded checkpoint: the INDEX checked and its tiling proven", "[verify]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  write_sharded(run);
  int rc = -1;
  const json v = run_json("verify", run, &rc);
  CHECK(rc == 0);
  const json& index = v["checkpoints"][0]["index"];
  CHECK(index["decoded"] == true);
  CHECK(index["tiled"] == true);
  CHECK(index["tensors"] == 4);  // the 2 weights, the bias, the moment; the plain tensor is not
  CHECK(index["boxes"] == 7);
  CHECK(index["files"] == 2);
  CHECK(index["lost"].empty());
  const ckpt_test::Run text = ckpt_test::run_ckpt("verify " + ckpt_test::quote(run));
  CHECK(text.out.find("index: 4 tensors, 7 boxes in 2 rank files; the boxes of every tensor "
                      "tile it exactly") != std::string::npos);
  const json a = run_json("audit", run, &rc);
  CHECK(has_finding(a, "info",
                    "INDEX: 4 tensors, 7 boxes in 2 rank files: the boxes of every "
                    "tensor tile it exactly"));
}

TEST_CASE("verify of a sharded checkpoint without a rank file: what it loses, per tensor",
          "[verify]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  write_sharded(run);
  const std::string dir = step_dir(run);
  SECTION("deleted") { fs::remove(dir + "/rank-00001.h5"); }
  SECTION("a byte of a box flipped") {
    auto m = store::read_manifest(Env::posix(), dir, 1);
    REQUIRE(m.is_ok());
    testing::flip_bits(dir + "/rank-00001.h5", m->tensors.front().offset + 1, 0x04);
  }
  int rc = -1;
  const json v = run_json("verify", run, &rc);
  CHECK(rc == 2);
  const json& c = v["checkpoints"][0];
  CHECK(c["index"]["damaged_files"] == json::array({"rank-00001.h5"}));
  CHECK(has(c["problems"],
            "tensor \"/model/layers.0.weight\" loses 6 of 15 elements: [3:5, 0:3] "
            "(rank-00001.h5)"));
  CHECK(has(c["problems"], "tensor \"/model/layers.1.weight\" loses 4 of 12 elements: [0:2, 4:6]"));
  CHECK(has(c["problems"], "tensor \"/model/layers.1.bias\" loses all 2 of 2 elements: [0:2]"));
  CHECK(has(c["problems"], "tensor \"/optimizer/state/layers.0.weight/exp_avg\" loses 6 of 15"));
  bool found = false;
  for (const auto& t : c["index"]["lost"]) {
    if (t["tensor"] != kW.path) continue;
    found = true;
    CHECK(t["ranges"] == json::array({"[3:5, 0:3]"}));
    CHECK(t["lost_elements"] == 6);
    CHECK(t["total_elements"] == 15);
  }
  CHECK(found);
  const json a = run_json("audit --deep", run, &rc);
  CHECK(rc == 2);
  CHECK(has_finding(a, "error", "tensor \"/model/layers.0.weight\" loses 6 of 15 elements"));
  CHECK(a["components"]["model"]["status"] != "present");
  CHECK(a["components"]["optimizer"]["status"] != "present");
}

TEST_CASE("verify refuses an INDEX whose boxes overlap and leave a gap", "[verify]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  write_sharded(run);
  const std::string dir = step_dir(run);
  // The two boxes of layers.0.weight, where the ranks wrote them, but the second said to start
  // at row 2 instead of 3: rows [0:3] and [2:4] of 5.
  store::IndexBuilder b(kStep);
  for (int r = 0; r < 2; ++r) REQUIRE(b.add_file(rank_file_name(r)).is_ok());
  auto ds = b.intern(kW.path);
  REQUIRE(ds.is_ok());
  std::vector<store::BoxSource> boxes;
  for (int r = 0; r < 2; ++r) {
    auto m = store::read_manifest(Env::posix(), dir, r);
    REQUIRE(m.is_ok());
    for (const auto& e : m->tensors) {
      if (e.path != kW.path) continue;
      boxes.push_back({store::make_extent({r == 0 ? 0 : 2, 0}, e.shape), static_cast<uint32_t>(r),
                       *ds, e.offset, e.xxh3});
    }
  }
  REQUIRE(boxes.size() == 2);
  REQUIRE(b.add_tensor({kW.path, DType::kFloat32, kW.shape, store::Placement::kSharded}, boxes)
              .is_ok());
  const std::string bytes = store::encode_index(std::move(b).finish());
  testing::write_file(dir + "/INDEX", bytes);
  auto rec = store::read_commit(Env::posix(), dir);
  REQUIRE(rec.is_ok());
  for (CommitFile& f : rec->files) {
    if (f.name != "INDEX") continue;
    f.bytes = bytes.size();
    f.xxh3 = xxh3_64(bytes.data(), bytes.size());
    f.regions_xxh3 = store::index_head_xxh3(bytes);
  }
  testing::write_file(dir + "/COMMIT.json", encode_commit(*rec));
  int rc = -1;
  const json v = run_json("verify", run, &rc);
  CHECK(rc == 2);
  const json& c = v["checkpoints"][0];
  CHECK(c["index"]["tiled"] == false);
  CHECK(has(c["problems"],
            "tensor \"/model/layers.0.weight\": overlap: elements [2:3, 0:3] are in both"));
  CHECK(has(c["problems"], "tensor \"/model/layers.0.weight\": gap: elements [4:5, 0:3]"));
  const json a = run_json("audit", run, &rc);
  CHECK(rc == 2);
  CHECK(has_finding(a, "error", "overlap: elements [2:3, 0:3]"));
}

TEST_CASE("verify refuses an INDEX whose head the commit record hashes otherwise", "[verify]") {
  // The file matches its record, but the head hash a restoring rank checks the head it reads
  // alone against does not: every such restore would refuse the checkpoint, so verify does.
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  write_sharded(run);
  const std::string dir = step_dir(run);
  auto rec = store::read_commit(Env::posix(), dir);
  REQUIRE(rec.is_ok());
  bool listed = false;
  for (CommitFile& f : rec->files) {
    if (f.name != "INDEX") continue;
    REQUIRE(f.regions_xxh3.has_value());
    *f.regions_xxh3 ^= 1;
    listed = true;
  }
  REQUIRE(listed);
  testing::write_file(dir + "/COMMIT.json", encode_commit(*rec));
  int rc = -1;
  const json v = run_json("verify", run, &rc);
  CHECK(rc == 2);
  CHECK(has(v["checkpoints"][0]["problems"], "INDEX: xxh3 of its head is"));
}

TEST_CASE("diff of sharded checkpoints compares global tensors, every rank's boxes included",
          "[verify]") {
  TempDir tmp;
  const std::string sharded = tmp.path() + "/sharded", plain = tmp.path() + "/plain",
                    bumped = tmp.path() + "/bumped";
  write_sharded(sharded);
  write_plain(plain);
  write_sharded(bumped, 0.5F);  // rank 1's rows 3..5 of layers.0.weight differ, nothing else
  auto diff = [](const std::string& a, const std::string& b, int* rc) {
    const ckpt_test::Run r = ckpt_test::run_ckpt("diff --deep --json " + ckpt_test::quote(a) + " " +
                                                 ckpt_test::quote(b));
    *rc = r.exit_code;
    INFO(r.out << r.err);
    json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    return j;
  };
  int rc = -1;
  SECTION("the same global tensors at 2 ranks and at 1: no difference, shapes global") {
    const json j = diff(sharded, plain, &rc);
    CHECK(rc == 0);
    CHECK(j["tensors"]["changed"].empty());
  }
  SECTION("a difference in rank 1's box alone is found, with the global shape") {
    const json j = diff(sharded, bumped, &rc);
    CHECK(rc == 2);
    REQUIRE(j["tensors"]["changed"].size() == 1);
    const json& t = j["tensors"]["changed"][0];
    CHECK(t["name"] == "layers.0.weight");
    CHECK(t["a"] == "float32 [5,3]");
    CHECK(t["b"] == "float32 [5,3]");
    CHECK(t["max_abs_diff"].get<double>() == Approx(0.5));
  }
}

TEST_CASE("inspect of a sharded checkpoint says which box of which global tensor it shows",
          "[verify]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  write_sharded(run);
  const ckpt_test::Run r = ckpt_test::run_ckpt("inspect " + ckpt_test::quote(step_dir(run)));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("this rank's sharded box [0:3, 0:3] of global shape [5, 3]") !=
        std::string::npos);
  CHECK(r.out.find("replicated tensor of global shape [2], written by rank 1") !=
        std::string::npos);
}

}  // namespace
