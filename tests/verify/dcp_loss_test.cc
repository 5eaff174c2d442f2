// `ckpt audit`'s tiling check and loss accounting on real torch.distributed.checkpoint folders
// (fixtures/dcp_loss/, make_dcp_loss.py: a 2-process FSDP2 run, every tensor one chunk per rank,
// bytes entries spread over both .distcp files). FACTS.json is what torch's own metadata reader
// says each file holds; with a file deleted or truncated (in a temp copy), every entry it held
// must be named — tensors with the element ranges of their chunks, bytes entries by key — and
// every component that lost one must not be `present`.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ckpt/io/env.h"
#include "verify/audit/audit.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/dcp.h"
#include "verify/formats/tensor_bytes.h"
#include "verify/zip/zip_reader.h"

namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using namespace ckpt::verify;
using nlohmann::json;

const fs::path kDir = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "dcp_loss";

json facts() {
  std::ifstream in(kDir / "FACTS.json");
  REQUIRE(in.good());
  return json::parse(in);
}

// A copy of fixtures/dcp_loss/<name> in a temp folder, removed with the object.
struct Copy {
  explicit Copy(const std::string& name)
      : dir(fs::temp_directory_path() /
            ("ckpt_dcp_loss_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir);
    fs::copy(kDir / name, dir, fs::copy_options::recursive);
  }
  ~Copy() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
};

AuditReport audit(const fs::path& p, bool deep = false) {
  const ReaderSet readers = builtin_readers();
  AuditOptions options;
  options.deep = deep;
  auto r = audit_path(readers, Env::posix(), p.string(), options);
  REQUIRE(r.is_ok());
  return std::move(*r);
}

ComponentStatus status(const AuditReport& r, AuditComponent c) {
  const ComponentReport* cr = r.find(c);
  REQUIRE(cr != nullptr);
  return cr->status;
}

// "[3:6, 0:4]" of a FACTS chunk; a 0-d tensor's is named as its one element.
std::string range(const json& chunk) {
  if (chunk["offsets"].empty()) return "its one element (0-d)";
  std::string s = "[";
  for (size_t d = 0; d < chunk["offsets"].size(); ++d) {
    const int64_t o = chunk["offsets"][d], n = chunk["sizes"][d];
    s += (d ? ", " : "") + std::to_string(o) + ":" + std::to_string(o + n);
  }
  return s + "]";
}

// The error finding that names `what` and mentions `file`, or null.
const Finding* naming(const AuditReport& r, const std::string& what, const std::string& file) {
  for (const Finding& f : r.findings) {
    if (f.severity == Severity::kError && f.message.find(what) != std::string::npos &&
        f.message.find(file) != std::string::npos)
      return &f;
  }
  return nullptr;
}

// What a file cut to `size` bytes loses according to FACTS: the entries whose byte range ends
// past it (size < 0: the file is gone, every entry), and the texts that must not appear for the
// entries it keeps.
struct Expected {
  std::vector<std::pair<std::string, std::vector<std::string>>> tensors;  // key, lost ranges
  std::vector<std::string> bytes;
  std::vector<std::string> kept;  // entries inside the kept bytes: never named as lost
};

Expected expected(const json& file, int64_t size) {
  Expected e;
  for (const auto& [key, chunks] : file["tensors"].items()) {
    std::vector<std::string> lost;
    for (const json& c : chunks) {
      const int64_t end = c["offset"].get<int64_t>() + c["length"].get<int64_t>();
      if (size < 0 || end > size) lost.push_back(range(c));
    }
    if (lost.empty())
      e.kept.push_back("tensor \"" + key + "\" loses");
    else
      e.tensors.emplace_back(key, lost);
  }
  for (const json& b : file["bytes"]) {
    const int64_t end = b["offset"].get<int64_t>() + b["length"].get<int64_t>();
    const std::string key = b["key"];
    if (size < 0 || end > size)
      e.bytes.push_back(key);
    else
      e.kept.push_back("bytes entry \"" + key + "\"");
  }
  return e;
}

// Checks that the audit of the damaged copy names every entry of `e` and that every component
// charged with a loss is not present; returns the components charged.
std::set<AuditComponent> check_named(const AuditReport& r, const Expected& e,
                                     const std::string& file) {
  std::set<AuditComponent> charged;
  for (const auto& [key, ranges] : e.tensors) {
    const Finding* f = naming(r, "tensor \"" + key + "\" loses", file);
    INFO("tensor " << key << " of " << file);
    REQUIRE(f != nullptr);
    for (const std::string& rg : ranges) CHECK(f->message.find(rg) != std::string::npos);
    if (f->component) charged.insert(*f->component);
  }
  for (const std::string& key : e.bytes) {
    const Finding* f = naming(r, "bytes entry \"" + key + "\"", file);
    INFO("bytes entry " << key << " of " << file);
    REQUIRE(f != nullptr);
    if (f->component) charged.insert(*f->component);
  }
  for (const std::string& k : e.kept) {
    INFO("kept " << k);
    CHECK(naming(r, k, file) == nullptr);
  }
  for (AuditComponent c : charged) {
    INFO("component " << component_name(c));
    CHECK(status(r, c) != ComponentStatus::kPresent);
  }
  CHECK_FALSE(r.complete);
  return charged;
}

bool has_finding(const AuditReport& r, Severity s, const std::string& text) {
  for (const Finding& f : r.findings) {
    if (f.severity == s && f.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("DCP audit: the chunks of every tensor tile it", "[verify]") {
  const json F = facts();
  for (const char* name : {"nested", "titan", "flat", "safetensors"}) {
    INFO(name);
    const AuditReport r = audit(kDir / name);
    const size_t tensors = F[name]["tensors"].size();
    CHECK(has_finding(
        r, Severity::kInfo,
        "the chunks of every tensor tile it exactly (" + std::to_string(tensors) + " tensors"));
    CHECK_FALSE(has_finding(r, Severity::kError, "lost"));
    CHECK(status(r, AuditComponent::kModel) == ComponentStatus::kPresent);
    CHECK(status(r, AuditComponent::kScheduler) == ComponentStatus::kPresent);
    CHECK(status(r, AuditComponent::kLoader) == ComponentStatus::kPresent);
    CHECK(status(r, AuditComponent::kCounters) == ComponentStatus::kPresent);
  }
  SECTION("overlapping chunks with a gap, the same element count: refused with tensor and rows") {
    Copy c("nested");
    fs::copy_file(kDir / "overlap.metadata", c.dir / ".metadata",
                  fs::copy_options::overwrite_existing);
    const AuditReport r = audit(c.dir);
    CHECK_FALSE(r.complete);
    CHECK(has_finding(r, Severity::kError,
                      "tensor \"model.0.weight\": overlap: elements [2:3, 0:4] are in both"));
    CHECK(has_finding(r, Severity::kError, "tensor \"model.0.weight\": gap: elements [5:6, 0:4]"));
    CHECK_FALSE(has_finding(r, Severity::kInfo, "tile it exactly"));
  }
}

TEST_CASE("DCP audit: torchtitan's flattened optimizer under \"optimizer.\" is the optimizer",
          "[verify]") {
  const AuditReport r = audit(kDir / "titan");
  CHECK(status(r, AuditComponent::kOptimizer) == ComponentStatus::kPresent);
  const ComponentReport* o = r.find(AuditComponent::kOptimizer);
  CHECK(o->evidence.find("Adam/AdamW state for 2 of 2 params") != std::string::npos);
  CHECK(o->evidence.find("step 6") != std::string::npos);
}

TEST_CASE("DCP audit: a deleted .distcp names every entry it held", "[verify]") {
  const json F = facts();
  for (const char* name : {"nested", "titan", "flat", "safetensors"}) {
    for (const auto& [file, held] : F[name]["files"].items()) {
      INFO(name << " without " << file);
      Copy c(name);
      fs::remove(c.dir / file);
      const AuditReport r = audit(c.dir);
      CHECK(has_finding(r, Severity::kError, file + " is missing:"));
      const auto charged = check_named(r, expected(held, -1), file);
      if (file == "__1_0.distcp") {  // the file DCP's planner gave the scheduler's bytes
        CHECK(charged.count(AuditComponent::kScheduler) == 1);
        CHECK(charged.count(AuditComponent::kLoader) == 1);
        CHECK(status(r, AuditComponent::kScheduler) != ComponentStatus::kPresent);
      }
      CHECK(charged.count(AuditComponent::kModel) == 1);
      CHECK(status(r, AuditComponent::kModel) == ComponentStatus::kInconsistent);
    }
  }
}

TEST_CASE("DCP audit: a truncated .distcp names the entries past its end, and only those",
          "[verify]") {
  const json F = facts();
  for (const char* name : {"nested", "titan"}) {
    const std::string file = "__1_0.distcp";
    Copy c(name);
    const int64_t size = static_cast<int64_t>(fs::file_size(c.dir / file)) / 2;
    fs::resize_file(c.dir / file, static_cast<uintmax_t>(size));
    INFO(name << " with " << file << " cut to " << size << " bytes");
    const AuditReport r = audit(c.dir);
    CHECK(has_finding(r, Severity::kError, file + " is truncated: " + std::to_string(size)));
    const Expected e = expected(F[name]["files"][file], size);
    REQUIRE(e.tensors.size() + e.bytes.size() > 0);
    REQUIRE_FALSE(e.kept.empty());
    check_named(r, e, file);
  }
}

// The tensor record of flat key `key` in a rebuilt DCP state dict.
const TensorRecord* record_of(const Value* v, const std::string& key, int depth = 0) {
  if (v == nullptr || depth > 16) return nullptr;
  if (v->kind == Kind::kTensor) return v->tensor->storage_key == key ? v->tensor.get() : nullptr;
  for (const auto& [k, x] : v->entries) {
    if (const TensorRecord* t = record_of(x, key, depth + 1)) return t;
  }
  for (const Value* x : v->items) {
    if (const TensorRecord* t = record_of(x, key, depth + 1)) return t;
  }
  return nullptr;
}

const ComponentReport& component(const AuditReport& r, AuditComponent c) {
  const ComponentReport* cr = r.find(c);
  REQUIRE(cr != nullptr);
  return *cr;
}

// Where FACTS says `file` of `name` holds the chunk of `key` (its torch.save blob, or for a
// safetensors-format folder the blob every chunk of the file shares).
std::pair<int64_t, int64_t> chunk_at(const json& F, const std::string& name,
                                     const std::string& file, const std::string& key) {
  const json& c = F[name]["files"][file]["tensors"][key].at(0);
  return {c["offset"].get<int64_t>(), c["length"].get<int64_t>()};
}

void write_at(const fs::path& p, int64_t offset, const std::string& bytes) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

TEST_CASE("DCP audit: torchtitan's model at the top level of its states is the model", "[verify]") {
  // CheckpointManager._flattened_model_states_sd: "0.weight" beside "optimizer", ...
  const AuditReport r = audit(kDir / "flat");
  CHECK(status(r, AuditComponent::kModel) == ComponentStatus::kPresent);
  CHECK(component(r, AuditComponent::kModel).evidence.find("2 tensors (0.weight [6,4]") !=
        std::string::npos);
  CHECK(status(r, AuditComponent::kOptimizer) == ComponentStatus::kPresent);
  CHECK(component(r, AuditComponent::kOptimizer).evidence.find("step 6") != std::string::npos);
  CHECK(status(r, AuditComponent::kCounters) == ComponentStatus::kPresent);
  Copy c("flat");  // its lost weights are the model's, by their top-level keys
  fs::remove(c.dir / "__0_0.distcp");
  const AuditReport lost = audit(c.dir);
  CHECK(status(lost, AuditComponent::kModel) == ComponentStatus::kInconsistent);
  CHECK(has_finding(lost, Severity::kError, "held model entries, now lost: tensor \"0.weight\""));
}

TEST_CASE("DCP audit: a safetensors-format folder is read through each blob's header", "[verify]") {
  // FileSystemWriter(serialization_format=SAFETENSORS): .metadata gives every chunk of a file
  // the offset of one safetensors blob; read as raw bytes there, the values were its header.
  const AuditReport r = audit(kDir / "safetensors", true);
  CHECK(component(r, AuditComponent::kOptimizer).evidence.find("step 6") != std::string::npos);
  CHECK(component(r, AuditComponent::kCounters).evidence.find("app.step = 6") != std::string::npos);
  CHECK_FALSE(has_finding(r, Severity::kError, "distcp"));
  auto st = open_dcp_tree(Env::posix(), (kDir / "safetensors").string());
  auto plain = open_dcp_tree(Env::posix(), (kDir / "nested").string());
  REQUIRE(st.is_ok());
  REQUIRE(plain.is_ok());
  REQUIRE(st->chunks.size() == plain->chunks.size());
  for (const auto& [key, chunks] : plain->chunks) {
    INFO(key);
    const TensorRecord* t = record_of(plain->root, key);
    REQUIRE(t != nullptr);
    auto a = read_dcp_tensor(Env::posix(), (kDir / "nested").string(), *plain, *t);
    auto b = read_dcp_tensor(Env::posix(), (kDir / "safetensors").string(), *st, *t);
    REQUIRE(a.is_ok());
    REQUIRE(b.is_ok());
    REQUIRE(a->nbytes == b->nbytes);
    CHECK(std::memcmp(a->data, b->data, a->nbytes) == 0);
  }
  SECTION("a NaN written into a weight is found by --deep (safetensors keeps no checksum)") {
    Copy c("safetensors");
    const fs::path file = c.dir / "__0_0.distcp";
    const auto [blob, length] = chunk_at(facts(), "safetensors", "__0_0.distcp", "model.0.weight");
    std::ifstream in(file, std::ios::binary);
    in.seekg(blob);
    uint64_t header = 0;
    in.read(reinterpret_cast<char*>(&header), 8);
    std::string text(header, '\0');
    in.read(text.data(), static_cast<std::streamsize>(header));
    const int64_t begin = json::parse(text)["model.0.weight"]["data_offsets"][0];
    write_at(file, blob + 8 + static_cast<int64_t>(header) + begin, std::string("\0\0\xc0\x7f", 4));
    const AuditReport deep = audit(c.dir, true);
    CHECK(has_finding(deep, Severity::kError,
                      "tensor \"model.0.weight\" [0:3, 0:4] holds 1 NaN/Inf"));
    CHECK(status(deep, AuditComponent::kModel) == ComponentStatus::kInconsistent);
    CHECK(status(audit(c.dir), AuditComponent::kModel) == ComponentStatus::kPresent);
  }
}

TEST_CASE("DCP audit: a .metadata of another checkpoint is named, and no value is read from it",
          "[verify]") {
  Copy c("titan");  // nested's .metadata places its chunks where titan's files hold others
  fs::copy_file(kDir / "nested" / ".metadata", c.dir / ".metadata",
                fs::copy_options::overwrite_existing);
  const AuditReport r = audit(c.dir);
  CHECK_FALSE(r.complete);
  CHECK(has_finding(r, Severity::kError, "is holding other bytes than .metadata places there"));
  CHECK(has_finding(r, Severity::kError, "the .metadata of another checkpoint, or damage"));
  CHECK(status(r, AuditComponent::kModel) != ComponentStatus::kPresent);
  CHECK(status(r, AuditComponent::kOptimizer) != ComponentStatus::kPresent);
}

TEST_CASE("DCP audit: with every .distcp gone the model and optimizer are missing", "[verify]") {
  Copy c("nested");
  fs::remove(c.dir / "__0_0.distcp");
  fs::remove(c.dir / "__1_0.distcp");
  const AuditReport r = audit(c.dir);
  CHECK(status(r, AuditComponent::kModel) == ComponentStatus::kMissing);
  CHECK(component(r, AuditComponent::kModel).evidence.find("every one of its 2 tensors is lost") !=
        std::string::npos);
  CHECK(status(r, AuditComponent::kOptimizer) == ComponentStatus::kMissing);
  SECTION("with one of them left, both are inconsistent") {
    Copy one("nested");
    fs::remove(one.dir / "__0_0.distcp");
    const AuditReport half = audit(one.dir);
    CHECK(status(half, AuditComponent::kModel) == ComponentStatus::kInconsistent);
    CHECK(component(half, AuditComponent::kModel).consequence.find("cannot be restored as saved") !=
          std::string::npos);
    CHECK(status(half, AuditComponent::kOptimizer) == ComponentStatus::kInconsistent);
  }
}

TEST_CASE("DCP audit --deep: a changed byte in a chunk fails its CRC-32, named with its tensor",
          "[verify]") {
  Copy c("nested");
  const fs::path file = c.dir / "__1_0.distcp";
  const auto [blob, length] = chunk_at(facts(), "nested", "__1_0.distcp", "model.0.weight");
  std::ifstream in(file, std::ios::binary);
  in.seekg(blob);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.read(bytes.data(), length);
  auto mf = memory_file("blob", bytes);
  auto zip = ZipReader::open(*mf);
  REQUIRE(zip.is_ok());
  const ZipEntry* data = nullptr;
  for (const ZipEntry& e : zip->entries()) {
    if (e.name.find("/data/0") != std::string::npos) data = &e;
  }
  REQUIRE(data != nullptr);
  auto at = zip->data_offset(*data);
  REQUIRE(at.is_ok());
  const int64_t where = blob + static_cast<int64_t>(*at) + 5;
  write_at(file, where, std::string(1, static_cast<char>(bytes[*at + 5] ^ 0x10)));
  CHECK(status(audit(c.dir), AuditComponent::kModel) == ComponentStatus::kPresent);
  const AuditReport r = audit(c.dir, true);
  CHECK(has_finding(r, Severity::kError,
                    "__1_0.distcp: tensor \"model.0.weight\" [3:6, 0:4]: record "));
  CHECK(has_finding(r, Severity::kError, "fails its CRC-32"));
  CHECK(status(r, AuditComponent::kModel) == ComponentStatus::kInconsistent);
}

TEST_CASE("DCP audit: a .distcp file that .metadata does not name is mentioned", "[verify]") {
  Copy c("nested");
  fs::copy_file(c.dir / "__1_0.distcp", c.dir / "__7_0.distcp");
  const AuditReport r = audit(c.dir);
  CHECK(has_finding(r, Severity::kInfo, "1 .distcp file(s) that .metadata does not name"));
  CHECK(has_finding(r, Severity::kInfo, "__7_0.distcp"));
  CHECK(status(r, AuditComponent::kModel) == ComponentStatus::kPresent);
}

}  // namespace
