#include "verify/scan/scan.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "verify/scan/scan_internal.h"

namespace ckpt::verify {
namespace scan_detail {
namespace {

void record_uses(const PickleDoc& doc, const std::string& where, FileContext* ctx) {
  for (const GlobalUse& u : doc.uses) {
    const std::string key = u.module + "\n" + u.name + "\n" + where;
    auto it = ctx->seen.find(key);
    const Risk risk = classify_use(u);
    if (it != ctx->seen.end()) {
      ScanGlobal& g = ctx->out->globals[it->second];
      g.called = g.called || u.called;
      if (static_cast<int>(risk) > static_cast<int>(g.risk)) g.risk = risk;
      continue;
    }
    if (ctx->out->globals.size() >= ctx->options.max_globals) {
      ctx->out->errors.push_back(where + ": more than " + std::to_string(ctx->options.max_globals) +
                                 " globals; the rest are not listed");
      return;
    }
    ctx->seen.emplace(key, ctx->out->globals.size());
    ctx->out->globals.push_back(
        ScanGlobal{u.module, u.name, risk, u.called, where + "@" + std::to_string(u.offset)});
  }
}

// Bytes values of a parsed pickle that hold a pickle or a zip of their own.
void scan_nested_values(const PickleDoc& doc, const std::string& where, int depth,
                        FileContext* ctx) {
  if (doc.root == nullptr || depth >= ctx->options.max_nesting) return;
  std::vector<const Value*> stack{doc.root};
  std::unordered_set<const Value*> seen;
  while (!stack.empty() && seen.size() < 2'000'000) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v == nullptr || !seen.insert(v).second) continue;
    if (v->kind == Kind::kBytes && v->s.size() >= 4) {
      scan_nested_bytes(v->s, where + ">nested", depth + 1, ctx);
    }
    for (const Value* x : v->items) stack.push_back(x);
    for (const auto& [k, x] : v->entries) stack.push_back(x);
    stack.push_back(v->args);
    stack.push_back(v->state);
  }
}

}  // namespace

uint64_t scan_pickles(const std::string& bytes, uint64_t offset, const std::string& where,
                      int max_pickles, int depth, FileContext* ctx, WeightsOnlyInput* keep) {
  PickleLimits limits;
  limits.lenient = true;
  int n = 0;
  while (offset < bytes.size() && (max_pickles == 0 || n < max_pickles)) {
    PickleScan s = scan_pickle(bytes, where, limits, offset);
    const std::string at = n == 0 ? where : where + "#" + std::to_string(n + 1);
    record_uses(*s.doc, at, ctx);
    if (!s.status.is_ok()) {
      // A later pickle that does not parse from its first byte is trailing data, not a pickle
      // (legacy files carry storage bytes); anything else is a damaged stream.
      // Inside another container, bytes that only look like a pickle and name nothing are data.
      const bool noise = depth > 0 && s.doc->uses.empty();
      if (!noise && (n == 0 || !s.doc->uses.empty() || max_pickles != 0)) {
        ctx->out->errors.push_back(s.status.message());
      }
      if (keep != nullptr) {
        keep->complete = false;
        keep->docs.push_back(std::move(s.doc));
      }
      return offset;
    }
    scan_nested_values(*s.doc, at, depth, ctx);
    offset = s.doc->end_offset;
    if (keep != nullptr) keep->docs.push_back(std::move(s.doc));
    ++n;
  }
  return offset;
}

void predict_weights_only(const WeightsOnlyInput& in, bool torch_file, FileContext* ctx) {
  FileScan& out = *ctx->out;
  out.torch_load_input = torch_file;
  std::set<std::string> needs;
  bool blocked = !in.complete || in.docs.empty();
  bool dangerous = false;
  for (const auto& doc : in.docs) {
    // The restricted unpickler stops at the first opcode it lacks: later globals are never seen.
    uint64_t stop_at = UINT64_MAX;
    if (doc->weights_only_bad_opcode != 0) {
      blocked = true;
      stop_at = doc->weights_only_bad_offset;
    }
    for (const GlobalUse& u : doc->uses) {
      if (u.offset >= stop_at) break;
      if (weights_only_allows(u.module, u.name)) continue;
      if (classify_use(u) == Risk::kDangerous) {
        dangerous = true;
      } else {
        // torch's unpickler reads Python 2 builtins under their Python 3 name (not numpy's).
        const std::string m = u.module == "__builtin__" ? "builtins"
                              : u.module == "copy_reg"  ? "copyreg"
                                                        : u.module;
        needs.insert(m + "." + u.name);
      }
    }
    for (const auto& [cls, at] : doc->numpy_dtype_builds) {
      if (at < stop_at) needs.insert("numpy.dtypes." + cls);
    }
    if (!torch_file || blocked) break;  // torch.load reads the first pickle, then gives up
  }
  out.weights_only_needs.assign(needs.begin(), needs.end());
  out.weights_only_loads = torch_file && !blocked && !dangerous && needs.empty();
}

}  // namespace scan_detail

using namespace scan_detail;

namespace {

bool looks_like_safetensors(const std::string& head, uint64_t size) {
  if (head.size() < 9 || size < 9) return false;
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= static_cast<uint64_t>(static_cast<uint8_t>(head[k])) << (8 * k);
  return n > 0 && n <= size - 8 && head[8] == '{';
}

bool has_suffix(const std::string& s, const char* suffix) {
  const std::string x = suffix;
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// Extensions under which a protocol 0/1 pickle (no PROTO opcode) is taken for one.
bool pickle_extension(const std::string& path) {
  for (const char* e : {".pkl", ".pickle", ".pt", ".pth", ".bin", ".ckpt", ".p", ".metadata",
                        ".joblib", ".dat", ".data"}) {
    if (has_suffix(path, e)) return true;
  }
  return false;
}

bool protocol0_start(char c) {
  return std::string("(c]}ISVNl)FLdtiK\x80").find(c) != std::string::npos;
}

}  // namespace

bool ScanReport::safe() const {
  for (const auto& f : files) {
    for (const auto& g : f.globals) {
      if (g.risk == Risk::kDangerous) return false;
    }
  }
  return true;
}

bool ScanReport::has_framework() const {
  for (const auto& f : files) {
    for (const auto& g : f.globals) {
      if (g.risk == Risk::kFramework) return true;
    }
  }
  return false;
}

Result<FileScan> scan_file(const RandomAccessFile& file, const std::string& label,
                           const ScanOptions& options) {
  FileScan out;
  out.file = label;
  FileContext ctx{&out, options, {}};
  const uint64_t size = file.size();
  CKPT_ASSIGN_OR_RETURN(std::string head, file.read_string(0, std::min<uint64_t>(size, 512)));
  const unsigned char b0 = head.empty() ? 0 : static_cast<unsigned char>(head[0]);
  if (has_suffix(file.path(), ".distcp")) {
    out.format = "dcp data";  // tensor bytes and torch.save blobs back to back
    scan_embedded_zips(file, label, &ctx);
  } else if (head.compare(0, 4, "PK\x03\x04", 4) == 0 || head.compare(0, 4, "PK\x05\x06", 4) == 0) {
    scan_zip(file, label, 0, &ctx);
  } else if (head.size() >= 14 && b0 == 0x80 &&
             head.compare(2, 12,
                          "\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20"
                          "\x6a\xa8\x50\x19",
                          12) == 0) {
    scan_legacy(file, label, &ctx);
  } else if (head.compare(0, 6, "\x93NUMPY", 6) == 0) {
    out.format = "numpy .npy";
    CKPT_ASSIGN_OR_RETURN(std::string first,
                          file.read_string(0, std::min<uint64_t>(size, 1 << 20)));
    if (!npy_holds_pickle(first)) return out;  // numeric: raw bytes after the header
    if (size > options.max_pickle_bytes) {
      return corrupt(file.path() + ": .npy of " + std::to_string(size) + " bytes is over the " +
                     std::to_string(options.max_pickle_bytes) + "-byte scan limit");
    }
    CKPT_ASSIGN_OR_RETURN(std::string bytes, file.read_string(0, size));
    out.format = "numpy .npy";
    scan_npy(bytes, label, 0, &ctx);
  } else if (looks_like_safetensors(head, size)) {
    out.format = "safetensors";  // a JSON header and raw bytes: nothing executable
  } else if ((b0 == 0x80 && head.size() > 1 && static_cast<uint8_t>(head[1]) <= 5) ||
             (pickle_extension(file.path()) && !head.empty() && protocol0_start(head[0]))) {
    if (size > options.max_pickle_bytes) {
      return corrupt(file.path() + ": pickle of " + std::to_string(size) +
                     " bytes is over the scan limit of " +
                     std::to_string(options.max_pickle_bytes));
    }
    CKPT_ASSIGN_OR_RETURN(std::string bytes, file.read_string(0, size));
    out.format = "pickle";
    WeightsOnlyInput wo;
    scan_pickles(bytes, 0, label, 0, 0, &ctx, &wo);
    predict_weights_only(wo, false, &ctx);
  } else {
    return unsupported(file.path() +
                       ": not a format ckpt scan reads (no pickle, torch.save zip, legacy "
                       "torch.save, numpy or safetensors signature)");
  }
  return out;
}

namespace {

// Every regular file under `dir` (relative names from the scanned folder in `rel`), links not
// followed, folders deeper than 32 levels not entered.
Status collect_files(Env* env, const std::string& root, const std::string& dir, int depth,
                     const ScanOptions& options, std::vector<std::string>* files) {
  auto names = env->list_dir(dir);
  if (!names.is_ok())
    return io_error(root + ": cannot list the folder: " + names.status().message());
  for (const std::string& n : *names) {
    const std::string p = path_join(dir, n);
    CKPT_ASSIGN_OR_RETURN(FileKind kind, env->entry_kind(p));
    if (kind == FileKind::kDirectory && depth <= 32) {
      CKPT_RETURN_IF_ERROR(collect_files(env, root, p, depth + 1, options, files));
    } else if (kind == FileKind::kRegular) {
      files->push_back(p);
      if (files->size() > options.max_files) {
        return corrupt(root + ": more than " + std::to_string(options.max_files) + " files");
      }
    }
  }
  return Status::ok();
}

}  // namespace

Result<ScanReport> scan_path(Env* env, const std::string& path, const ScanOptions& options) {
  namespace fs = std::filesystem;
  if (!env->exists(path)) return not_found(path + ": cannot open (no such file)");
  ScanReport r;
  r.path = path;
  if (!env->is_dir(path)) {
    CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path));
    CKPT_ASSIGN_OR_RETURN(FileScan fs1, scan_file(*f, fs::path(path).filename().string(), options));
    r.format = fs1.format;
    r.files.push_back(std::move(fs1));
    return r;
  }
  r.format = "folder";
  std::vector<std::string> files;
  CKPT_RETURN_IF_ERROR(collect_files(env, path, path, 0, options, &files));
  std::sort(files.begin(), files.end());
  for (const std::string& p : files) {
    const std::string label = fs::path(p).lexically_relative(path).string();
    auto f = env->open_random(p);
    if (!f.is_ok()) {
      FileScan bad;
      bad.file = label;
      bad.format = "unreadable";
      bad.errors.push_back(f.status().message());
      r.files.push_back(std::move(bad));
      continue;
    }
    auto s = scan_file(**f, label, options);
    if (s.is_ok()) {
      r.files.push_back(std::move(s).value());
    } else if (s.status().code() != Code::kUnsupported) {
      FileScan bad;
      bad.file = label;
      bad.format = "unreadable";
      bad.errors.push_back(s.status().message());
      r.files.push_back(std::move(bad));
    }
  }
  return r;
}

}  // namespace ckpt::verify
