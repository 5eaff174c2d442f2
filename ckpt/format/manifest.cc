#include "ckpt/format/manifest.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest_scan.h"

namespace ckpt {
namespace {

using json = nlohmann::json;

Status field_error(const std::string& where, const std::string& what) {
  return corrupt(where + ": " + what);
}

// Typed getters that never throw.
bool get_u64(const json& j, const char* key, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}
bool get_i64(const json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}
bool get_str(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}
bool get_hash(const json& j, const char* key, uint64_t* out) {
  std::string s;
  return get_str(j, key, &s) && parse_hex64(s, out);
}

Result<json> parse(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return field_error(where, "not a JSON object");
  return j;
}

// numel × size without overflow; false on overflow or negative dims.
bool checked_nbytes(const std::vector<int64_t>& shape, size_t elem, uint64_t* out) {
  unsigned __int128 n = elem;
  for (int64_t d : shape) {
    if (d < 0) return false;
    n *= static_cast<uint64_t>(d);
    if (n > (static_cast<unsigned __int128>(1) << 62)) return false;
  }
  *out = static_cast<uint64_t>(n);
  return true;
}

bool get_ints(const json& j, const char* key, std::vector<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return false;
  for (const json& d : *it) {
    if (!d.is_number_integer()) return false;
    out->push_back(d.get<int64_t>());
  }
  return true;
}

// The "box" of a DOM entry into the draft (manifest_scan.h).
void draft_box(const json& b, ManifestDraftEntry* d) {
  d->has_box = true;
  d->box_ill_typed = !b.is_object() || !get_ints(b, "global_shape", &d->box.global_shape) ||
                     !get_ints(b, "offsets", &d->box.offsets) ||
                     !get_str(b, "placement", &d->box.placement);
}

// The "chunks" of a DOM entry into the draft.
void draft_chunks(const json& c, ManifestDraftEntry* d) {
  d->has_chunks = true;
  if (!c.is_object() || !get_u64(c, "bytes", &d->chunk_bytes) || !c.contains("xxh3") ||
      !c["xxh3"].is_array()) {
    d->chunks_ill_typed = true;
    return;
  }
  const json& digests = c["xxh3"];
  d->chunk_count = digests.size();
  d->chunk_xxh3.reserve(d->chunk_count);
  for (const json& h : digests) {
    uint64_t x = 0;
    if (!h.is_string() || !parse_hex64(h.get<std::string>(), &x)) {
      d->chunk_digest_bad = true;
      return;
    }
    d->chunk_xxh3.push_back(x);
  }
}

// "chunks": {"bytes": C, "xxh3": [...]}: C a positive multiple of 4096 below nbytes, and one
// digest per C bytes of the tensor (the last chunk shorter).
Status check_chunks(ManifestDraftEntry* d, const std::string& where) {
  ManifestEntry& e = d->entry;
  const std::string at = "tensor \"" + e.path + "\": ";
  if (d->chunks_ill_typed) return field_error(where, at + "ill-typed \"chunks\"");
  const uint64_t bytes = d->chunk_bytes;
  if (bytes == 0 || bytes % kTensorAlignment != 0 || bytes >= e.nbytes) {
    return field_error(where, at + "chunk size " + std::to_string(bytes) +
                                  " is not a multiple of 4096 below the tensor's " +
                                  std::to_string(e.nbytes) + " bytes");
  }
  const uint64_t want = (e.nbytes + bytes - 1) / bytes;
  if (d->chunk_count != want) {
    return field_error(where, at + std::to_string(d->chunk_count) + " chunk digests, " +
                                  std::to_string(want) + " chunks of " + std::to_string(bytes) +
                                  " bytes");
  }
  if (d->chunk_digest_bad) {
    return field_error(where, at + "a chunk digest is not 16 lowercase hex digits");
  }
  e.chunk_bytes = bytes;
  e.chunk_xxh3 = std::move(d->chunk_xxh3);
  return Status::ok();
}

// The checks of one entry that need no other file, in the order decode_manifest has always made
// them; then the entry joins `m` (its path not listed before: `paths`, over m's entries, whose
// capacity is reserved so that their strings do not move).
Status check_entry(ManifestDraftEntry&& d, const std::string& where, Manifest* m,
                   std::unordered_set<std::string_view>* paths) {
  ManifestEntry& e = d.entry;
  auto dtype = dtype_from_name(d.dtype);
  if (!dtype) {
    return field_error(where, "tensor \"" + e.path + "\": unknown dtype \"" + d.dtype + "\"");
  }
  e.dtype = *dtype;
  uint64_t expect = 0;
  if (!checked_nbytes(e.shape, dtype_size(e.dtype), &expect) || expect != e.nbytes) {
    return field_error(where, "tensor \"" + e.path + "\": nbytes " + std::to_string(e.nbytes) +
                                  " does not match shape × dtype size (" + std::to_string(expect) +
                                  ")");
  }
  if (e.nbytes > 0 && e.offset % kTensorAlignment != 0) {
    return field_error(where, "tensor \"" + e.path + "\": offset " + std::to_string(e.offset) +
                                  " is not 4096-aligned");
  }
  if (e.offset > m->file_bytes || e.nbytes > m->file_bytes - e.offset) {
    return field_error(where, "tensor \"" + e.path + "\": extent [" + std::to_string(e.offset) +
                                  ", +" + std::to_string(e.nbytes) + ") runs past the file's " +
                                  std::to_string(m->file_bytes) + " bytes");
  }
  if (d.has_box) {
    if (d.box_ill_typed) return field_error(where, "tensor \"" + e.path + "\": ill-typed \"box\"");
    const std::string problem = box_problem(d.box, e.shape);
    if (!problem.empty()) return field_error(where, "tensor \"" + e.path + "\": " + problem);
    e.box = std::move(d.box);
  }
  if (d.has_chunks) CKPT_RETURN_IF_ERROR(check_chunks(&d, where));
  if (paths->count(e.path) != 0) {
    return field_error(where, "tensor \"" + e.path + "\" listed twice");
  }
  m->tensors.push_back(std::move(e));
  paths->insert(m->tensors.back().path);
  return Status::ok();
}

// No two tensors' extents overlap.
Status check_overlaps(const Manifest& m, const std::string& where) {
  std::vector<const ManifestEntry*> by_offset;
  for (const auto& e : m.tensors) {
    if (e.nbytes > 0) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset) {
      return field_error(where, "tensors \"" + by_offset[i - 1]->path + "\" and \"" +
                                    by_offset[i]->path + "\" overlap");
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<uint64_t> chunk_digests(const void* data, uint64_t nbytes, uint64_t chunk_bytes) {
  std::vector<uint64_t> out;
  if (chunk_bytes == 0) return out;
  const auto* p = static_cast<const unsigned char*>(data);
  out.reserve((nbytes + chunk_bytes - 1) / chunk_bytes);
  for (uint64_t at = 0; at < nbytes; at += chunk_bytes) {
    out.push_back(xxh3_64(p + at, std::min(chunk_bytes, nbytes - at)));
  }
  return out;
}

std::string encode_manifest(const Manifest& m) {
  json t = json::array();
  for (const auto& e : m.tensors) {
    t.push_back({{"path", e.path},
                 {"dtype", dtype_name(e.dtype)},
                 {"shape", e.shape},
                 {"offset", e.offset},
                 {"nbytes", e.nbytes},
                 {"xxh3", hex64(e.xxh3)}});
    if (e.box) {
      t.back()["box"] = {{"global_shape", e.box->global_shape},
                         {"offsets", e.box->offsets},
                         {"placement", e.box->placement}};
    }
    if (e.chunk_bytes > 0) {
      json h = json::array();
      for (uint64_t x : e.chunk_xxh3) h.push_back(hex64(x));
      t.back()["chunks"] = {{"bytes", e.chunk_bytes}, {"xxh3", std::move(h)}};
    }
  }
  json j = {{"format", "ckpt-manifest"},
            {"version", 1},
            {"file", m.file},
            {"file_bytes", m.file_bytes},
            {"step", m.step},
            {"rank", m.rank},
            {"world_size", m.world_size},
            {"attrs_xxh3", hex64(m.attrs_xxh3)},
            {"tensors", t}};
  if (m.file_xxh3) j["file_xxh3"] = hex64(*m.file_xxh3);
  if (m.regions_xxh3) j["regions_xxh3"] = hex64(*m.regions_xxh3);
  return j.dump(1) + "\n";
}

Result<Manifest> decode_manifest(const std::string& text, const std::string& where) {
  std::optional<ManifestDraft> draft = scan_manifest(text);
  if (!draft) return decode_manifest_dom(text, where);
  Manifest m = std::move(draft->header);
  m.tensors.reserve(draft->tensors.size());
  std::unordered_set<std::string_view> paths(draft->tensors.size());
  for (ManifestDraftEntry& d : draft->tensors) {
    CKPT_RETURN_IF_ERROR(check_entry(std::move(d), where, &m, &paths));
  }
  CKPT_RETURN_IF_ERROR(check_overlaps(m, where));
  return m;
}

Result<Manifest> decode_manifest_dom(const std::string& text, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(json j, parse(text, where));
  std::string format;
  int64_t version = 0;
  if (!get_str(j, "format", &format) || format != "ckpt-manifest") {
    return field_error(where, "not a ckpt manifest (\"format\" is not \"ckpt-manifest\")");
  }
  if (!get_i64(j, "version", &version) || version != 1) {
    return unsupported(where + ": manifest version " + j.value("version", json()).dump() +
                       ", this build reads version 1");
  }
  Manifest m;
  if (!get_str(j, "file", &m.file) || !get_u64(j, "file_bytes", &m.file_bytes) ||
      !get_i64(j, "step", &m.step) || !get_i64(j, "rank", &m.rank) ||
      !get_i64(j, "world_size", &m.world_size) || !get_hash(j, "attrs_xxh3", &m.attrs_xxh3)) {
    return field_error(where,
                       "missing or ill-typed header field (file, file_bytes, step, rank, "
                       "world_size, attrs_xxh3)");
  }
  if (j.contains("file_xxh3")) {  // optional: older manifests do not have it
    uint64_t h = 0;
    if (!get_hash(j, "file_xxh3", &h)) {
      return field_error(where, "\"file_xxh3\" is not 16 lowercase hex digits");
    }
    m.file_xxh3 = h;
  }
  if (j.contains("regions_xxh3")) {  // optional, as file_xxh3
    uint64_t h = 0;
    if (!get_hash(j, "regions_xxh3", &h)) {
      return field_error(where, "\"regions_xxh3\" is not 16 lowercase hex digits");
    }
    m.regions_xxh3 = h;
  }
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array()) return field_error(where, "no \"tensors\" array");
  m.tensors.reserve(tensors->size());
  std::unordered_set<std::string_view> paths(tensors->size());
  for (size_t i = 0; i < tensors->size(); ++i) {
    const json& t = (*tensors)[i];
    const std::string at = "tensor #" + std::to_string(i);
    ManifestDraftEntry d;
    ManifestEntry& e = d.entry;
    if (!t.is_object() || !get_str(t, "path", &e.path) || !get_str(t, "dtype", &d.dtype) ||
        !get_u64(t, "offset", &e.offset) || !get_u64(t, "nbytes", &e.nbytes) ||
        !get_hash(t, "xxh3", &e.xxh3) || !t.contains("shape") || !t["shape"].is_array()) {
      return field_error(where, at + ": missing or ill-typed field");
    }
    for (const json& dim : t["shape"]) {
      if (!dim.is_number_integer())
        return field_error(where, at + " \"" + e.path + "\": bad shape");
      e.shape.push_back(dim.get<int64_t>());
    }
    if (t.contains("box")) draft_box(t["box"], &d);
    if (t.contains("chunks")) draft_chunks(t["chunks"], &d);
    CKPT_RETURN_IF_ERROR(check_entry(std::move(d), where, &m, &paths));
  }
  CKPT_RETURN_IF_ERROR(check_overlaps(m, where));
  return m;
}

std::string encode_commit(const CommitRecord& c) {
  json files = json::array();
  for (const auto& f : c.files) {
    json e = {{"name", f.name}, {"bytes", f.bytes}, {"xxh3", hex64(f.xxh3)}};
    if (f.regions_xxh3) e["regions_xxh3"] = hex64(*f.regions_xxh3);
    files.push_back(std::move(e));
  }
  json body = {{"format", "ckpt-commit"}, {"version", 1},
               {"step", c.step},          {"world_size", c.world_size},
               {"time", c.time},          {"components", c.components},
               {"files", files}};
  const std::string canonical = body.dump();
  json j = {{"body", body}, {"xxh3", hex64(xxh3_64(canonical.data(), canonical.size()))}};
  return j.dump(1) + "\n";
}

Result<CommitRecord> decode_commit(const std::string& text, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(json j, parse(text, where));
  uint64_t want = 0;
  if (!j.contains("body") || !j["body"].is_object() || !get_hash(j, "xxh3", &want)) {
    return field_error(where, "not a ckpt commit record (needs \"body\" and \"xxh3\")");
  }
  const json& body = j["body"];
  const std::string canonical = body.dump();
  const uint64_t got = xxh3_64(canonical.data(), canonical.size());
  if (got != want) {
    return field_error(where, "commit record damaged: xxh3 of body is " + hex64(got) +
                                  ", the record says " + hex64(want));
  }
  std::string format;
  int64_t version = 0;
  if (!get_str(body, "format", &format) || format != "ckpt-commit") {
    return field_error(where, "\"format\" is not \"ckpt-commit\"");
  }
  if (!get_i64(body, "version", &version) || version != 1) {
    return unsupported(where + ": commit record version is not 1");
  }
  CommitRecord c;
  if (!get_i64(body, "step", &c.step) || !get_i64(body, "world_size", &c.world_size) ||
      !get_str(body, "time", &c.time) || !body.contains("files") || !body["files"].is_array() ||
      !body.contains("components") || !body["components"].is_array()) {
    return field_error(where,
                       "missing or ill-typed field (step, world_size, time, files, "
                       "components)");
  }
  if (c.world_size < 1 || c.world_size > (1 << 20)) {
    return field_error(where, "world_size " + std::to_string(c.world_size) + " out of range");
  }
  for (const json& s : body["components"]) {
    if (!s.is_string()) return field_error(where, "component name is not a string");
    c.components.push_back(s.get<std::string>());
  }
  for (const json& f : body["files"]) {
    CommitFile cf;
    if (!f.is_object() || !get_str(f, "name", &cf.name) || !get_u64(f, "bytes", &cf.bytes) ||
        !get_hash(f, "xxh3", &cf.xxh3)) {
      return field_error(where, "ill-typed file entry");
    }
    if (f.contains("regions_xxh3")) {  // optional: records before it have none
      uint64_t h = 0;
      if (!get_hash(f, "regions_xxh3", &h)) return field_error(where, "ill-typed file entry");
      cf.regions_xxh3 = h;
    }
    if (cf.name.empty() || cf.name.find('/') != std::string::npos || cf.name[0] == '.') {
      return field_error(where, "file name \"" + cf.name + "\" is not a plain file name");
    }
    c.files.push_back(std::move(cf));
  }
  return c;
}

Status check_step(int64_t step) {
  if (step >= 0 && step <= kMaxStep) return Status::ok();
  return invalid_argument("step " + std::to_string(step) +
                          " is out of range: a checkpoint's step is in [0, " +
                          std::to_string(kMaxStep) + "] (its directory name holds 12 digits)");
}

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%012lld", static_cast<long long>(step));
  return buf;
}

bool parse_step_dir_name(const std::string& name, int64_t* step) {
  if (name.size() != 17 || name.compare(0, 5, "step-") != 0) return false;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + (name[i] - '0');
  }
  *step = v;
  return true;
}

std::string rank_file_name(int64_t rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank-%05lld.h5", static_cast<long long>(rank));
  return buf;
}

std::string rank_manifest_name(int64_t rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "rank-%05lld.manifest.json", static_cast<long long>(rank));
  return buf;
}

}  // namespace ckpt
