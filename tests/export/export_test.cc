// `ckpt export --to safetensors`: checkpoints written here with the store — a 2-rank sharded one
// (format version 2: a Shard(0) weight, a Shard(1) weight, a replicated bias one rank owns, a
// plain tensor, AdamW moments sharded like their parameter) and a plain version-1 one — exported
// through the library and the executable, and read back by our safetensors parser and by the
// `safetensors` package: every tensor equals the global tensor the ranks' pieces were cut from.
// Damage (a rank file deleted, a byte flipped in a box, an INDEX that COMMIT.json does not
// match) is refused with the tensor and ranges, and leaves no output file.
#include "verify/export/export.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/io/env.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/run_cli.h"
#include "tests/common/sharded_checkpoint.h"
#include "tests/common/test_util.h"
#include "verify/formats/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using nlohmann::json;
using testing::TempDir;
using namespace ckpt_test::sharded;

// name → values of every tensor of a safetensors file, read with our parser.
std::map<std::string, std::vector<float>> read_back(const std::string& path) {
  auto f = Env::posix()->open_random(path);
  REQUIRE(f.is_ok());
  auto h = verify::parse_safetensors(**f);
  INFO(path << ": " << h.status().to_string());
  REQUIRE(h.is_ok());
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : h->tensors) {
    REQUIRE(t.st_dtype == "F32");
    std::vector<float> v((t.end - t.begin) / 4);
    REQUIRE((*f)->read_at(h->data_start + t.begin, v.data(), t.end - t.begin).is_ok());
    out[t.name] = v;
  }
  return out;
}

const std::map<std::string, Global> kModel = {
    {"layers.0.weight", kW}, {"layers.1.weight", kV}, {"layers.1.bias", kB}, {"scale", kP}};

void check_model(const std::map<std::string, std::vector<float>>& got) {
  REQUIRE(got.size() == kModel.size());
  for (const auto& [name, g] : kModel) {
    INFO(name);
    REQUIRE(got.count(name) == 1);
    CHECK(got.at(name) == g.values());
  }
}

Status run_export(const std::string& in, const std::string& out, bool optimizer, uint64_t max,
                  verify::ExportReport* r, verify::ExportFailure* failure) {
  verify::ExportOptions o;
  o.path = in;
  o.out_dir = out;
  o.with_optimizer = optimizer;
  o.max_shard_bytes = max;
  return verify::export_safetensors(Env::posix(), o, r, failure);
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The interpreter that has the safetensors package, or "" (the check is then skipped).
std::string safetensors_python() {
  const char* env = std::getenv("CKPT_SAFETENSORS_PYTHON");
  const std::string py = env != nullptr ? env : "python3";
  if (testing::run_command(ckpt_test::quote(py) + " -c 'import safetensors.numpy' 2>/dev/null") !=
      0)
    return "";
  return py;
}

json python_load(const std::string& py, const std::vector<std::string>& files) {
  std::string cmd =
      ckpt_test::quote(py) + " " +
      ckpt_test::quote(std::string(CKPT_SOURCE_DIR) + "/tests/export/load_safetensors.py");
  for (const auto& f : files) cmd += " " + ckpt_test::quote(f);
  std::string out;
  REQUIRE(testing::run_command(cmd, &out) == 0);
  return json::parse(out);
}

TEST_CASE("export of a sharded checkpoint: whole tensors assembled from their boxes", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run", out = tmp.path() + "/out";
  write_sharded(run);
  verify::ExportReport r;
  verify::ExportFailure failure;
  Status s = run_export(run, out, false, 5'000'000'000, &r, &failure);
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  CHECK(r.format_version == 2);
  CHECK(r.step_dir == step_dir(run));
  CHECK(r.tensors == 4);
  CHECK(r.boxes_checked == 6);  // 2 + 2 + 1 boxes from the index, the plain tensor from rank 0
  CHECK(listing(out) == std::vector<std::string>{"model.safetensors"});
  check_model(read_back(out + "/model.safetensors"));

  const std::string py = safetensors_python();
  if (py.empty()) {
    WARN("no python3 with the safetensors package (set CKPT_SAFETENSORS_PYTHON): skipped");
    return;
  }
  const json j = python_load(py, {out + "/model.safetensors"});
  REQUIRE(j.size() == kModel.size());
  for (const auto& [name, g] : kModel) {
    INFO(name);
    CHECK(j[name]["dtype"] == "float32");
    CHECK(j[name]["shape"].get<std::vector<int64_t>>() == g.shape);
    const auto want = g.values();
    CHECK(j[name]["values"].get<std::vector<float>>() == want);
  }
}

TEST_CASE("export above --max-shard-size: model-0000i-of-0000N files and the HF index", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run", out = tmp.path() + "/out";
  write_sharded(run);
  // In name order: layers.0.weight 60 B, layers.1.bias 8 B, layers.1.weight 48 B, scale 12 B.
  // At most 64 B a file: [layers.0.weight], [layers.1.bias, layers.1.weight], [scale].
  const ckpt_test::Run cli =
      ckpt_test::run_ckpt("export " + ckpt_test::quote(run) + " --to safetensors " +
                          ckpt_test::quote(out) + " --max-shard-size 64 --with-optimizer --json");
  INFO(cli.out << cli.err);
  REQUIRE(cli.exit_code == 0);
  const json doc = json::parse(cli.out);
  CHECK(doc["format_version"] == 2);
  CHECK(doc["tensors"] == 5);
  CHECK(doc["dropped_prefix"] == "");
  CHECK(listing(out) == std::vector<std::string>{
                            "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors", "model.safetensors.index.json",
                            "optimizer.safetensors"});
  const json index = json::parse(testing::read_file(out + "/model.safetensors.index.json"));
  const json want = {{"metadata", {{"total_size", 60 + 8 + 48 + 12}}},
                     {"weight_map",
                      {{"layers.0.weight", "model-00001-of-00003.safetensors"},
                       {"layers.1.bias", "model-00002-of-00003.safetensors"},
                       {"layers.1.weight", "model-00002-of-00003.safetensors"},
                       {"scale", "model-00003-of-00003.safetensors"}}}};
  CHECK(index == want);
  std::map<std::string, std::vector<float>> all;
  for (int i = 1; i <= 3; ++i) {
    auto part = read_back(out + "/model-0000" + std::to_string(i) + "-of-00003.safetensors");
    all.insert(part.begin(), part.end());
  }
  check_model(all);
  const auto opt = read_back(out + "/optimizer.safetensors");
  REQUIRE(opt.size() == 1);
  CHECK(opt.at("state.layers.0.weight.exp_avg") == kM.values());

  const std::string py = safetensors_python();
  if (py.empty()) {
    WARN("no python3 with the safetensors package (set CKPT_SAFETENSORS_PYTHON): skipped");
    return;
  }
  std::vector<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items())
    files.push_back(out + "/" + file.get<std::string>());
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  const json j = python_load(py, files);
  for (const auto& [name, g] : kModel)
    CHECK(j[name]["values"].get<std::vector<float>>() == g.values());
}

TEST_CASE("export of a plain version-1 checkpoint: rank 0's tensors", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run", out = tmp.path() + "/out";
  write_plain(run);
  verify::ExportReport r;
  verify::ExportFailure failure;
  REQUIRE(run_export(step_dir(run), out, true, 5'000'000'000, &r, &failure).is_ok());
  CHECK(r.format_version == 1);
  CHECK(r.boxes_checked == 5);
  check_model(read_back(out + "/model.safetensors"));
  CHECK(read_back(out + "/optimizer.safetensors").at("state.layers.0.weight.exp_avg") ==
        kM.values());
}

// RUN with a plain checkpoint of the model as torch.compile(DDP(model)) names it (every key
// under "_orig_mod.module."), plus `extra` model tensors of other names.
void write_wrapped(const std::string& run, const std::vector<Global>& extra) {
  Ranks rk;
  rk.roots.resize(1);
  for (const Global* g : {&kW, &kV, &kM}) {
    Global w = *g;
    if (w.path.rfind("/model/", 0) == 0) w.path = "/model/_orig_mod.module." + w.path.substr(7);
    whole(&rk, 0, w);
  }
  for (const Global& g : extra) whole(&rk, 0, g);
  const std::string dir = step_dir(run);
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  rk.roots[0].attrs["step"] = kStep;
  REQUIRE(store::write_rank(Env::posix(), dir, 0, kStep, 1, &rk.roots[0]).is_ok());
  REQUIRE(store::commit(Env::posix(), run, kStep, 1, {"model", "optimizer"}).is_ok());
}

TEST_CASE("export names a compiled or DDP model's tensors as the bare module's", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run", out = tmp.path() + "/out";
  write_wrapped(run, {});
  verify::ExportReport r;
  verify::ExportFailure failure;
  REQUIRE(run_export(step_dir(run), out, true, 5'000'000'000, &r, &failure).is_ok());
  CHECK(r.dropped_prefix == "_orig_mod.module.");
  auto got = read_back(out + "/model.safetensors");
  REQUIRE(got.size() == 2);
  CHECK(got.at("layers.0.weight") == kW.values());
  CHECK(got.at("layers.1.weight") == kV.values());
  // the optimizer's names are its own (torch's flattened state_dict keys): unchanged
  CHECK(read_back(out + "/optimizer.safetensors").count("state.layers.0.weight.exp_avg") == 1);
  const ckpt_test::Run cli =
      ckpt_test::run_ckpt("export " + ckpt_test::quote(run) + " --to safetensors " +
                          ckpt_test::quote(out + "-cli") + " --json");
  INFO(cli.out << cli.err);
  REQUIRE(cli.exit_code == 0);
  CHECK(json::parse(cli.out)["dropped_prefix"] == "_orig_mod.module.");
  // A name without the prefix: the names stay as written.
  const std::string run2 = tmp.path() + "/run2", out2 = tmp.path() + "/out2";
  write_wrapped(run2, {kP});
  REQUIRE(run_export(step_dir(run2), out2, false, 5'000'000'000, &r, &failure).is_ok());
  CHECK(r.dropped_prefix.empty());
  CHECK(read_back(out2 + "/model.safetensors").count("_orig_mod.module.layers.0.weight") == 1);
}

TEST_CASE("export of a damaged sharded checkpoint: refused, nothing written", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run", out = tmp.path() + "/out";
  write_sharded(run);
  const std::string dir = step_dir(run);
  auto export_cli = [&] {
    return ckpt_test::run_ckpt("export " + ckpt_test::quote(run) + " --to safetensors " +
                               ckpt_test::quote(out));
  };
  SECTION("a rank file deleted: the tensors and element ranges it held") {
    fs::remove(dir + "/rank-00001.h5");
    const ckpt_test::Run cli = export_cli();
    INFO(cli.err);
    CHECK(cli.exit_code == 2);
    CHECK(cli.err.find("rank-00001.h5 is missing") != std::string::npos);
    CHECK(cli.err.find("tensor \"/model/layers.0.weight\" loses 6 of 15 elements: [3:5, 0:3]") !=
          std::string::npos);
    CHECK(cli.err.find("tensor \"/model/layers.1.bias\" loses all 2 of 2 elements") !=
          std::string::npos);
  }
  SECTION("a byte flipped in a box: the tensor and the box") {
    auto m = store::read_manifest(Env::posix(), dir, 1);
    REQUIRE(m.is_ok());
    uint64_t at = 0;
    for (const auto& e : m->tensors) {
      if (e.path == kV.path) at = e.offset;
    }
    REQUIRE(at > 0);
    testing::flip_bits(dir + "/rank-00001.h5", at + 2, 0x10);
    const ckpt_test::Run cli = export_cli();
    INFO(cli.err);
    CHECK(cli.exit_code == 2);
    CHECK(cli.err.find("rank-00001.h5") != std::string::npos);
    CHECK(cli.err.find("box 1 [0:2, 4:6] of tensor \"/model/layers.1.weight\": xxh3") !=
          std::string::npos);
  }
  SECTION("an INDEX that is not the one COMMIT.json lists") {
    std::string bytes = testing::read_file(dir + "/INDEX");
    bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 1);
    testing::write_file(dir + "/INDEX", bytes);
    const ckpt_test::Run cli = export_cli();
    INFO(cli.err);
    CHECK(cli.exit_code == 2);
    CHECK(cli.err.find("INDEX: xxh3 of the file is") != std::string::npos);
  }
  CHECK(listing(out).empty());
}

TEST_CASE("export: usage and input errors have their exit codes", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run";
  write_sharded(run);
  auto cli = [&](const std::string& args) { return ckpt_test::run_ckpt("export " + args); };
  CHECK(cli(ckpt_test::quote(run) + " --to onnx " + tmp.path() + "/o").exit_code == 64);
  const auto bad =
      cli(ckpt_test::quote(run) + " --to safetensors " + tmp.path() + "/o --max-shard-size 5XB");
  CHECK(bad.exit_code == 64);
  CHECK(bad.err.find("--max-shard-size") != std::string::npos);
  CHECK(cli(ckpt_test::quote(tmp.path() + "/nothing") + " --to safetensors " + tmp.path() + "/o")
            .exit_code == 66);
  CHECK(cli(ckpt_test::quote(tmp.path()) + " --to safetensors " + tmp.path() + "/o").exit_code ==
        65);
}

TEST_CASE("parse_shard_size reads sizes as transformers does", "[cli]") {
  CHECK(*verify::parse_shard_size("5GB") == 5'000'000'000ull);
  CHECK(*verify::parse_shard_size("500MB") == 500'000'000ull);
  CHECK(*verify::parse_shard_size("10KB") == 10'000ull);
  CHECK(*verify::parse_shard_size("2GiB") == 2ull << 30);
  CHECK(*verify::parse_shard_size("3mib") == 3ull << 20);
  CHECK(*verify::parse_shard_size("8Gb") == 1'000'000'000ull);
  CHECK(*verify::parse_shard_size("4096") == 4096ull);
  for (const char* bad : {"", "GB", "0", "5 GB", "-1GB", "1.5GB", "5TB", "99999999999999999999"})
    CHECK_FALSE(verify::parse_shard_size(bad).is_ok());
}

}  // namespace
