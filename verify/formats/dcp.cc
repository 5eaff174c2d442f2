// The FormatReader for torch.distributed.checkpoint folders (.metadata + __R_N.distcp).
//
// `.metadata` is a plain pickle (protocol 4) of dataclasses, read by our unpickler: every
// state_dict entry with its size, dtype and chunks, and where each chunk lives. The reader checks
// that chunks tile each tensor and that every chunk's byte range is inside an existing .distcp
// file, then rebuilds the nested state dict (planner_data gives each flat key's path) with tensor
// records and the small non-tensor values (torch.save blobs inside the .distcp files), so the
// same structural detection as for torch.save files finds the components.
#include <dirent.h>
#include <sys/stat.h>

#include <map>
#include <set>
#include <sstream>

#include "verify/audit/detect.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

constexpr uint64_t kMaxMetadataBytes = 512ull << 20;
constexpr uint64_t kMaxBytesItem = 16ull << 20;
constexpr int kMaxPathParts = 64;

// A dataclass field: BUILD state is a dict, or (dict, slots) for slotted classes.
const Value* field(const Value* obj, const std::string& name) {
  if (obj == nullptr || obj->kind != Kind::kObject || obj->state == nullptr) return nullptr;
  const Value* s = obj->state;
  if (s->kind == Kind::kDict) return s->get(name);
  if (s->kind == Kind::kTuple && s->items.size() == 2) {
    if (const Value* v = s->items[0]->get(name)) return v;
    return s->items[1]->get(name);
  }
  return nullptr;
}

std::vector<int64_t> ints(const Value* v) {
  std::vector<int64_t> out;
  if (v == nullptr) return out;
  for (const Value* x : v->items) {
    if (auto i = x->as_int()) out.push_back(*i);
  }
  return out;
}

std::string dtype_of(const Value* tsm) {
  const Value* props = field(tsm, "properties");
  const Value* dt = field(props, "dtype");
  if (dt != nullptr && dt->kind == Kind::kGlobal) {
    std::string n = dt->name;
    if (n == "float") return "float32";
    if (n == "double") return "float64";
    if (n == "half") return "float16";
    if (n == "long") return "int64";
    return n;
  }
  return "";
}

class DcpReader : public FormatReader {
 public:
  std::string name() const override { return "dcp"; }
  int probe(const std::string& path) const override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    return ::stat((path + "/.metadata").c_str(), &st) == 0 ? 90 : 0;
  }

  Result<CheckpointView> read(const std::string& path, const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = "dcp";
    view.contents.name = path;
    view.contents.kind = "dir";
    const std::string mpath = path + "/.metadata";
    CKPT_ASSIGN_OR_RETURN(auto mf, Env::posix()->open_random(mpath));
    if (mf->size() > kMaxMetadataBytes) return corrupt(mpath + ": larger than 512 MiB");
    CKPT_ASSIGN_OR_RETURN(std::string bytes, mf->read_string(0, mf->size()));
    CKPT_ASSIGN_OR_RETURN(auto doc, read_pickle(bytes, mpath));
    uint64_t total_read = mf->bytes_read();
    add_global_findings(*doc, ".metadata", &view);
    const Value* md = doc->root;
    const Value* sdm = field(md, "state_dict_metadata");
    const Value* storage = field(md, "storage_data");
    const Value* planner = field(md, "planner_data");
    if (sdm == nullptr || sdm->kind != Kind::kDict) {
      return corrupt(mpath + ": not DCP metadata (no state_dict_metadata dict in " +
                     summarize(*md) + ")");
    }
    // (fqn, offsets) → (file, offset, length)
    struct Loc {
      std::string file;
      int64_t offset = 0, length = 0;
    };
    std::map<std::pair<std::string, std::vector<int64_t>>, Loc> where;
    if (storage != nullptr && storage->kind == Kind::kDict) {
      for (const auto& [k, v] : storage->entries) {
        const Value* fqn = field(k, "fqn");
        if (fqn == nullptr || fqn->kind != Kind::kStr) continue;
        Loc l;
        if (const Value* rp = field(v, "relative_path"); rp != nullptr && rp->kind == Kind::kStr)
          l.file = rp->s;
        if (const Value* o = field(v, "offset")) l.offset = o->as_int().value_or(-1);
        if (const Value* n = field(v, "length")) l.length = n->as_int().value_or(-1);
        where[{fqn->s, ints(field(k, "offset"))}] = l;
      }
    }
    std::map<std::string, uint64_t> file_sizes;
    auto file_size = [&](const std::string& rel) -> std::optional<uint64_t> {
      if (rel.empty() || rel.find("..") != std::string::npos || rel[0] == '/') return std::nullopt;
      auto it = file_sizes.find(rel);
      if (it != file_sizes.end()) return it->second;
      struct stat st;
      if (::stat((path + "/" + rel).c_str(), &st) != 0) return std::nullopt;
      return file_sizes[rel] = static_cast<uint64_t>(st.st_size);
    };
    PickleDoc synth;  // the rebuilt nested state dict
    Value* root = synth.make(Kind::kDict);
    std::set<const Value*> mine{root};
    std::vector<std::unique_ptr<TorchFile>> blobs;
    for (const auto& [k, v] : sdm->entries) {
      if (k->kind != Kind::kStr) continue;
      const std::string fqn = k->s;
      Value* leaf = nullptr;
      if (v->qualname().find("TensorStorageMetadata") != std::string::npos) {
        leaf = synth.make(Kind::kTensor);
        TensorRecord& t = *leaf->tensor;
        t.dtype = dtype_of(v);
        t.element_size = torch_dtype_size(t.dtype);
        t.shape = ints(field(v, "size"));
        t.storage_key = fqn;
        // Chunks must tile the tensor: volumes sum to its numel, each inside its bounds.
        __int128 volume = 0;
        const Value* chunks = field(v, "chunks");
        for (const Value* c : chunks != nullptr ? chunks->items : std::vector<const Value*>{}) {
          auto off = ints(field(c, "offsets"));
          auto sz = ints(field(c, "sizes"));
          __int128 cv = 1;
          bool inside = off.size() == t.shape.size() && sz.size() == t.shape.size();
          for (size_t d = 0; inside && d < sz.size(); ++d) {
            cv *= sz[d];
            inside = off[d] >= 0 && sz[d] >= 0 && off[d] + sz[d] <= t.shape[d];
          }
          if (!inside) {
            view.findings.push_back({"error", "",
                                     ".metadata: a chunk of \"" + fqn + "\" lies outside its shape",
                                     false});
            continue;
          }
          volume += cv;
          auto loc = where.find({fqn, off});
          if (loc == where.end()) {
            view.findings.push_back(
                {"error", "", ".metadata: chunk of \"" + fqn + "\" has no storage entry", false});
            continue;
          }
          auto fs = file_size(loc->second.file);
          if (!fs || loc->second.offset < 0 || loc->second.length < 0 ||
              !range_inside(loc->second.offset, loc->second.length, *fs)) {
            view.findings.push_back(
                {"error", "",
                 "\"" + fqn + "\": bytes [" + std::to_string(loc->second.offset) + ", +" +
                     std::to_string(loc->second.length) + ") of " + loc->second.file +
                     " are missing (file absent or too short)",
                 false});
          }
        }
        if (volume != t.numel()) {
          view.findings.push_back({"error", "",
                                   ".metadata: the chunks of \"" + fqn + "\" do not tile its shape",
                                   false});
        }
      } else {
        // A non-tensor value: a torch.save blob inside a .distcp file.
        auto loc = where.find({fqn, {}});
        if (loc != where.end()) {
          auto fs = file_size(loc->second.file);
          if (fs && loc->second.length >= 0 &&
              static_cast<uint64_t>(loc->second.length) <= kMaxBytesItem &&
              range_inside(loc->second.offset, loc->second.length, *fs)) {
            auto f = Env::posix()->open_random(path + "/" + loc->second.file);
            if (f.is_ok()) {
              auto blob = (*f)->read_string(loc->second.offset, loc->second.length);
              total_read += (*f)->bytes_read();
              if (blob.is_ok()) {
                auto tf =
                    open_torch_file(memory_file(loc->second.file + ":" + fqn, std::move(*blob)));
                if (tf.is_ok() && tf->doc->root != nullptr) {
                  blobs.push_back(std::make_unique<TorchFile>(std::move(*tf)));
                  add_global_findings(*blobs.back()->doc, loc->second.file + ":" + fqn, &view);
                  leaf = const_cast<Value*>(blobs.back()->doc->root);
                }
              }
            }
          }
        }
        if (leaf == nullptr) leaf = synth.make(Kind::kNone);
      }
      // Place the leaf at its original path (planner_data) or the dotted fqn.
      std::vector<std::string> parts;
      const Value* pp = planner != nullptr ? planner->get(fqn) : nullptr;
      if (pp != nullptr && (pp->kind == Kind::kTuple || pp->kind == Kind::kList)) {
        for (const Value* x : pp->items)
          parts.push_back(x->kind == Kind::kStr ? x->s : std::to_string(x->i));
      } else {
        std::stringstream ss(fqn);
        for (std::string s; std::getline(ss, s, '.');) parts.push_back(s);
      }
      if (parts.size() > static_cast<size_t>(kMaxPathParts)) {
        return corrupt(mpath + ": state_dict key \"" + fqn.substr(0, 80) + "\" nests deeper than " +
                       std::to_string(kMaxPathParts) + " levels");
      }
      Value* cur = root;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const Value* next = cur->get(parts[i]);
        if (next == nullptr || next->kind != Kind::kDict) {
          Value* key = synth.make(Kind::kStr);
          key->s = parts[i];
          Value* d = synth.make(Kind::kDict);
          mine.insert(d);
          cur->entries.emplace_back(key, d);
          next = d;
        }
        cur = const_cast<Value*>(next);
      }
      Value* key = synth.make(Kind::kStr);
      key->s = parts.empty() ? fqn : parts.back();
      cur->entries.emplace_back(key, leaf);
    }
    lists_from_int_keys(mine, root, "", 0);
    DetectContext ctx{"dcp", nullptr};
    detect_components(*root, ctx, &view);
    view.devices_known = false;  // DCP records no devices
    if (options.inspect) {
      size_t budget = 200000;
      InspectNode n = inspect_value(*root, ".metadata", &budget);
      n.kind = "file";
      view.contents.children.push_back(std::move(n));
    }
    view.bytes_read = total_read;
    return view;
  }

 private:
  // param_groups arrive as {"0": {...}, "1": {...}}: rebuild those lists (keys exactly 0..n-1).
  // Only dicts this reader made are touched (values from blobs belong to their own pickles).
  static void lists_from_int_keys(const std::set<const Value*>& mine, Value* d,
                                  const std::string& key, int depth) {
    if (d->kind != Kind::kDict || mine.count(d) == 0 || depth > kMaxPathParts) return;
    for (auto& [k, v] : d->entries) {
      lists_from_int_keys(mine, const_cast<Value*>(v), k->kind == Kind::kStr ? k->s : "",
                          depth + 1);
    }
    if (key != "param_groups" && key != "params") return;
    for (size_t i = 0; i < d->entries.size(); ++i) {
      if (d->entries[i].first->kind != Kind::kStr || d->entries[i].first->s != std::to_string(i))
        return;
    }
    for (auto& [k, v] : d->entries) d->items.push_back(v);
    d->entries.clear();
    d->kind = Kind::kList;
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_dcp_reader() { return std::make_unique<DcpReader>(); }

}  // namespace ckpt::verify
