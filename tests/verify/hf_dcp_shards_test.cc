// `ckpt audit` of the folder DCP's HuggingFaceStorageWriter(save_distributed=True) writes
// without consolidation (fixtures/hf_dcp_shards/, make.py: 3 ranks of an FSDP2 model, each
// parameter split by rows, a replicated buffer saved from one rank). FACTS.json is what
// torch's own HuggingFaceStorageReader says: each tensor's global size, dtype, chunks and values.
// The intact folder must read as torch reads it; with a file deleted, truncated or edited (in a
// temp copy), the finding must name the file and what it lost, and the model must not be
// `present`.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/io/env.h"
#include "verify/audit/audit.h"
#include "verify/formats/builtin_readers.h"

namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using namespace ckpt::verify;
using nlohmann::json;

const fs::path kDir = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "hf_dcp_shards";
// shard-0000<rank>-model-0000<k>-of-00003.safetensors
std::string shard(int rank, int k) {
  return "shard-0000" + std::to_string(rank) + "-model-0000" + std::to_string(k) +
         "-of-00003.safetensors";
}

json facts() {
  std::ifstream in(kDir / "FACTS.json");
  REQUIRE(in.good());
  return json::parse(in);
}

// A copy of fixtures/hf_dcp_shards/shards in a temp folder, removed with the object.
struct Copy {
  explicit Copy(const std::string& name)
      : dir(fs::temp_directory_path() /
            ("ckpt_hf_dcp_shards_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir);
    fs::copy(kDir / "shards", dir, fs::copy_options::recursive);
  }
  ~Copy() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // Replaces the first `from` in the file with `to` (same length: offsets stay right).
  void edit(const std::string& file, const std::string& from, const std::string& to) const {
    REQUIRE(from.size() == to.size());
    std::fstream f(dir / file, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    const size_t at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(to.data(), static_cast<std::streamsize>(to.size()));
  }
  fs::path dir;
};

CheckpointView view_of(const fs::path& p, bool values = false) {
  ReadOptions options;
  options.tensor_values = values;
  auto v = builtin_readers().read(Env::posix(), p.string(), options);
  REQUIRE(v.is_ok());
  return std::move(*v);
}

AuditReport audit(const fs::path& p, bool deep = false) {
  AuditOptions options;
  options.deep = deep;
  auto r = audit_path(builtin_readers(), Env::posix(), p.string(), options);
  REQUIRE(r.is_ok());
  return std::move(*r);
}

ComponentStatus model_status(const AuditReport& r) {
  const ComponentReport* cr = r.find(AuditComponent::kModel);
  REQUIRE(cr != nullptr);
  return cr->status;
}

// The finding of `severity` whose message holds every one of `parts`, or null.
const Finding* finding(const AuditReport& r, Severity severity,
                       const std::vector<std::string>& parts) {
  for (const Finding& f : r.findings) {
    bool all = f.severity == severity;
    for (const std::string& p : parts) all = all && f.message.find(p) != std::string::npos;
    if (all) return &f;
  }
  return nullptr;
}

// Errors about the weights or the files (the other components are missing by design).
size_t errors(const AuditReport& r) {
  size_t n = 0;
  for (const Finding& f : r.findings) {
    n += f.severity == Severity::kError && (!f.component || *f.component == AuditComponent::kModel)
             ? 1
             : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("hf dcp shards: the intact folder reads as torch's reader reads it", "[verify]") {
  const json want = facts();
  const CheckpointView v = view_of(kDir / "shards", /*values=*/true);
  CHECK(std::string(format_name(v.format)) == "dcp-hf-shards");
  REQUIRE(v.model.tensors.size() == want["tensors"].size());
  for (const TensorInfo& t : v.model.tensors) {
    INFO(t.name);
    REQUIRE(want["tensors"].contains(t.name));
    const json& w = want["tensors"][t.name];
    CHECK(t.dtype.name() == w["dtype"].get<std::string>());
    CHECK(t.shape == w["size"].get<std::vector<int64_t>>());
    // The values torch's dcp.load put together, element by element.
    const auto floats = w["values"].get<std::vector<float>>();
    REQUIRE(t.values != nullptr);
    REQUIRE(t.values->size() == floats.size() * sizeof(float));
    CHECK(std::memcmp(t.values->data(), floats.data(), t.values->size()) == 0);
  }

  const AuditReport r = audit(kDir / "shards", /*deep=*/true);
  CHECK(errors(r) == 0);
  CHECK(model_status(r) == ComponentStatus::kPresent);
  CHECK(finding(r, Severity::kInfo, {"tile it exactly (5 tensors, 13 chunks"}) != nullptr);
  // The replicated buffer is saved from one rank: the other ranks' file 3 was never written,
  // which the names cannot tell from a lost file (a warning says both).
  for (int rank : {2, 3}) {
    CHECK(finding(r, Severity::kWarning,
                  {shard(rank, 3) + " is not here", "never written", "\"scale\""}) != nullptr);
  }
  const ComponentReport* opt = r.find(AuditComponent::kOptimizer);
  REQUIRE(opt != nullptr);
  CHECK(opt->status == ComponentStatus::kMissing);
  CHECK(opt->evidence.find("HuggingFaceStorageWriter") != std::string::npos);
}

TEST_CASE("hf dcp shards: a lost file of the first rank leaves gaps that name it", "[verify]") {
  Copy c("first");
  fs::remove(c.dir / shard(1, 1));
  const AuditReport r = audit(c.dir);
  CHECK(finding(r, Severity::kError,
                {"tensor \"0.weight\": gap: elements [0:3, 0:4]", shard(1, 1) + " (missing)"}) !=
        nullptr);
  CHECK(finding(r, Severity::kError, {"tensor \"0.bias\": gap: elements [0:3]"}) != nullptr);
  CHECK(finding(r, Severity::kError, {shard(1, 1) + " is missing", "\"0.weight\""}) != nullptr);
  CHECK(finding(r, Severity::kInfo, {"tile it exactly"}) == nullptr);
  CHECK(model_status(r) == ComponentStatus::kInconsistent);
  CHECK_FALSE(r.complete);
}

TEST_CASE("hf dcp shards: a lost file of the last rank is named from the grid", "[verify]") {
  // Rank 3's rows were the last: what is left tiles a shorter shape, as torch would load it, but
  // ranks 1 and 2 hold chunks of those tensors, so rank 3 did too.
  Copy c("last");
  fs::remove(c.dir / shard(3, 1));
  const AuditReport r = audit(c.dir);
  CHECK(finding(r, Severity::kError,
                {shard(3, 1) + " is missing", "rank 3's chunks of \"0.bias\", \"0.weight\"",
                 "short", "0.weight [6, 4]"}) != nullptr);
  CHECK(model_status(r) == ComponentStatus::kInconsistent);
  CHECK_FALSE(r.complete);
}

TEST_CASE("hf dcp shards: a lone chunk left cannot tell lost from never written", "[verify]") {
  // Ranks 2 and 3 lose file 1: rank 1's chunks of layer 0 look like whole tensors of 3 rows, as
  // the replicated buffer's one chunk does. A warning names each file and the shapes.
  Copy c("lone");
  fs::remove(c.dir / shard(2, 1));
  fs::remove(c.dir / shard(3, 1));
  const AuditReport r = audit(c.dir);
  for (int rank : {2, 3}) {
    CHECK(finding(r, Severity::kWarning,
                  {shard(rank, 1) + " is not here", "never written", "or it is lost",
                   "0.weight [3, 4]"}) != nullptr);
  }
  CHECK(errors(r) == 0);
}

TEST_CASE("hf dcp shards: what cannot be seen: every file of the last rank lost", "[verify]") {
  // Rank 3 wrote files 1 and 2 only (the buffer went to rank 1): without both, no name says a
  // rank 3 existed, and the shapes torch's reader infers are short. Documented in docs/cli.md.
  Copy c("rank3");
  fs::remove(c.dir / shard(3, 1));
  fs::remove(c.dir / shard(3, 2));
  const CheckpointView v = view_of(c.dir);
  for (const TensorInfo& t : v.model.tensors) {
    if (t.name == "0.weight") CHECK(t.shape == std::vector<int64_t>{6, 4});
  }
  CHECK(errors(audit(c.dir)) == 0);
}

TEST_CASE("hf dcp shards: a truncated file is named with the chunks it loses", "[verify]") {
  Copy c("truncated");
  fs::resize_file(c.dir / shard(3, 2), fs::file_size(c.dir / shard(3, 2)) - 3);
  const AuditReport r = audit(c.dir);
  CHECK(finding(r, Severity::kError, {shard(3, 2) + " is damaged", "truncated", "2 chunk(s)"}) !=
        nullptr);
  // Its header still parses, so the shape stays whole and the lost rows show as a gap.
  CHECK(finding(r, Severity::kError,
                {"tensor \"2.weight\": gap: elements [2:3, 0:7]", shard(3, 2)}) != nullptr);
  CHECK(model_status(r) == ComponentStatus::kInconsistent);
  // ckpt diff --deep cannot assemble the tensor: Corrupt, naming the file it was lost with.
  ReadOptions values;
  values.tensor_values = true;
  auto v = builtin_readers().read(Env::posix(), c.dir.string(), values);
  REQUIRE_FALSE(v.is_ok());
  CHECK(v.status().code() == Code::kCorrupt);
  CHECK(v.status().message().find("lost with " + shard(3, 2)) != std::string::npos);
}

TEST_CASE("hf dcp shards: overlapping chunks and disagreeing dtypes are errors", "[verify]") {
  Copy c("edited");
  // Rank 2's rows of 0.weight moved up one row: [2:5] overlaps rank 1's [0:3], row 5 is lost.
  c.edit(shard(2, 1), "\\\"saved_offsets\\\": [3, 0]", "\\\"saved_offsets\\\": [2, 0]");
  c.edit(shard(2, 1), "\"0.bias\":{\"dtype\":\"F32\"", "\"0.bias\":{\"dtype\":\"I32\"");
  const AuditReport r = audit(c.dir);
  CHECK(finding(r, Severity::kError, {"tensor \"0.weight\": overlap: elements [2:3, 0:4]"}) !=
        nullptr);
  CHECK(finding(r, Severity::kError, {"tensor \"0.weight\": gap: elements [5:6, 0:4]"}) != nullptr);
  CHECK(finding(r, Severity::kError,
                {"tensor \"0.bias\": its chunks disagree on the dtype",
                 "int32 in " + shard(2, 1)}) != nullptr);
  CHECK(model_status(r) == ComponentStatus::kInconsistent);
}

TEST_CASE("hf dcp shards: --deep finds NaN in a chunk", "[verify]") {
  Copy c("nan");
  // The first element of the file's data buffer (0.bias [0:3]) becomes a NaN.
  const fs::path p = c.dir / shard(1, 1);
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | len[k];
  const float nan = std::numeric_limits<float>::quiet_NaN();
  f.seekp(static_cast<std::streamoff>(8 + n));
  f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  f.close();
  CHECK(finding(audit(c.dir), Severity::kError, {"NaN"}) == nullptr);
  const AuditReport r = audit(c.dir, /*deep=*/true);
  CHECK(finding(r, Severity::kError,
                {shard(1, 1) + ": tensor \"0.bias\" [0:3] holds 1 NaN/Inf values"}) != nullptr);
  CHECK(model_status(r) == ComponentStatus::kInconsistent);
}
