// The FormatReader for torch.distributed.checkpoint folders (.metadata + __R_N.distcp).
//
// `.metadata` is a plain pickle (protocol 4) of dataclasses, read by our unpickler: every
// state_dict entry with its size, dtype and chunks, and where each chunk lives. The reader proves
// that the chunks of each tensor tile it (store::check_tensor_tiling: no gap, no overlap, inside
// its shape) and that every entry's byte range is inside an existing .distcp file; what a missing
// or short file takes with it is named entry by entry (dcp_loss.h). Then it rebuilds the nested
// state dict (planner_data gives each flat key's path) with tensor records and the small non-tensor
// values (torch.save blobs inside the .distcp files), so the same structural detection as for
// torch.save files finds the components. With ReadOptions::tensor_values (ckpt diff --deep) every
// model tensor's chunks are assembled into its values (tensor_bytes.h).
#include "verify/formats/dcp.h"

#include <dirent.h>

#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "ckpt/store/box_tiling.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/dcp_loss.h"
#include "verify/formats/detect.h"
#include "verify/formats/safetensors.h"
#include "verify/formats/tensor_bytes.h"
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
  // torch 2.x TensorProperties pickles its __getstate__ tuple: (dtype, layout, requires_grad,
  // memory_format, pin_memory, ...).
  if (dt == nullptr && props != nullptr && props->kind == Kind::kObject &&
      props->state != nullptr && props->state->kind == Kind::kTuple &&
      props->state->items.size() >= 5)
    dt = props->state->items[0];
  if (dt != nullptr && dt->kind == Kind::kGlobal) {
    std::string n = dt->name;
    if (n == "float") return "float32";
    if (n == "double") return "float64";
    if (n == "half") return "float16";
    if (n == "long") return "int64";
    if (n == "int") return "int32";
    return n;
  }
  return "";
}

// Where a chunk's bytes live: (fqn, chunk offsets) → (file, offset, length).
struct Loc {
  std::string file;
  int64_t offset = 0, length = 0;
  bool raw = false;          // the elements themselves (safetensors format), not a torch.save blob
  bool transformed = false;  // written through storage extensions (transform_descriptors)
};
using StorageIndex = std::map<std::pair<std::string, std::vector<int64_t>>, Loc>;

StorageIndex index_storage(const Value* storage) {
  StorageIndex where;
  if (storage == nullptr || storage->kind != Kind::kDict) return where;
  for (const auto& [k, v] : storage->entries) {
    const Value* fqn = field(k, "fqn");
    if (fqn == nullptr || fqn->kind != Kind::kStr) continue;
    Loc l;
    if (const Value* rp = field(v, "relative_path"); rp != nullptr && rp->kind == Kind::kStr)
      l.file = rp->s;
    if (const Value* o = field(v, "offset")) l.offset = o->as_int().value_or(-1);
    if (const Value* n = field(v, "length")) l.length = n->as_int().value_or(-1);
    if (const Value* td = field(v, "transform_descriptors"))
      l.transformed = !td->items.empty() || td->kind == Kind::kStr;
    where[{fqn->s, ints(field(k, "offset"))}] = l;
  }
  return where;
}

// One DCP folder being read: the metadata, the storage index, and the nested state dict rebuilt
// from the flat keys. The steps of DcpReader::read, in order: load_metadata, then per
// state_dict entry tensor_leaf or blob_leaf and place, then finish.
class DcpFolder {
 public:
  DcpFolder(Env* env, const std::string& path, const DcpLayout& layout, CheckpointView* view)
      : env_(env), path_(path), mpath_(path + "/.metadata"), layout_(layout), view_(*view) {
    root_ = synth_.make(Kind::kDict);
    mine_.insert(root_);
  }

  // Reads and unpickles .metadata; the state_dict_metadata dict, or Corrupt.
  Result<const Value*> load_metadata() {
    CKPT_ASSIGN_OR_RETURN(auto mf, env_->open_random(mpath_));
    if (mf->size() > kMaxMetadataBytes) return corrupt(mpath_ + ": larger than 512 MiB");
    CKPT_ASSIGN_OR_RETURN(std::string bytes, mf->read_string(0, mf->size()));
    CKPT_ASSIGN_OR_RETURN(doc_, read_pickle(bytes, mpath_));
    bytes_read_ += mf->bytes_read();
    add_global_findings(*doc_, ".metadata", &view_);
    const Value* md = doc_->root;
    const Value* sdm = field(md, "state_dict_metadata");
    if (sdm == nullptr || sdm->kind != Kind::kDict) {
      return corrupt(mpath_ + ": not DCP metadata (no state_dict_metadata dict in " +
                     summarize(*md) + ")");
    }
    where_ = index_storage(field(md, "storage_data"));
    planner_ = field(md, "planner_data");
    return sdm;
  }

  // A tensor entry: a tensor record whose chunks must tile its shape, each chunk's bytes inside
  // an existing .distcp file (findings otherwise; a chunk whose bytes are not there is lost).
  Value* tensor_leaf(const std::string& fqn, const Value* meta) {
    Value* leaf = synth_.make(Kind::kTensor);
    TensorRecord& t = *leaf->tensor;
    t.dtype = AnyDType::from_name(dtype_of(meta));
    t.element_size = torch_dtype_size(t.dtype);
    t.shape = ints(field(meta, "size"));
    t.storage_key = fqn;
    dtypes_[fqn] = t.dtype;
    __int128 volume = 0;
    bool tileable = t.shape.size() <= static_cast<size_t>(store::kMaxBoxDims);
    for (int64_t d : t.shape) tileable = tileable && d >= 0;
    std::vector<store::Extent> extents;
    std::vector<std::string> files;
    const Value* chunks = field(meta, "chunks");
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
        error(".metadata: a chunk of \"" + fqn + "\" lies outside its shape");
        continue;
      }
      volume += cv;
      std::string file;
      const bool there = check_chunk_bytes(fqn, off, &file) && chunk_content(fqn, off, sz, t);
      if (!there && tileable && cv > 0) {  // an empty chunk (an empty FSDP shard) loses nothing
        lost_.push_back({fqn, file, true, store::make_extent(off, sz), t.shape, leaf});
      }
      record_chunk(fqn, off, sz);
      if (tileable) {
        extents.push_back(store::make_extent(off, sz));
        files.push_back(file);
      }
    }
    if (!tileable) {  // more dimensions than a box has: the element count is all we check
      if (volume != t.numel())
        error(".metadata: the chunks of \"" + fqn + "\" do not tile its shape");
      return leaf;
    }
    store::TilingReport report;
    store::check_tensor_tiling(fqn, t.shape, extents, &report, 8, [&](size_t i) {
      return "chunk " + std::to_string(i) + " " + store::extent_string(extents[i]) +
             (files[i].empty() ? std::string() : " in " + files[i]);
    });
    for (const store::TilingFinding& f : report.findings) error(".metadata: " + f.message);
    if (report.left_off > 0) {
      error(".metadata: tensor \"" + fqn + "\": " + std::to_string(report.left_off) +
            " more tiling problems");
    }
    ++tiling_tensors_;
    tiling_chunks_ += extents.size();
    tiling_ok_ = tiling_ok_ && report.ok();
    return leaf;
  }

  // A non-tensor entry: the torch.save blob inside a .distcp file, unpickled (never executed);
  // None when it cannot be read.
  // A bytes entry whose bytes are not there, or do not parse, is lost (a None leaf).
  Value* blob_leaf(const std::string& fqn) {
    Value* none = synth_.make(Kind::kNone);
    auto loc = where_.find({fqn, {}});
    if (loc == where_.end()) {
      error(".metadata: bytes entry \"" + fqn + "\" has no storage entry");
      lost_.push_back({fqn, "", false, {}, {}, none});
      return none;
    }
    const Loc& l = loc->second;
    if (!bytes_present(l)) {
      lost_.push_back({fqn, l.file, false, {}, {}, none});
      return none;
    }
    if (static_cast<uint64_t>(l.length) > kMaxBytesItem) return none;  // not read, not lost
    if (Value* v = read_blob(fqn, l)) return v;
    damaged_.emplace(l.file, "holding bytes entries that do not parse");
    lost_.push_back({fqn, l.file, false, {}, {}, none});
    return none;
  }

  // Puts `leaf` at its original nested path (planner_data) or at the dotted fqn.
  Status place(const std::string& fqn, Value* leaf) {
    std::vector<std::string> parts;
    const Value* pp = planner_ != nullptr ? planner_->get(fqn) : nullptr;
    if (layout_.path_of) parts = layout_.path_of(fqn);
    if (!parts.empty()) {
      // the framework's own layout
    } else if (pp != nullptr && (pp->kind == Kind::kTuple || pp->kind == Kind::kList)) {
      for (const Value* x : pp->items)
        parts.push_back(x->kind == Kind::kStr ? x->s : std::to_string(x->i));
    } else {
      std::stringstream ss(fqn);
      for (std::string s; std::getline(ss, s, '.');) parts.push_back(s);
    }
    if (parts.size() > static_cast<size_t>(kMaxPathParts)) {
      return corrupt(mpath_ + ": state_dict key \"" + fqn.substr(0, 80) + "\" nests deeper than " +
                     std::to_string(kMaxPathParts) + " levels");
    }
    Value* cur = root_;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const Value* next = cur->get(parts[i]);
      if (next == nullptr || next->kind != Kind::kDict) {
        Value* key = synth_.make(Kind::kStr);
        key->s = parts[i];
        Value* d = synth_.make(Kind::kDict);
        mine_.insert(d);
        cur->entries.emplace_back(key, d);
        next = d;
      }
      cur = const_cast<Value*>(next);
    }
    Value* key = synth_.make(Kind::kStr);
    key->s = parts.empty() ? fqn : parts.back();
    cur->entries.emplace_back(key, leaf);
    return Status::ok();
  }

  // Detection over the rebuilt state dict, and the inspect tree.
  void finish(const ReadOptions& options) {
    if (layout_.common != nullptr) merge(root_, *layout_.common, 0);
    unflatten_optimizer();
    lists_from_int_keys(mine_, root_, "", 0);
    decode_pickled_bytes(root_, 0);
    DetectContext ctx{"dcp", [this](const TensorRecord& t) { return read_scalar(t); }};
    if (options.tensor_values) ctx.values = [this](const TensorRecord& t) { return values(t); };
    detect_components(*root_, ctx, &view_);
    if (layout_.after_detect) layout_.after_detect(*root_, &view_);
    report_dcp_loss(lost_, damaged_, *root_, &view_);
    if (options.deep) deep_scan(options);
    report_unnamed_files();
    if (transformed_ > 0) {
      view_.findings.push_back({Severity::kWarning, std::nullopt,
                                std::to_string(transformed_) +
                                    " tensor chunk(s) were written through DCP storage extensions "
                                    "(transform_descriptors in .metadata, e.g. compression): ckpt "
                                    "does not read them, so their bytes are not checked",
                                false});
    }
    if (tiling_ok_ && tiling_tensors_ > 0) {
      view_.findings.push_back({Severity::kInfo, std::nullopt,
                                ".metadata: the chunks of every tensor tile it exactly (" +
                                    std::to_string(tiling_tensors_) + " tensors, " +
                                    std::to_string(tiling_chunks_) +
                                    " chunks: no gap, no overlap, inside the shape)",
                                false});
    }
    view_.devices_known = false;  // DCP records no devices
    if (options.inspect) {
      size_t budget = 200000;
      InspectNode n = inspect_value(*root_, ".metadata", &budget);
      n.kind = "file";
      view_.contents.children.push_back(std::move(n));
    }
    view_.bytes_read = bytes_read_;
  }

 private:
  Value* str(const std::string& text) {
    Value* v = synth_.make(Kind::kStr);
    v->s = text;
    return v;
  }
  Value* dict() {
    Value* d = synth_.make(Kind::kDict);
    mine_.insert(d);
    return d;
  }
  static Value* entry(Value* d, const std::string& key) {
    for (auto& [k, v] : d->entries) {
      if (k->kind == Kind::kStr && k->s == key) return const_cast<Value*>(v);
    }
    return nullptr;
  }

  // Adds `from`'s entries to `into` (a dict this reader made): dicts merge key by key (copied
  // into a new dict of ours when `into` holds none), other values are added where the key is new.
  void merge(Value* into, const Value& from, int depth) {
    if (from.kind != Kind::kDict || depth > kMaxPathParts) return;
    for (const auto& [k, v] : from.entries) {
      if (k->kind != Kind::kStr) continue;
      Value* mine = entry(into, k->s);
      if (mine == nullptr) {
        if (v->kind == Kind::kDict) {
          Value* d = dict();
          into->entries.emplace_back(str(k->s), d);
          merge(d, *v, depth + 1);
        } else {
          into->entries.emplace_back(str(k->s), v);
        }
      } else if (mine->kind == Kind::kDict && mine_.count(mine) != 0) {
        merge(mine, *v, depth + 1);
      }
    }
  }

  // torchtitan and OLMo-core save the optimizer flattened (flatten_optimizer_state_dict=True):
  // "state.<fqn>.<key>" and "param_groups.<fqn>.<hyperparameter>", either at the top level with
  // the model as top-level "<fqn>" tensors, or under the optimizer's own entry
  // ("optimizer.state.<fqn>.exp_avg", torchtitan's CheckpointManager states) next to the model
  // under "model.". Rebuilt into {"model": {...}, "optimizer": {"state": {fqn: {...}},
  // "param_groups": [...]}} so that detection sees the usual shapes; params with equal
  // hyperparameters share a group.
  void unflatten_optimizer() {
    if (unflatten_into(root_, true)) return;
    for (auto& e : root_->entries) {
      if (e.second->kind == Kind::kDict && mine_.count(e.second) != 0)
        unflatten_into(const_cast<Value*>(e.second), false);
    }
    gather_top_level_model();
  }

  // torchtitan's CheckpointManager also flattens the model into the top level of its states
  // (_flattened_model_states_sd: "layers.0.attention.wq.weight" beside "optimizer",
  // "lr_scheduler", "train_state", ...): top-level tensors with dotted keys, next to dicts,
  // become the model's. A state dict of tensors alone (a model saved by itself) stays as it is.
  void gather_top_level_model() {
    if (entry(root_, "model") != nullptr) return;
    std::vector<std::pair<const Value*, const Value*>> model, rest;
    bool dicts = false;
    for (const auto& e : root_->entries) {
      if (e.second->kind == Kind::kTensor && e.first->kind == Kind::kStr &&
          e.first->s.find('.') != std::string::npos) {
        model.push_back(e);
      } else {
        rest.push_back(e);
        dicts = dicts || e.second->kind == Kind::kDict;
      }
    }
    if (model.empty() || !dicts) return;
    Value* m = dict();
    m->entries = std::move(model);
    rest.emplace(rest.begin(), str("model"), m);  // first, where detection looks first
    root_->entries = std::move(rest);
  }

  // Rebuilds the flat optimizer keys of `d`; at the top level the model's tensors move under
  // "model" and the optimizer under "optimizer", below it `d` becomes the optimizer's dict.
  bool unflatten_into(Value* d, bool top) {
    std::map<std::string, std::vector<std::pair<std::string, const Value*>>> state, groups;
    std::vector<std::pair<const Value*, const Value*>> rest, tensors;
    for (const auto& e : d->entries) {
      const std::string& k = e.first->s;
      const size_t last = k.rfind('.');
      auto flat = [&](const char* prefix, auto* into) {
        const size_t n = std::strlen(prefix);
        if (k.compare(0, n, prefix) != 0 || last == std::string::npos || last <= n) return false;
        (*into)[k.substr(n, last - n)].emplace_back(k.substr(last + 1), e.second);
        return true;
      };
      if (e.first->kind == Kind::kStr && (flat("state.", &state) || flat("param_groups.", &groups)))
        continue;
      (top && e.second->kind == Kind::kTensor ? tensors : rest).push_back(e);
    }
    if (state.empty() || groups.empty()) return false;
    Value* opt = dict();
    Value* st = dict();
    for (const auto& [fqn, keys] : state) {
      Value* ps = dict();
      for (const auto& [k, v] : keys) ps->entries.emplace_back(str(k), v);
      st->entries.emplace_back(str(fqn), ps);
    }
    std::map<std::string, Value*> by_hyper;  // summary of a group's hyperparameters → group
    Value* list = synth_.make(Kind::kList);
    for (const auto& [fqn, keys] : groups) {
      std::string sig;
      for (const auto& [k, v] : keys) sig += k + "=" + summarize(*v) + ";";
      Value*& g = by_hyper[sig];
      if (g == nullptr) {
        g = dict();
        for (const auto& [k, v] : keys) g->entries.emplace_back(str(k), v);
        g->entries.emplace_back(str("params"), synth_.make(Kind::kList));
        list->items.push_back(g);
      }
      Value* params = entry(g, "params");
      params->items.push_back(str(fqn));
    }
    opt->entries.emplace_back(str("state"), st);
    opt->entries.emplace_back(str("param_groups"), list);
    d->entries = rest;
    if (!top) {
      d->entries.insert(d->entries.end(), opt->entries.begin(), opt->entries.end());
      return true;
    }
    if (!tensors.empty()) {
      Value* model = dict();
      model->entries = tensors;
      d->entries.emplace_back(str("model"), model);
    }
    d->entries.emplace_back(str("optimizer"), opt);
    return true;
  }

  // torchtitan keeps its dataloader as {"dp_rank_N": pickle.dumps(state)}: bytes that are a
  // pickle are read by the same non-executing reader and take their place.
  void decode_pickled_bytes(Value* d, int depth) {
    if (d->kind != Kind::kDict || mine_.count(d) == 0 || depth > kMaxPathParts) return;
    for (auto& [k, v] : d->entries) {
      if (v->kind == Kind::kDict) decode_pickled_bytes(const_cast<Value*>(v), depth + 1);
      if (v->kind != Kind::kBytes || v->s.size() < 2 || static_cast<uint8_t>(v->s[0]) != 0x80)
        continue;
      const std::string label = ".metadata:" + (k->kind == Kind::kStr ? k->s : std::string("?"));
      auto doc = read_pickle(v->s, label);
      if (!doc.is_ok() || (*doc)->root == nullptr) continue;
      add_global_findings(**doc, label, &view_);
      v = (*doc)->root;
      inner_.push_back(std::move(*doc));
    }
  }

  // The value of a one-element tensor (an optimizer step, train_state.step): its chunk's bytes,
  // raw or a torch.save of the tensor, as DCP's writer chose.
  std::optional<double> read_scalar(const TensorRecord& t) {
    if (t.numel() != 1) return std::nullopt;
    const std::pair<std::string, std::vector<int64_t>> chunk{
        t.storage_key, std::vector<int64_t>(t.shape.size(), 0)};
    auto loc = where_.find(chunk);
    if (loc == where_.end() || loc->second.length <= 0 || loc->second.length > 4096 ||
        loc->second.transformed || bad_chunks_.count(chunk) != 0 || !bytes_there(loc->second))
      return std::nullopt;  // no value rather than one read from bytes that are not its own
    RandomAccessFile* f = open_file(loc->second.file);
    if (f == nullptr) return std::nullopt;
    auto bytes = read_some(f, loc->second.offset, loc->second.length);
    if (!bytes) return std::nullopt;
    if (!loc->second.raw && bytes->compare(0, 2, "PK") == 0) {
      auto tf = open_torch_file(memory_file(loc->second.file + ":" + t.storage_key, *bytes));
      if (!tf.is_ok() || tf->doc->root == nullptr || tf->doc->root->kind != Kind::kTensor)
        return std::nullopt;
      return tf->read_scalar(*tf->doc->root->tensor);
    }
    return raw_scalar(t.dtype, *bytes);
  }

  // diff --deep: a model tensor's elements, its chunks assembled by read_dcp_tensor (bounds
  // checked, nothing executed); null for a dtype ckpt has no name for or a tensor over 4 GiB. A
  // damaged chunk becomes the read's error (values_error), naming the folder and the file.
  std::shared_ptr<const std::string> values(const TensorRecord& t) {
    if (!values_error_.is_ok()) return nullptr;
    const auto dt = t.dtype.known();
    if (!dt || t.numel() < 0 ||
        static_cast<__int128>(t.numel()) * dtype_size(*dt) > (__int128{1} << 32))
      return nullptr;
    auto x = read_dcp_tensor(env_, path_, chunks_, t);
    if (!x.is_ok()) {
      if (x.status().code() != Code::kUnsupported)
        values_error_ = Status(x.status().code(), path_ + "/" + x.status().message());
      return nullptr;
    }
    bytes_read_ += x->nbytes;
    return std::make_shared<const std::string>(static_cast<const char*>(x->data), x->nbytes);
  }

  static std::optional<double> raw_scalar(const AnyDType& dtype, const std::string& b) {
    if (!dtype.known() || b.size() < dtype_size(*dtype.known())) return std::nullopt;
    return dtype_element(*dtype.known(), b.data());
  }

 public:
  // The rebuilt nested state dict and where each tensor chunk lives (open_dcp_tree).
  const Value* root() const { return root_; }
  std::map<std::string, std::vector<DcpChunk>> take_chunks() { return std::move(chunks_); }
  // What reading the tensors' values met (ReadOptions::tensor_values); ok otherwise.
  const Status& values_error() const { return values_error_; }

 private:
  void record_chunk(const std::string& fqn, const std::vector<int64_t>& off,
                    const std::vector<int64_t>& sz) {
    auto loc = where_.find({fqn, off});
    if (loc == where_.end()) return;
    const Loc& l = loc->second;
    chunks_[fqn].push_back({off, sz, l.file, l.offset, l.length, l.raw, l.transformed});
  }

  void error(const std::string& message) {
    view_.findings.push_back({Severity::kError, std::nullopt, message, false});
  }

  std::optional<uint64_t> file_size(const std::string& rel) {
    if (rel.empty() || rel.find("..") != std::string::npos || rel[0] == '/') return std::nullopt;
    auto it = file_sizes_.find(rel);
    if (it != file_sizes_.end()) return it->second;
    auto size = env_->file_size(path_ + "/" + rel);
    if (!size.is_ok()) return std::nullopt;
    return file_sizes_[rel] = *size;
  }

  // Whether the chunk of `fqn` at `off` has its bytes; `file` is set to where they live.
  bool check_chunk_bytes(const std::string& fqn, const std::vector<int64_t>& off,
                         std::string* file) {
    auto loc = where_.find({fqn, off});
    if (loc == where_.end()) {
      error(".metadata: chunk of \"" + fqn + "\" has no storage entry");
      return false;
    }
    *file = loc->second.file;
    return bytes_present(loc->second);
  }

  // Whether the byte range of `l` lies inside an existing file (no record of it when not).
  bool bytes_there(const Loc& l) {
    auto fs = file_size(l.file);
    return l.offset >= 0 && l.length >= 0 && fs && range_inside(l.offset, l.length, *fs);
  }

  // Whether the byte range of `l` lies inside its file; when not, the file is recorded as
  // missing, truncated or unusable (its first such range).
  bool bytes_present(const Loc& l) {
    if (l.offset < 0 || l.length < 0) {
      damaged_.emplace(l.file, "given a negative byte range in .metadata");
      return false;
    }
    auto fs = file_size(l.file);
    if (!fs) {
      const bool bad_name =
          l.file.empty() || l.file.find("..") != std::string::npos || l.file[0] == '/';
      damaged_.emplace(l.file, bad_name ? "not a file name inside the folder" : "missing");
      return false;
    }
    if (range_inside(l.offset, l.length, *fs)) return true;
    const int64_t end = l.length > std::numeric_limits<int64_t>::max() - l.offset
                            ? std::numeric_limits<int64_t>::max()
                            : l.offset + l.length;
    auto& need = needed_end_[l.file];
    need = std::max(need, end);
    damaged_[l.file] = "truncated: " + std::to_string(*fs) +
                       " bytes, .metadata places data up to byte " + std::to_string(need);
    return false;
  }

  RandomAccessFile* open_file(const std::string& rel) {
    auto it = open_.find(rel);
    if (it != open_.end()) return it->second.get();
    auto f = env_->open_random(path_ + "/" + rel);
    if (!f.is_ok()) return nullptr;
    return (open_[rel] = std::move(*f)).get();
  }

  std::optional<std::string> read_some(RandomAccessFile* f, int64_t offset, int64_t n) {
    auto bytes = f->read_string(static_cast<uint64_t>(offset), static_cast<size_t>(n));
    if (!bytes.is_ok()) return std::nullopt;
    bytes_read_ += static_cast<uint64_t>(n);
    return std::move(*bytes);
  }

  // The safetensors blob whose 8-byte header length starts at `offset` of `rel` and which runs
  // to the file's end (FileSystemWriter(serialization_format=SAFETENSORS) writes it last, after
  // the bytes entries); null, with the reason in *why, when there is none. Parsed once per file
  // and offset.
  const SafetensorsHeader* safetensors_at(const std::string& rel, RandomAccessFile* f,
                                          int64_t offset, std::string* why) {
    auto& slot = safetensors_[{rel, offset}];
    if (!slot.first && slot.second.empty()) {
      slot.second = "no safetensors header";
      const std::string where = rel + " (safetensors data at byte " + std::to_string(offset) + ")";
      auto json = read_safetensors_header_text(*f, static_cast<uint64_t>(offset), where);
      if (json.is_ok()) bytes_read_ += 8 + json->size();
      if (json.is_ok() && json->size() >= 2 && (*json)[0] == '{') {
        auto h = parse_safetensors_header(*json, f->size() - static_cast<uint64_t>(offset), where);
        if (h.is_ok()) {
          slot.first = std::make_unique<SafetensorsHeader>(std::move(*h));
        } else {
          slot.second = h.status().message();
        }
      }
    }
    *why = slot.second;
    return slot.first.get();
  }

  // What DCP's writer puts where .metadata places a tensor chunk: a torch.save blob (a zip from
  // its local header to its end-of-directory record, exactly the chunk's length: torch.save
  // writes no zip comment), or, with FileSystemWriter(serialization_format=SAFETENSORS), a
  // safetensors blob at that offset which every chunk of the file shares, holding the chunk
  // under its key (the chunk's Loc then points at the raw elements). Anything else means the
  // file does not hold what .metadata says (the .metadata of another checkpoint, or damage): the
  // file is recorded as damaged and false returned. Chunks written through storage extensions
  // are not looked at (one finding counts them).
  bool chunk_content(const std::string& fqn, const std::vector<int64_t>& off,
                     const std::vector<int64_t>& sizes, const TensorRecord& t) {
    Loc& l = where_.find({fqn, off})->second;  // check_chunk_bytes found it
    if (l.transformed) {
      ++transformed_;
      return true;
    }
    RandomAccessFile* f = open_file(l.file);
    if (f == nullptr) return true;  // bytes_present saw the file; this check reads nothing
    auto differs = [&](const std::string& what) {
      damaged_.emplace(l.file, "holding other bytes than .metadata places there (" + what +
                                   " at byte " + std::to_string(l.offset) + " for \"" + fqn +
                                   "\"): the .metadata of another checkpoint, or damage");
      bad_chunks_.insert({fqn, off});
      return false;
    };
    auto head = read_some(f, l.offset, std::min<int64_t>(l.length, 4));
    if (!head) return differs("unreadable bytes");
    if (l.length >= 26 && head->compare(0, 4, "PK\x03\x04", 4) == 0) {
      auto tail = read_some(f, l.offset + l.length - 22, 4);
      if (tail && tail->compare(0, 4, "PK\x05\x06", 4) == 0) return true;
      return differs("a torch.save blob that does not end where .metadata says");
    }
    std::string why;
    const SafetensorsHeader* st = safetensors_at(l.file, f, l.offset, &why);
    if (st == nullptr) return differs("neither a torch.save blob nor safetensors data: " + why);
    __int128 numel = 1;
    for (int64_t n : sizes) numel *= n;
    for (const SafetensorsTensor& x : st->tensors) {
      if (x.name != fqn) continue;
      __int128 have = 1;
      for (int64_t n : x.shape) have *= n;
      if (x.dtype.name() != t.dtype.name() || have != numel ||
          static_cast<int64_t>(x.end - x.begin) != l.length)
        return differs("safetensors data whose \"" + fqn + "\" is " + x.dtype.name() + " of " +
                       std::to_string(x.end - x.begin) + " bytes");
      l.offset += static_cast<int64_t>(st->data_start + x.begin);
      l.raw = true;
      return true;
    }
    return differs("safetensors data without \"" + fqn + "\"");
  }

  // --deep: every chunk's bytes read. A torch.save blob's records are checked against their
  // CRC-32 (a safetensors-format chunk has none to check), the bytes entries' blobs too, and
  // the floating tensors of the model and optimizer are searched for NaN/Inf. A chunk whose bytes
  // changed names its tensor, elements and file, and makes its component inconsistent.
  void deep_scan(const ReadOptions& options) {
    std::map<std::string, AuditComponent> owner;  // flat key → the component detection gave it
    for (const TensorInfo& ti : view_.model.tensors)
      owner.emplace(ti.record, AuditComponent::kModel);
    std::vector<const OptimizerPart*> optimizers{&view_.optimizer};
    for (const OptimizerPart& o : view_.more_optimizers) optimizers.push_back(&o);
    for (const OptimizerPart* o : optimizers) {
      for (const auto& ps : o->state) {
        for (const auto& [n, ti] : ps.tensors) owner.emplace(ti.record, AuditComponent::kOptimizer);
      }
    }
    uint64_t total = 0;
    for (const auto& [fqn, chunks] : chunks_) {
      for (const DcpChunk& c : chunks)
        total += static_cast<uint64_t>(std::max<int64_t>(c.length, 0));
    }
    ProgressBar bar(options.progress, total, "ckpt audit --deep " + path_);
    for (const auto& [fqn, chunks] : chunks_) {
      auto own = owner.find(fqn);
      const std::optional<AuditComponent> comp =
          own != owner.end() ? std::optional(own->second) : dcp_component_named(fqn);
      const AnyDType dtype = dtypes_[fqn];
      for (const DcpChunk& c : chunks) {
        const std::string label = c.file + ": tensor \"" + fqn + "\" " +
                                  store::extent_string(store::make_extent(c.offsets, c.sizes));
        RandomAccessFile* f = open_file(c.file);
        if (c.transformed || c.length <= 0 || bad_chunks_.count({fqn, c.offsets}) != 0 ||
            !bytes_there({c.file, c.offset, c.length}) || f == nullptr)
          continue;  // not readable as it is, or already reported lost
        auto bytes = read_some(f, c.offset, c.length);
        bar.advance(static_cast<uint64_t>(c.length));
        if (!bytes) continue;
        uint64_t nonfinite = 0;
        if (c.raw) {
          if (dtype.known())
            nonfinite = count_nonfinite(*dtype.known(), bytes->data(), bytes->size());
        } else {
          auto tf = open_torch_file(memory_file(label, std::move(*bytes)));
          if (!tf.is_ok()) {
            deep_error(comp, label + ": its torch.save blob does not open (" +
                                 tf.status().message() + ")");
            continue;
          }
          nonfinite = check_records(*tf, label, comp);
        }
        if (nonfinite > 0 && (comp == AuditComponent::kModel || comp == AuditComponent::kOptimizer))
          deep_error(comp, label + " holds " + std::to_string(nonfinite) + " NaN/Inf values");
      }
    }
    for (size_t i = 0; i < blobs_.size(); ++i)
      check_records(*blobs_[i], blob_labels_[i], dcp_component_named(blob_labels_[i]));
  }

  // The CRC-32 of every record of `tf` (a finding per bad record); the NaN/Inf values found.
  uint64_t check_records(const TorchFile& tf, const std::string& label,
                         std::optional<AuditComponent> comp) {
    if (tf.zip == nullptr) return 0;
    uint64_t nonfinite = 0;
    for (const ZipEntry& e : tf.zip->entries()) {
      auto scan = scan_zip_record(tf, e, record_dtype(tf, e), nullptr);
      if (!scan.is_ok()) {
        deep_error(comp, label + ": record " + e.name + " does not read (" +
                             scan.status().message() + ")");
        continue;
      }
      if (!scan->crc_ok) {
        deep_error(comp, label + ": record " + e.name + " fails its CRC-32 " + scan->crc_message +
                             ": the bytes changed after writing");
      }
      nonfinite += scan->nonfinite;
    }
    return nonfinite;
  }

  void deep_error(std::optional<AuditComponent> comp, const std::string& message) {
    view_.findings.push_back({Severity::kError, comp, message, comp.has_value()});
  }

  // .distcp files in the folder that .metadata never names: a leftover of an earlier save at
  // a larger world size, most often. Harmless to a load; said once, as information.
  void report_unnamed_files() {
    std::set<std::string> named;
    for (const auto& [key, l] : where_) named.insert(l.file);
    std::vector<std::string> extra;
    for (const std::string& n : env_->list_dir_or_empty(path_)) {
      if (n.size() > 7 && n.compare(n.size() - 7, 7, ".distcp") == 0 && named.count(n) == 0)
        extra.push_back(n);
    }
    if (extra.empty()) return;
    std::sort(extra.begin(), extra.end());
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 8; ++i) list += (i == 0 ? "" : ", ") + extra[i];
    if (extra.size() > 8) list += " and " + std::to_string(extra.size() - 8) + " more";
    view_.findings.push_back({Severity::kInfo, std::nullopt,
                              std::to_string(extra.size()) +
                                  " .distcp file(s) that .metadata does not name (a leftover of "
                                  "an earlier save? nothing loads them): " +
                                  list,
                              false});
  }

  Value* read_blob(const std::string& fqn, const Loc& loc) {
    RandomAccessFile* f = open_file(loc.file);
    if (f == nullptr) return nullptr;
    auto blob = read_some(f, loc.offset, loc.length);
    if (!blob) return nullptr;
    auto tf = open_torch_file(memory_file(loc.file + ":" + fqn, std::move(*blob)));
    if (!tf.is_ok() || tf->doc->root == nullptr) return nullptr;
    blobs_.push_back(std::make_unique<TorchFile>(std::move(*tf)));
    blob_labels_.push_back(loc.file + ": bytes entry \"" + fqn + "\"");
    add_global_findings(*blobs_.back()->doc, loc.file + ":" + fqn, &view_);
    return const_cast<Value*>(blobs_.back()->doc->root);
  }

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

  Env* const env_;
  const std::string path_, mpath_;
  const DcpLayout layout_;  // a copy: open_dcp_tree keeps the folder past the caller's layout
  CheckpointView& view_;
  std::unique_ptr<PickleDoc> doc_;
  StorageIndex where_;
  const Value* planner_ = nullptr;
  std::map<std::string, uint64_t> file_sizes_;
  std::map<std::string, std::unique_ptr<RandomAccessFile>> open_;  // each .distcp, opened once
  // (file, offset) → the safetensors blob there, or why there is none
  std::map<std::pair<std::string, int64_t>,
           std::pair<std::unique_ptr<SafetensorsHeader>, std::string>>
      safetensors_;
  std::set<std::pair<std::string, std::vector<int64_t>>> bad_chunks_;  // bytes not as described
  std::map<std::string, AnyDType> dtypes_;                             // tensor key → dtype
  uint64_t transformed_ = 0;  // chunks written through storage extensions
  PickleDoc synth_;           // the rebuilt nested state dict
  Value* root_ = nullptr;
  std::set<const Value*> mine_;
  std::vector<std::unique_ptr<TorchFile>> blobs_;
  std::vector<std::string> blob_labels_;           // "FILE: bytes entry \"KEY\"", one per blob
  std::vector<std::unique_ptr<PickleDoc>> inner_;  // pickles found inside bytes values
  std::map<std::string, std::vector<DcpChunk>> chunks_;
  std::vector<DcpLostEntry> lost_;             // entries whose bytes are not there
  DcpDamagedFiles damaged_;                    // .distcp file → what is wrong with it
  std::map<std::string, int64_t> needed_end_;  // truncated file → the last byte .metadata needs
  uint64_t tiling_tensors_ = 0, tiling_chunks_ = 0;
  bool tiling_ok_ = true;
  Status values_error_;
  uint64_t bytes_read_ = 0;
};

// Every state_dict entry of the folder into `folder` (read_dcp_folder and open_dcp_tree).
Status read_entries(const Value* sdm, DcpFolder* folder) {
  for (const auto& [k, v] : sdm->entries) {
    if (k->kind != Kind::kStr) continue;
    const bool tensor = v->qualname().find("TensorStorageMetadata") != std::string::npos;
    Value* leaf = tensor ? folder->tensor_leaf(k->s, v) : folder->blob_leaf(k->s);
    CKPT_RETURN_IF_ERROR(folder->place(k->s, leaf));
  }
  return Status::ok();
}

class DcpReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kDcp; }
  int probe(Env* env, const std::string& path) const override {
    return env->is_dir(path) && env->exists(path + "/.metadata") ? 90 : 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = CheckpointFormat::kDcp;
    view.contents.name = path;
    view.contents.kind = "dir";
    CKPT_RETURN_IF_ERROR(read_dcp_folder(env, path, options, DcpLayout{}, &view));
    return view;
  }
};

}  // namespace

Status read_dcp_folder(Env* env, const std::string& path, const ReadOptions& options,
                       const DcpLayout& layout, CheckpointView* view) {
  DcpFolder folder(env, path, layout, view);
  CKPT_ASSIGN_OR_RETURN(const Value* sdm, folder.load_metadata());
  CKPT_RETURN_IF_ERROR(read_entries(sdm, &folder));
  folder.finish(options);
  return folder.values_error();
}

std::unique_ptr<FormatReader> make_dcp_reader() { return std::make_unique<DcpReader>(); }

Result<DcpTree> open_dcp_tree(Env* env, const std::string& path) {
  struct Owner {
    CheckpointView view;
    std::unique_ptr<DcpFolder> folder;
  };
  auto owner = std::make_shared<Owner>();
  owner->folder = std::make_unique<DcpFolder>(env, path, DcpLayout{}, &owner->view);
  CKPT_ASSIGN_OR_RETURN(const Value* sdm, owner->folder->load_metadata());
  CKPT_RETURN_IF_ERROR(read_entries(sdm, owner->folder.get()));
  ReadOptions quiet;
  quiet.inspect = false;
  owner->folder->finish(quiet);
  DcpTree tree;
  tree.root = owner->folder->root();
  tree.chunks = owner->folder->take_chunks();
  for (const ReaderFinding& f : owner->view.findings) {
    if (f.severity == Severity::kError) tree.errors.push_back(f.message);
  }
  tree.owner = owner;
  return tree;
}

}  // namespace ckpt::verify
