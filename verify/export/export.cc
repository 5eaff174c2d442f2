// ckpt export --to safetensors (export.h). The steps, in order: find the checkpoint
// (open_checkpoint), list the tensors and where their bytes are (from the INDEX for version 2,
// from rank 0's manifest otherwise: collect_tensors), check that every file they need is there
// and whole (check_files: a missing or short rank file names what it loses), split them into
// files (plan_files), then write each file's header and tensors under a temporary name
// (write_safetensors: each tensor assembled and its hashes checked before its bytes are
// written), and rename them all once every one is complete (publish).
#include "verify/export/export.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/torch_layout.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/box_tiling.h"
#include "ckpt/store/global_tensor.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace ckpt::verify {
namespace {

constexpr const char* kIndexFile = "INDEX";
constexpr uint64_t kMaxIndexBytes = 4ull << 30;

using Piece = store::TensorPiece;

struct ExportTensor {
  std::string source;  // "/model/0.weight", as stored
  std::string name;    // "0.weight", as written
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<Piece> pieces;
  uint64_t nbytes = 0;
};

struct Failed {
  Status status;
  ExportFailure kind = ExportFailure::kNone;
};

Status fail(Failed* f, ExportFailure kind, Status s) {
  f->kind = kind;
  f->status = s;
  return s;
}

// The safetensors name of a dtype, or null for the ones it cannot hold.
const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::kBool:
      return "BOOL";
    case DType::kUInt8:
      return "U8";
    case DType::kInt8:
      return "I8";
    case DType::kInt16:
      return "I16";
    case DType::kInt32:
      return "I32";
    case DType::kInt64:
      return "I64";
    case DType::kUInt16:
      return "U16";
    case DType::kUInt32:
      return "U32";
    case DType::kUInt64:
      return "U64";
    case DType::kFloat16:
      return "F16";
    case DType::kBFloat16:
      return "BF16";
    case DType::kFloat32:
      return "F32";
    case DType::kFloat64:
      return "F64";
    case DType::kFloat8E5M2:
      return "F8_E5M2";
    case DType::kFloat8E4M3FN:
      return "F8_E4M3";
    default:
      return nullptr;
  }
}

// "/model/a.b" → "a.b"; "/optimizer/state/0.weight/exp_avg" → "state.0.weight.exp_avg"; other
// paths are not exported (empty).
std::string model_name(const std::string& path) {
  const std::string p = "/model/";
  return path.compare(0, p.size(), p) == 0 ? path.substr(p.size()) : std::string();
}
std::string optimizer_name(const std::string& path) {
  const std::string p = "/optimizer/state/";
  if (path.compare(0, p.size(), p) != 0) return "";
  std::string s = "state." + path.substr(p.size());
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// The checkpoint `path` names: a step directory, or a run directory's newest committed one.
Result<std::string> open_checkpoint(Env* env, const std::string& path) {
  if (!env->exists(path)) return not_found(path + ": no such file or directory");
  if (env->exists(path_join(path, "COMMIT.json"))) return path;
  if (!env->is_dir(path)) {
    return corrupt(path +
                   ": expected a checkpoint directory (step-NNNNNNNNNNNN) or a run "
                   "directory");
  }
  auto latest = store::find_latest(env, path);
  if (!latest.is_ok()) {
    return corrupt(path +
                   ": not a ckpt checkpoint (no COMMIT.json, no committed "
                   "step-NNNNNNNNNNNN directory)");
  }
  return latest->dir;
}

const CommitFile* listed(const CommitRecord& rec, const std::string& name) {
  for (const CommitFile& f : rec.files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

class Exporter {
 public:
  Exporter(Env* env, const ExportOptions& o, ExportReport* r, Failed* f)
      : env_(env), o_(o), r_(*r), f_(*f) {}

  Status run() {
    auto dir = open_checkpoint(env_, o_.path);
    if (!dir.is_ok()) return fail(&f_, ExportFailure::kInput, dir.status());
    step_dir_ = r_.step_dir = *dir;
    reader_.emplace(env_, step_dir_);
    auto rec = store::read_commit(env_, step_dir_);
    if (!rec.is_ok()) return fail(&f_, ExportFailure::kInput, rec.status());
    rec_ = std::move(*rec);
    CKPT_RETURN_IF_ERROR(collect_tensors());
    CKPT_RETURN_IF_ERROR(check_files());
    std::vector<ExportTensor*> model, optimizer;
    for (ExportTensor& t : tensors_) {
      (model_name(t.source).empty() ? optimizer : model).push_back(&t);
    }
    if (model.empty()) {
      return fail(&f_, ExportFailure::kInput,
                  corrupt(step_dir_ + ": the checkpoint holds no /model tensor to export"));
    }
    if (o_.with_optimizer && optimizer.empty()) {
      return fail(&f_, ExportFailure::kInput,
                  corrupt(step_dir_ + ": --with-optimizer, but the checkpoint holds no "
                                      "/optimizer/state tensor"));
    }
    Status made = env_->make_dirs(o_.out_dir);
    if (!made.is_ok()) return fail(&f_, ExportFailure::kOutput, made);
    Status s = write_set("model", model);
    if (s.is_ok() && o_.with_optimizer) s = write_set("optimizer", optimizer);
    if (s.is_ok()) s = publish();
    if (!s.is_ok()) {
      for (const auto& [tmp, final] : pending_) (void)env_->remove_file(tmp);
      return s;
    }
    r_.files = std::move(written_);
    return Status::ok();
  }

 private:
  // 2. The tensors to export and where their bytes are.
  Status collect_tensors() {
    std::set<std::string> in_index;
    if (listed(rec_, kIndexFile) != nullptr) {
      r_.format_version = 2;
      CKPT_RETURN_IF_ERROR(read_index());
      for (size_t t = 0; t < index_.tensor_count(); ++t) {
        const std::string source(index_.tensor_name(t));
        in_index.insert(source);
        if (!wanted(source)) continue;
        const store::IndexTensor& it = index_.tensor(t);
        ExportTensor x = make_tensor(
            source, it.dtype, std::vector<int64_t>(it.shape.begin(), it.shape.begin() + it.ndim));
        x.pieces = store::index_pieces(index_, t);
        tensors_.push_back(std::move(x));
      }
    }
    auto m = store::read_manifest(env_, step_dir_, 0);
    if (!m.is_ok()) {
      const ExportFailure k =
          m.status().code() == Code::kNotFound ? ExportFailure::kDamaged : ExportFailure::kInput;
      return fail(&f_, k, m.status());
    }
    for (const ManifestEntry& e : m->tensors) {
      if (e.box || in_index.count(e.path) != 0 || !wanted(e.path)) continue;
      ExportTensor x = make_tensor(e.path, e.dtype, e.shape);
      std::vector<int64_t> zeros(e.shape.size(), 0);
      x.pieces.push_back({store::make_extent(zeros, e.shape), rank_file_name(0), e.offset, e.nbytes,
                          e.xxh3, "tensor", false});
      tensors_.push_back(std::move(x));
    }
    drop_wrapper_prefix();
    std::sort(tensors_.begin(), tensors_.end(),
              [](const ExportTensor& a, const ExportTensor& b) { return a.name < b.name; });
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const ExportTensor& t = tensors_[i];
      if (i > 0 && tensors_[i - 1].name == t.name) {
        return fail(&f_, ExportFailure::kInput,
                    corrupt(step_dir_ + ": \"" + tensors_[i - 1].source + "\" and \"" + t.source +
                            "\" both export as \"" + t.name + "\""));
      }
      if (safetensors_dtype(t.dtype) == nullptr) {
        return fail(&f_, ExportFailure::kInput,
                    unsupported(step_dir_ + ": tensor \"" + t.source + "\" is " +
                                dtype_name(t.dtype) + ", which safetensors cannot hold"));
      }
      if (t.shape.size() > static_cast<size_t>(store::kMaxBoxDims)) {
        return fail(&f_, ExportFailure::kInput,
                    unsupported(step_dir_ + ": tensor \"" + t.source + "\" has more than " +
                                std::to_string(store::kMaxBoxDims) + " dimensions"));
      }
    }
    return Status::ok();
  }

  // A model saved through torch.compile or DDP exports under the bare module's names
  // (module_wrapper_prefix, ckpt/format/torch_layout.h).
  void drop_wrapper_prefix() {
    std::vector<std::string> names;
    for (const ExportTensor& t : tensors_) {
      if (!model_name(t.source).empty()) names.push_back(t.name);
    }
    r_.dropped_prefix = module_wrapper_prefix(names);
    if (r_.dropped_prefix.empty()) return;
    for (ExportTensor& t : tensors_) {
      if (!model_name(t.source).empty()) t.name.erase(0, r_.dropped_prefix.size());
    }
  }

  bool wanted(const std::string& source) const {
    return !model_name(source).empty() || (o_.with_optimizer && !optimizer_name(source).empty());
  }

  static ExportTensor make_tensor(const std::string& source, DType dtype,
                                  std::vector<int64_t> shape) {
    ExportTensor x;
    x.source = source;
    x.name = model_name(source).empty() ? optimizer_name(source) : model_name(source);
    x.dtype = dtype;
    x.shape = std::move(shape);
    x.nbytes = numel(x.shape) * dtype_size(dtype);
    return x;
  }

  // The INDEX as COMMIT.json lists it, decoded and its tiling proven.
  Status read_index() {
    const std::string path = path_join(step_dir_, kIndexFile);
    const CommitFile* rec = listed(rec_, kIndexFile);
    auto f = env_->open_random(path);
    if (!f.is_ok()) {
      return fail(&f_, ExportFailure::kDamaged,
                  f.status().code() == Code::kNotFound
                      ? corrupt(path + ": missing (COMMIT.json lists it)")
                      : f.status());
    }
    if ((*f)->size() != rec->bytes || rec->bytes > kMaxIndexBytes) {
      return fail(&f_, ExportFailure::kDamaged,
                  corrupt(path + ": " + std::to_string((*f)->size()) + " bytes, COMMIT.json says " +
                          std::to_string(rec->bytes)));
    }
    auto bytes = (*f)->read_string(0, rec->bytes);
    if (!bytes.is_ok()) return fail(&f_, ExportFailure::kInput, bytes.status());
    const uint64_t h = xxh3_64(bytes->data(), bytes->size());
    if (h != rec->xxh3) {
      return fail(&f_, ExportFailure::kDamaged,
                  corrupt(path + ": xxh3 of the file is " + hex64(h) + ", COMMIT.json says " +
                          hex64(rec->xxh3)));
    }
    auto index = store::decode_index(*bytes, path);
    if (!index.is_ok()) return fail(&f_, ExportFailure::kDamaged, index.status());
    index_ = std::move(*index);
    Status tiled = store::tiling_status(store::check_index_tiling(index_), path);
    if (!tiled.is_ok()) return fail(&f_, ExportFailure::kDamaged, tiled);
    return Status::ok();
  }

  // 3. Every file a piece lives in is listed in COMMIT.json and has its listed size.
  Status check_files() {
    std::set<std::string> needed;
    for (const ExportTensor& t : tensors_) {
      for (const Piece& p : t.pieces) needed.insert(p.file);
    }
    std::vector<std::string> bad;
    std::string why;
    for (const std::string& name : needed) {
      const CommitFile* c = listed(rec_, name);
      auto size = env_->file_size(path_join(step_dir_, name));
      std::string w;
      if (c == nullptr)
        w = name + " is not listed in COMMIT.json";
      else if (!size.is_ok())
        w = name + " is missing";
      else if (*size != c->bytes)
        w = name + " has " + std::to_string(*size) + " bytes, COMMIT.json says " +
            std::to_string(c->bytes);
      if (w.empty()) continue;
      bad.push_back(name);
      why += (why.empty() ? "" : "; ") + w;
    }
    if (bad.empty()) return Status::ok();
    std::string msg = step_dir_ + ": " + why;
    if (r_.format_version == 2) {
      std::vector<std::string> known;
      for (const std::string& b : bad) {
        for (size_t i = 0; i < index_.file_count(); ++i) {
          if (index_.file_name(static_cast<uint32_t>(i)) == b) known.push_back(b);
        }
      }
      if (auto loss = store::account_loss(index_, known); loss.is_ok()) {
        for (const std::string& line : loss->lines()) msg += "; " + line;
      }
    }
    return fail(&f_, ExportFailure::kDamaged, corrupt(msg));
  }

  // 4. Splits `set` into files of at most max_shard_bytes (a larger tensor alone), then writes
  // them and, when there are several, the index.
  Status write_set(const std::string& stem, const std::vector<ExportTensor*>& set) {
    std::vector<std::vector<ExportTensor*>> files(1);
    uint64_t in_file = 0, total = 0;
    for (ExportTensor* t : set) {
      if (!files.back().empty() && in_file + t->nbytes > o_.max_shard_bytes) {
        files.emplace_back();
        in_file = 0;
      }
      files.back().push_back(t);
      in_file += t->nbytes;
      total += t->nbytes;
    }
    const size_t n = files.size();
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < n; ++i) {
      char name[96];
      if (n == 1) {
        std::snprintf(name, sizeof name, "%s.safetensors", stem.c_str());
      } else {
        std::snprintf(name, sizeof name, "%s-%05zu-of-%05zu.safetensors", stem.c_str(), i + 1, n);
      }
      CKPT_RETURN_IF_ERROR(write_safetensors(name, files[i]));
      for (ExportTensor* t : files[i]) weight_map[t->name] = name;
    }
    if (n == 1) return Status::ok();
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    return write_small(stem + ".safetensors.index.json", index.dump(2) + "\n");
  }

  // An object store has no rename, and every object appears whole when its upload completes: there
  // the files are written under their final names (removed again when the export fails).
  std::string tmp_name(const std::string& name) const {
    if (env_->object_store(o_.out_dir) != nullptr) return path_join(o_.out_dir, name);
    return path_join(o_.out_dir, "." + name + ".tmp-" + std::to_string(::getpid()));
  }

  Status write_safetensors(const std::string& name, const std::vector<ExportTensor*>& tensors) {
    nlohmann::json header = nlohmann::json::object();
    uint64_t at = 0;
    for (const ExportTensor* t : tensors) {
      header[t->name] = {{"dtype", safetensors_dtype(t->dtype)},
                         {"shape", t->shape},
                         {"data_offsets", {at, at + t->nbytes}}};
      at += t->nbytes;
    }
    header["__metadata__"] = {{"format", "pt"}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string head(8, '\0');
    for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
    head += text;
    const std::string tmp = tmp_name(name);
    auto out = env_->new_writable(tmp);
    if (!out.is_ok()) return fail(&f_, ExportFailure::kOutput, out.status());
    pending_.emplace_back(tmp, path_join(o_.out_dir, name));
    Status s = (*out)->append(head.data(), head.size());
    if (!s.is_ok()) return fail(&f_, ExportFailure::kOutput, s);
    for (const ExportTensor* t : tensors) {
      std::unique_ptr<char[]> data(new char[std::max<uint64_t>(t->nbytes, 1)]);
      CKPT_RETURN_IF_ERROR(assemble(*t, data.get()));
      s = (*out)->append(data.get(), t->nbytes);
      if (!s.is_ok()) return fail(&f_, ExportFailure::kOutput, s);
      ++r_.tensors;
      r_.tensor_bytes += t->nbytes;
    }
    s = (*out)->sync();
    if (s.is_ok()) s = (*out)->close();
    if (!s.is_ok()) return fail(&f_, ExportFailure::kOutput, s);
    written_.push_back({name, head.size() + at, tensors.size()});
    return Status::ok();
  }

  Status write_small(const std::string& name, const std::string& text) {
    const std::string tmp = tmp_name(name);
    auto out = env_->new_writable(tmp);
    if (!out.is_ok()) return fail(&f_, ExportFailure::kOutput, out.status());
    pending_.emplace_back(tmp, path_join(o_.out_dir, name));
    Status s = (*out)->append(text.data(), text.size());
    if (s.is_ok()) s = (*out)->sync();
    if (s.is_ok()) s = (*out)->close();
    if (!s.is_ok()) return fail(&f_, ExportFailure::kOutput, s);
    written_.push_back({name, text.size(), 0});
    return Status::ok();
  }

  // Fills `dst` (the whole tensor, row-major) from its pieces, each read whole and its XXH3
  // checked before it is copied into place.
  Status assemble(const ExportTensor& t, char* dst) {
    Status s = reader_->assemble(t.source, t.dtype, t.shape, t.pieces, dst);
    r_.boxes_checked = reader_->pieces_checked();
    return s.is_ok() ? s : fail(&f_, ExportFailure::kDamaged, s);
  }

  // 5. Every file under its final name, then the directory made durable.
  Status publish() {
    for (const auto& [tmp, final] : pending_) {
      if (tmp == final) continue;  // on an object store
      Status s = env_->rename(tmp, final);
      if (!s.is_ok()) return fail(&f_, ExportFailure::kOutput, s);
    }
    pending_.clear();
    Status s = env_->sync_dir(o_.out_dir);
    if (!s.is_ok()) return fail(&f_, ExportFailure::kOutput, s);
    return Status::ok();
  }

  Env* const env_;
  const ExportOptions& o_;
  ExportReport& r_;
  Failed& f_;
  std::string step_dir_;
  CommitRecord rec_;
  store::GlobalIndex index_;
  std::vector<ExportTensor> tensors_;
  std::optional<store::GlobalTensorReader> reader_;           // once step_dir_ is known
  std::vector<std::pair<std::string, std::string>> pending_;  // temporary → final
  std::vector<ExportedFile> written_;
};

}  // namespace

Status export_safetensors(Env* env, const ExportOptions& options, ExportReport* report,
                          ExportFailure* failure) {
  *report = ExportReport{};
  Failed f;
  if (options.max_shard_bytes == 0) {
    *failure = ExportFailure::kInput;
    return invalid_argument("max shard size must be at least 1 byte");
  }
  Exporter e(env, options, report, &f);
  Status s = e.run();
  *failure = s.is_ok() ? ExportFailure::kNone
                       : (f.kind == ExportFailure::kNone ? ExportFailure::kInput : f.kind);
  return s;
}

Result<uint64_t> parse_shard_size(const std::string& text) {
  struct Unit {
    const char* suffix;
    uint64_t factor;
  };
  static const Unit kUnits[] = {{"GIB", 1ull << 30},   {"MIB", 1ull << 20}, {"KIB", 1ull << 10},
                                {"GB", 1000000000ull}, {"MB", 1000000ull},  {"KB", 1000ull}};
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t factor = 1;
  bool bits = false;
  std::string digits = text;
  for (const Unit& u : kUnits) {
    const size_t n = std::strlen(u.suffix);
    if (upper.size() > n && upper.compare(upper.size() - n, n, u.suffix) == 0) {
      factor = u.factor;
      digits = text.substr(0, text.size() - n);
      bits = n == 2 && text.back() == 'b';
      break;
    }
  }
  auto bad = [&text] {
    return invalid_argument("max shard size \"" + text +
                            "\": expected a whole number of bytes or of KB, MB, GB, KiB, MiB, GiB "
                            "(e.g. 5GB)");
  };
  if (digits.empty() || digits.size() > 19) return bad();
  uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return bad();
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n == 0 || n > std::numeric_limits<uint64_t>::max() / factor) return bad();
  n *= factor;
  if (bits) n /= 8;
  if (n == 0) return bad();
  return n;
}

}  // namespace ckpt::verify
