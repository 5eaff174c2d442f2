// The FormatReader for a lone *.safetensors file (weights only: everything else is reported
// missing, with the reason), and the helper that folds safetensors shards into a view.
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "verify/formats/builtin_readers.h"
#include "verify/formats/safetensors.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

std::string basename_of(const std::string& path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

uint64_t count_nonfinite(const std::string& dtype, const unsigned char* p, size_t n) {
  uint64_t bad = 0;
  if (dtype == "float32") {
    for (size_t k = 0; k + 4 <= n; k += 4) {
      float f;
      std::memcpy(&f, p + k, 4);
      bad += !std::isfinite(f);
    }
  } else if (dtype == "float64") {
    for (size_t k = 0; k + 8 <= n; k += 8) {
      double d;
      std::memcpy(&d, p + k, 8);
      bad += !std::isfinite(d);
    }
  } else if (dtype == "float16") {
    for (size_t k = 0; k + 2 <= n; k += 2) bad += (p[k + 1] & 0x7c) == 0x7c;
  } else if (dtype == "bfloat16") {
    for (size_t k = 0; k + 2 <= n; k += 2) bad += (p[k + 1] & 0x7f) == 0x7f && (p[k] & 0x80);
  }
  return bad;
}

class SafetensorsReader : public FormatReader {
 public:
  std::string name() const override { return "safetensors"; }
  int probe(const std::string& path) const override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const std::string ext = ".safetensors";
    if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
      return 70;
    auto f = Env::posix()->open_random(path);
    if (!f.is_ok() || (*f)->size() < 9) return 0;
    auto head = (*f)->read_string(8, 1);
    return head.is_ok() && *head == "{" ? 20 : 0;
  }
  Result<CheckpointView> read(const std::string& path, const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = "safetensors";
    view.contents.name = path;
    view.contents.kind = "file";
    CKPT_ASSIGN_OR_RETURN(view.bytes_read,
                          add_safetensors_to_view(path, basename_of(path), &view, options));
    view.model.weights_only_format = true;
    const std::string why = "safetensors holds weights only: this state cannot be in the file";
    for (AuditComponent c :
         {AuditComponent::kOptimizer, AuditComponent::kScheduler, AuditComponent::kRngCpu,
          AuditComponent::kRngCuda, AuditComponent::kLoader, AuditComponent::kCounters}) {
      view.format_gaps[c] = why;
    }
    view.optimizer.evidence = why;
    view.scheduler.evidence = why;
    view.findings.push_back({Severity::kInfo, std::nullopt,
                             "safetensors stores tensors only: optimizer, scheduler, RNG, "
                             "loader and counters must come from other files",
                             false});
    return view;
  }
};

}  // namespace

Result<uint64_t> add_safetensors_to_view(const std::string& path, const std::string& label,
                                         CheckpointView* view, const ReadOptions& options) {
  CKPT_ASSIGN_OR_RETURN(auto file, Env::posix()->open_random(path));
  CKPT_ASSIGN_OR_RETURN(SafetensorsHeader h, parse_safetensors(*file));
  ModelPart& m = view->model;
  m.found = true;
  m.source += (m.source.empty() ? "" : ", ") + label;
  std::ostringstream e;
  e << label << ": " << h.tensors.size() << " tensors";
  m.evidence += (m.evidence.empty() ? "" : "; ") + e.str();
  InspectNode node;
  node.name = label;
  node.kind = "file";
  node.summary = "safetensors, header " + std::to_string(h.header_size) + " B, " +
                 std::to_string(h.tensors.size()) + " tensors";
  for (const auto& [k, v] : h.metadata)
    node.children.push_back({"__metadata__." + k, "str", "'" + v + "'", "", {}, 0, "", {}});
  uint64_t total = 0;
  for (const auto& t : h.tensors) total += t.end - t.begin;
  ProgressBar bar(options.deep && options.progress, total, "ckpt audit --deep " + label);
  std::string buf;
  for (const auto& t : h.tensors) {
    TensorInfo ti{t.name, t.dtype, t.shape, "", label, "", t.end - t.begin};
    if (options.tensor_values && t.end - t.begin <= (uint64_t{1} << 32)) {
      CKPT_ASSIGN_OR_RETURN(std::string bytes,
                            file->read_string(h.data_start + t.begin, t.end - t.begin));
      ti.values = std::make_shared<const std::string>(std::move(bytes));
    }
    m.tensors.push_back(ti);
    std::ostringstream s;
    s << t.dtype << " [";
    for (size_t i = 0; i < t.shape.size(); ++i) s << (i ? ", " : "") << t.shape[i];
    s << "] " << (t.end - t.begin) << " B @" << (h.data_start + t.begin);
    node.children.push_back({t.name, "tensor", s.str(), t.dtype, t.shape, t.end - t.begin, "", {}});
    if (!options.deep) continue;
    uint64_t bad = 0;
    constexpr uint64_t kChunk = 4u << 20;
    for (uint64_t off = t.begin; off < t.end;) {
      uint64_t n = std::min(kChunk, t.end - off);
      n -= n % std::max<size_t>(1, t.element_size);
      if (n == 0) break;
      buf.resize(n);
      CKPT_RETURN_IF_ERROR(file->read_at(h.data_start + off, buf.data(), n));
      bad += count_nonfinite(t.dtype, reinterpret_cast<const unsigned char*>(buf.data()), n);
      off += n;
      bar.advance(n);
    }
    if (bad > 0) {
      view->findings.push_back(
          {Severity::kError, AuditComponent::kModel,
           label + ": tensor \"" + t.name + "\" holds " + std::to_string(bad) + " NaN/Inf values",
           true});
    }
  }
  if (options.inspect) view->contents.children.push_back(std::move(node));
  return file->bytes_read();
}

std::unique_ptr<FormatReader> make_safetensors_reader() {
  return std::make_unique<SafetensorsReader>();
}

}  // namespace ckpt::verify
