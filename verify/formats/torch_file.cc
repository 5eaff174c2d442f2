#include "verify/formats/torch_file.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <set>
#include <unordered_set>

#include "verify/formats/detect.h"
#include "verify/scan/risk.h"

namespace ckpt::verify {
namespace {

// The legacy stream starts with pickle PROTO 2, LONG1 10 bytes = 0x1950a86a20f9469cfc6c.
const unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                      0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

constexpr uint64_t kMaxPickleBytes = 1ull << 30;
constexpr size_t kInspectBudget = 200000;

void collect_storages(const Value* root, std::map<std::string, TensorRecord>* out) {
  std::vector<const Value*> stack{root};
  std::unordered_set<const Value*> seen;
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v == nullptr || !seen.insert(v).second) continue;
    if ((v->kind == Kind::kTensor || v->kind == Kind::kStorage) &&
        !v->tensor->storage_key.empty()) {
      out->emplace(v->tensor->storage_key, *v->tensor);
    }
    for (const Value* x : v->items) stack.push_back(x);
    for (const auto& [k, x] : v->entries) stack.push_back(x);
    stack.push_back(v->args);
    stack.push_back(v->state);
  }
}

}  // namespace

ProgressBar::ProgressBar(bool enabled, uint64_t total, std::string what)
    : enabled_(enabled && ::isatty(2) != 0 && total > 0), total_(total), what_(std::move(what)) {}

ProgressBar::~ProgressBar() {
  if (enabled_) std::cerr << "\r\033[K" << std::flush;
}

void ProgressBar::advance(uint64_t n) {
  if (!enabled_) return;
  done_ += n;
  int pct = static_cast<int>(done_ * 100 / total_);
  if (pct == last_percent_) return;
  last_percent_ = pct;
  int bars = pct / 4;
  std::cerr << "\r" << what_ << " [" << std::string(bars, '#') << std::string(25 - bars, ' ')
            << "] " << pct << "% " << (done_ >> 20) << "/" << (total_ >> 20) << " MiB"
            << std::flush;
}

std::string sniff_torch(const std::string& head) {
  if (head.size() >= 4 && head.compare(0, 4, "PK\x03\x04", 4) == 0) return "zip";
  if (head.size() >= sizeof kLegacyMagic &&
      std::memcmp(head.data(), kLegacyMagic, sizeof kLegacyMagic) == 0) {
    return "legacy";
  }
  if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0) return "legacy-tar";
  return "";
}

Result<TorchFile> open_torch_file(std::unique_ptr<RandomAccessFile> file) {
  const std::string fn = file->path();
  CKPT_ASSIGN_OR_RETURN(std::string head,
                        file->read_string(0, std::min<uint64_t>(file->size(), 512)));
  std::string kind = sniff_torch(head);
  if (kind == "legacy") {
    TorchFile tf;
    tf.file = std::move(file);
    CKPT_RETURN_IF_ERROR(read_legacy_pickles(&tf));
    collect_storages(tf.doc->root, &tf.storages);
    CKPT_RETURN_IF_ERROR(locate_legacy_records(&tf));
    return tf;
  }
  if (kind == "legacy-tar") {
    return unsupported(fn +
                       ": legacy tar-format torch.save file (PyTorch < 0.4): not audited; "
                       "re-save it with a current PyTorch");
  }
  if (kind != "zip") {
    return corrupt(fn + ": not a torch.save file (no zip signature, no legacy pickle magic)");
  }
  TorchFile tf;
  tf.file = std::move(file);
  CKPT_ASSIGN_OR_RETURN(ZipReader z, ZipReader::open(*tf.file));
  tf.zip = std::make_unique<ZipReader>(std::move(z));
  tf.prefix = tf.zip->prefix();
  if (tf.prefix.empty())
    return corrupt(fn + ": zip archive has no top-level folder (not a torch.save file)");
  for (const auto& e : tf.zip->entries()) {
    if (e.name.compare(0, tf.prefix.size() + 1, tf.prefix + "/") != 0) {
      return corrupt(fn + ": zip entry \"" + e.name + "\" is outside the archive folder \"" +
                     tf.prefix + "/\"");
    }
  }
  if (tf.zip->find(tf.prefix + "/constants.pkl") != nullptr) {
    return unsupported(fn +
                       ": TorchScript archive (torch.jit.save: code + weights for inference), "
                       "not a training checkpoint: no optimizer, scheduler, RNG or loader state");
  }
  const ZipEntry* pkl = tf.zip->find(tf.prefix + "/data.pkl");
  if (pkl == nullptr)
    return corrupt(fn + ": zip archive has no " + tf.prefix + "/data.pkl (not a torch.save file)");
  if (pkl->size > kMaxPickleBytes) {
    return corrupt(fn + ": data.pkl is " + std::to_string(pkl->size) + " bytes (limit 1 GiB)");
  }
  CKPT_ASSIGN_OR_RETURN(std::string bytes, tf.zip->read_record(*pkl));
  CKPT_ASSIGN_OR_RETURN(tf.doc, read_pickle(bytes, fn + ":" + pkl->name));
  collect_storages(tf.doc->root, &tf.storages);
  for (const auto& [key, t] : tf.storages) {
    const ZipEntry* rec = tf.zip->find(tf.prefix + "/data/" + key);
    if (rec == nullptr) {
      return corrupt(fn + ": storage \"" + key + "\" referenced by data.pkl has no record " +
                     tf.prefix + "/data/" + key);
    }
    if (t.location != "meta" && rec->size < t.storage_nbytes) {
      return corrupt(fn + ": record " + rec->name + " has " + std::to_string(rec->size) +
                     " bytes, the pickle needs " + std::to_string(t.storage_nbytes));
    }
  }
  return tf;
}

std::optional<std::string> TorchFile::read_bytes(const TensorRecord& t, uint64_t max_bytes) const {
  const int64_t numel = t.numel();
  if (numel < 0 || t.element_size == 0 || t.storage_key.empty() || t.storage_offset < 0) {
    return std::nullopt;
  }
  const uint64_t len = static_cast<uint64_t>(numel) * t.element_size;
  if (len > max_bytes) return std::nullopt;
  const uint64_t byte = static_cast<uint64_t>(t.storage_offset) * t.element_size;
  Result<uint64_t> off = uint64_t{0};
  if (zip == nullptr) {
    auto it = legacy_records.find(t.storage_key);
    if (it == legacy_records.end() || !range_inside(byte, len, it->second.second))
      return std::nullopt;
    off = it->second.first;
  } else {
    const ZipEntry* rec = zip->find(prefix + "/data/" + t.storage_key);
    if (rec == nullptr || rec->method != 0) return std::nullopt;
    off = zip->data_offset(*rec);
    if (!off.is_ok() || !range_inside(byte, len, rec->size)) return std::nullopt;
  }
  std::string out(len, '\0');
  if (len > 0 && !file->read_at(*off + byte, out.data(), len).is_ok()) return std::nullopt;
  return out;
}

std::optional<double> TorchFile::read_scalar(const TensorRecord& t) const {
  if (t.numel() != 1 || t.element_size == 0 || t.element_size > 8 || t.storage_key.empty())
    return std::nullopt;
  uint64_t byte = static_cast<uint64_t>(t.storage_offset) * t.element_size;
  Result<uint64_t> off = uint64_t{0};
  if (zip == nullptr) {  // legacy stream
    auto it = legacy_records.find(t.storage_key);
    if (it == legacy_records.end() || !range_inside(byte, t.element_size, it->second.second))
      return std::nullopt;
    off = it->second.first;
  } else {
    const ZipEntry* rec = zip->find(prefix + "/data/" + t.storage_key);
    if (rec == nullptr || rec->method != 0) return std::nullopt;
    off = zip->data_offset(*rec);
    if (!off.is_ok() || !range_inside(byte, t.element_size, rec->size)) return std::nullopt;
  }
  unsigned char b[8] = {0};
  if (!file->read_at(*off + byte, b, t.element_size).is_ok()) return std::nullopt;
  const std::optional<DType> dtype = t.dtype.known();
  if (!dtype || dtype_size(*dtype) != t.element_size) return std::nullopt;
  return dtype_element(*dtype, b);
}

std::shared_ptr<const std::string> TorchFile::read_elements(const TensorRecord& t,
                                                            uint64_t cap) const {
  int64_t expect = 1;  // row-major strides
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && (d >= t.stride.size() || t.stride[d] != expect)) return nullptr;
    expect *= t.shape[d];
  }
  auto bytes = read_bytes(t, cap);
  if (!bytes) return nullptr;
  return std::make_shared<const std::string>(std::move(*bytes));
}

void add_global_findings(const PickleDoc& doc, const std::string& label, CheckpointView* view) {
  std::set<std::string> said;
  for (const GlobalUse& u : doc.uses) {
    const std::string q = u.module + "." + u.name;
    const Risk risk = classify_use(u);
    if ((risk != Risk::kDangerous && risk != Risk::kUnknown) || !said.insert(q).second) continue;
    if (risk == Risk::kDangerous) {
      view->findings.push_back({Severity::kError, std::nullopt,
                                label + ": the pickle " + (u.called ? "calls " : "names ") + q +
                                    " (never executed here): torch.load(weights_only=False) "
                                    "would run it — treat the file as hostile (ckpt scan)",
                                false});
    } else {
      view->findings.push_back({Severity::kWarning, std::nullopt,
                                label + ": the pickle names " + q +
                                    ", outside the lists of training libraries (kept opaque, "
                                    "not constructed); loading it needs that code",
                                false});
    }
  }
}

void add_torch_file_to_view(const TorchFile& tf, const std::string& label, CheckpointView* view,
                            const ReadOptions& options) {
  DetectContext ctx{label, [&tf](const TensorRecord& t) { return tf.read_scalar(t); }, nullptr};
  if (options.tensor_values) {
    ctx.values = [&tf](const TensorRecord& t) { return tf.read_elements(t, uint64_t{1} << 32); };
  }
  detect_components(*tf.doc->root, ctx, view);
  add_global_findings(*tf.doc, label, view);
  if (options.inspect) {
    size_t budget = kInspectBudget;
    InspectNode n = inspect_value(*tf.doc->root, label, &budget);
    n.kind = "file";
    n.summary = (tf.zip == nullptr ? "legacy torch.save stream, " +
                                         std::to_string(tf.legacy_keys.size()) + " storages"
                                   : "torch.save zip, prefix \"" + tf.prefix + "/\", " +
                                         std::to_string(tf.zip->entries().size()) + " records") +
                ", pickle protocol " + std::to_string(tf.doc->protocol) + "; root " + n.summary;
    view->contents.children.push_back(std::move(n));
  }
}

Result<RecordScan> scan_zip_record(const TorchFile& tf, const ZipEntry& e, const AnyDType& dtype,
                                   ProgressBar* bar) {
  RecordScan out;
  if (e.method != 0) {
    CKPT_RETURN_IF_ERROR(tf.zip->stream_record(e, [&out](const char* p, size_t n) {
      out.crc = crc32_update(out.crc, p, n);
      return Status::ok();
    }));
    if (bar != nullptr) bar->advance(e.compressed_size);
    out.all_zero = false;  // not looked at
  } else {
    constexpr size_t kChunk = 4u << 20;
    std::string buf;
    CKPT_ASSIGN_OR_RETURN(uint64_t off, tf.zip->data_offset(e));
    for (uint64_t done = 0; done < e.size;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, e.size - done));
      buf.resize(n);
      CKPT_RETURN_IF_ERROR(tf.file->read_at(off + done, buf.data(), n));
      out.crc = crc32_update(out.crc, buf.data(), n);
      const unsigned char* p = reinterpret_cast<const unsigned char*>(buf.data());
      for (size_t k = 0; k < n && out.all_zero; ++k) out.all_zero = p[k] == 0;
      if (dtype.known()) out.nonfinite += count_nonfinite(*dtype.known(), p, n);
      done += n;
      if (bar != nullptr) bar->advance(n);
    }
  }
  out.crc_ok = e.crc32 == 0 || out.crc == e.crc32;
  if (!out.crc_ok) {
    char msg[64];
    std::snprintf(msg, sizeof msg, "(central directory 0x%08x, computed 0x%08x)", e.crc32, out.crc);
    out.crc_message = msg;
  }
  return out;
}

AnyDType record_dtype(const TorchFile& tf, const ZipEntry& e) {
  const std::string data_prefix = tf.prefix + "/data/";
  if (e.name.compare(0, data_prefix.size(), data_prefix) != 0) return AnyDType();
  auto it = tf.storages.find(e.name.substr(data_prefix.size()));
  return it != tf.storages.end() ? it->second.dtype : AnyDType();
}

Status deep_scan_torch(const TorchFile& tf, const std::string& label, CheckpointView* view,
                       const ReadOptions& options) {
  // Which component each storage feeds, for the findings.
  std::map<std::string, std::pair<AuditComponent, std::string>> owner;  // key → (component, tensor)
  for (const auto& t : view->model.tensors) {
    if (t.file == label) owner.emplace(t.record, std::make_pair(AuditComponent::kModel, t.name));
  }
  for (const auto& ps : view->optimizer.state) {
    for (const auto& [n, t] : ps.tensors) {
      if (t.file == label)
        owner.emplace(t.record, std::make_pair(AuditComponent::kOptimizer, t.name));
    }
  }
  if (tf.zip == nullptr) return Status::ok();  // legacy: no per-record CRC to check
  bool stepped = false;
  for (const auto& ps : view->optimizer.state) stepped = stepped || (ps.step && *ps.step > 0);
  uint64_t total = 0;
  for (const auto& e : tf.zip->entries()) total += e.compressed_size;
  ProgressBar bar(options.progress, total, "ckpt audit --deep " + label);
  for (const auto& e : tf.zip->entries()) {
    const std::string data_prefix = tf.prefix + "/data/";
    const bool is_storage = e.name.compare(0, data_prefix.size(), data_prefix) == 0;
    const std::string key = is_storage ? e.name.substr(data_prefix.size()) : "";
    CKPT_ASSIGN_OR_RETURN(RecordScan scan, scan_zip_record(tf, e, record_dtype(tf, e), &bar));
    auto own = owner.find(key);
    std::optional<AuditComponent> comp;
    if (own != owner.end()) comp = own->second.first;
    std::string tname = own != owner.end() ? " (" + own->second.second + ")" : "";
    if (!scan.crc_ok) {
      view->findings.push_back({Severity::kError, comp,
                                label + ": record " + e.name + tname + " fails its CRC-32 " +
                                    scan.crc_message + ": the bytes changed after writing",
                                comp.has_value()});
    }
    if (scan.nonfinite > 0 && comp) {
      view->findings.push_back(
          {Severity::kError, comp,
           label + ": " + std::to_string(scan.nonfinite) + " NaN/Inf values in " + e.name + tname,
           true});
    }
    if (comp == AuditComponent::kOptimizer && e.method == 0 && scan.all_zero && stepped &&
        e.size > 0) {
      view->optimizer.zero_moments.insert(own->second.second);
    }
  }
  return Status::ok();
}

}  // namespace ckpt::verify
