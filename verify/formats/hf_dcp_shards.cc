// Step 1 of hf_dcp_shards.h: the folder's safetensors headers into chunks and global tensors.
#include "verify/formats/hf_dcp_shards.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace ckpt::verify::hf_shards {
namespace {

constexpr const char* kShardingKey = "DCP_SHARDING_INFO";

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

bool literal(const std::string& s, size_t* i, const std::string& lit) {
  if (s.compare(*i, lit.size(), lit) != 0) return false;
  *i += lit.size();
  return true;
}

// A number as torch's writer spells it: str(i).zfill(5), so at least 5 digits; 1 or more.
bool number(const std::string& s, size_t* i, int64_t* out) {
  size_t j = *i;
  int64_t v = 0;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) != 0) {
    if (v > 100'000'000'000) return false;
    v = v * 10 + (s[j++] - '0');
  }
  if (j - *i < 5 || v < 1) return false;
  *i = j;
  *out = v;
  return true;
}

// The header of a file whose data is cut short or runs on: parsed as if the file ended where the
// header says its data does, so the lost chunks can be named. nullopt when the header itself is
// damaged.
std::optional<SafetensorsHeader> header_of_damaged(const RandomAccessFile& file) {
  auto text = read_safetensors_header_text(file, 0, file.path());
  if (!text.is_ok()) return std::nullopt;
  const uint64_t n = text->size();
  const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  uint64_t end = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__" || !it.value().is_object()) continue;
    const auto o = it.value().find("data_offsets");
    if (o != it.value().end() && o->is_array() && o->size() == 2 && (*o)[1].is_number_unsigned())
      end = std::max(end, (*o)[1].get<uint64_t>());
  }
  if (end > (uint64_t{1} << 62)) return std::nullopt;
  auto h = parse_safetensors_header(*text, 8 + n + end, file.path());
  if (!h.is_ok()) return std::nullopt;
  return std::move(*h);
}

// The offsets DCP_SHARDING_INFO gives `t`: {"saved_offsets": [...]} with one non-negative
// integer per dimension; nullopt otherwise.
std::optional<std::vector<int64_t>> saved_offsets(const nlohmann::json& info,
                                                  const SafetensorsTensor& t) {
  const auto e = info.find(t.name);
  if (e == info.end() || !e->is_object()) return std::nullopt;
  const auto o = e->find("saved_offsets");
  if (o == e->end() || !o->is_array() || o->size() != t.shape.size()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& x : *o) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > (uint64_t{1} << 62)) return std::nullopt;
    out.push_back(static_cast<int64_t>(x.get<uint64_t>()));
  }
  return out;
}

// The chunks of one file's header; `present` false when the file is damaged.
void add_chunks(ShardFolder* folder, size_t index, bool present) {
  ShardFile& f = folder->files[index];
  const SafetensorsHeader& h = *f.header;
  nlohmann::json info = nlohmann::json::object();
  const auto s = h.metadata.find(kShardingKey);
  f.sharding = s != h.metadata.end();
  if (!f.sharding) {
    add(folder, f.shard ? Severity::kWarning : Severity::kInfo,
        f.name + ": no " + kShardingKey +
            " in its __metadata__: its tensors are read as whole tensors at offset 0, as torch's "
            "HuggingFaceStorageReader reads them");
  } else {
    info = nlohmann::json::parse(s->second, nullptr, /*allow_exceptions=*/false);
    if (info.is_discarded() || !info.is_object()) {
      add(folder, Severity::kError,
          f.name + ": __metadata__ " + kShardingKey +
              " is not a JSON object: torch's reader fails on the folder, and the " +
              std::to_string(h.tensors.size()) + " chunk(s) the file holds cannot be placed");
      return;
    }
  }
  for (const SafetensorsTensor& t : h.tensors) {
    Chunk c;
    c.fqn = t.name;
    c.file = index;
    c.sizes = t.shape;
    c.dtype = t.dtype;
    c.element_size = t.element_size;
    c.begin = h.data_start + t.begin;
    c.length = t.end - t.begin;
    c.present = present;
    if (f.sharding) {
      auto off = saved_offsets(info, t);
      if (!off) {
        add(folder, Severity::kError,
            f.name + ": tensor \"" + t.name + "\" has no saved_offsets of " +
                std::to_string(t.shape.size()) + " non-negative integers in " + kShardingKey +
                ": torch's reader fails on it, and the chunk cannot be placed");
        continue;
      }
      c.offsets = std::move(*off);
    } else {
      c.offsets.assign(t.shape.size(), 0);
    }
    bool fits = true;  // offset + size stays an int64 (a hostile header's 2^63 dimension)
    for (size_t d = 0; d < c.sizes.size(); ++d)
      fits = fits && c.sizes[d] >= 0 && c.sizes[d] <= (int64_t{1} << 62) - c.offsets[d];
    if (!fits) {
      add(folder, Severity::kError,
          f.name + ": tensor \"" + t.name + "\" does not fit an index (offset + size >= 2^62)");
      continue;
    }
    folder->chunks.push_back(std::move(c));
  }
}

// Opens and parses one file; damage is recorded in `f`, I/O failures are returned.
Status read_file(Env* env, const std::string& path, ShardFile* f) {
  auto file = env->open_random(path);
  if (!file.is_ok()) {
    if (file.status().code() != Code::kCorrupt) return file.status();
    f->damage = "not a regular file";
    return Status::ok();
  }
  auto h = parse_safetensors(**file);
  if (h.is_ok()) {
    f->header = std::move(*h);
  } else {
    if (h.status().code() != Code::kCorrupt) return h.status();
    std::string why = h.status().message();
    if (why.compare(0, path.size() + 2, path + ": ") == 0) why = why.substr(path.size() + 2);
    f->damage = why;
    f->header = header_of_damaged(**file);
  }
  f->bytes_read = (*file)->bytes_read();
  return Status::ok();
}

void build_tensors(ShardFolder* folder) {
  for (size_t i = 0; i < folder->chunks.size(); ++i) {
    const Chunk& c = folder->chunks[i];
    auto [it, fresh] = folder->tensors.try_emplace(c.fqn);
    GlobalTensor& t = it->second;
    t.chunks.push_back(i);
    if (fresh) {
      t.dtype = c.dtype;
      t.element_size = c.element_size;
      t.shape.assign(c.sizes.size(), 0);
    }
    if (c.sizes.size() != t.shape.size()) {
      t.ranks_agree = false;
      continue;
    }
    for (size_t d = 0; d < t.shape.size(); ++d)
      t.shape[d] = std::max(t.shape[d], c.offsets[d] + c.sizes[d]);
  }
}

}  // namespace

void add(ShardFolder* folder, Severity severity, const std::string& message) {
  folder->findings.push_back(
      {severity, AuditComponent::kModel, message, severity == Severity::kError});
}

std::optional<ShardName> parse_shard_name(const std::string& name) {
  ShardName s;
  size_t i = 0;
  if (!literal(name, &i, "shard-") || !number(name, &i, &s.rank) || !literal(name, &i, "-model-") ||
      !number(name, &i, &s.k) || !literal(name, &i, "-of-") || !number(name, &i, &s.n) ||
      name.substr(i) != ".safetensors" || s.k > s.n) {
    return std::nullopt;
  }
  return s;
}

Result<ShardFolder> read_shard_folder(Env* env, const std::string& dir) {
  ShardFolder folder;
  CKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->list_dir(dir));
  for (const std::string& name : names) {
    const std::string p = path_join(dir, name);
    if (!ends_with(name, ".safetensors") || env->is_dir(p)) continue;
    ShardFile f;
    f.name = name;
    f.shard = parse_shard_name(name);
    CKPT_RETURN_IF_ERROR(read_file(env, p, &f));
    folder.files.push_back(std::move(f));
    const size_t index = folder.files.size() - 1;
    const ShardFile& added = folder.files.back();
    if (!added.damage.empty()) {
      std::string lost = "its tensors are lost";
      if (added.header)
        lost = "the " + std::to_string(added.header->tensors.size()) +
               " chunk(s) its header lists are lost";
      add(&folder, Severity::kError, name + " is damaged (" + added.damage + "): " + lost);
    }
    if (added.header) add_chunks(&folder, index, added.damage.empty());
  }
  build_tensors(&folder);
  return folder;
}

}  // namespace ckpt::verify::hf_shards
