// The FormatReader for a lone *.safetensors file (weights only: everything else is reported
// missing, with the reason), and the helper that folds safetensors shards into a view.
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

class SafetensorsReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kSafetensors; }
  int probe(Env* env, const std::string& path) const override {
    auto f = env->open_random(path);  // regular files only
    if (!f.is_ok()) return 0;
    const std::string ext = ".safetensors";
    if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
      return 70;
    if ((*f)->size() < 9) return 0;
    auto head = (*f)->read_string(8, 1);
    return head.is_ok() && *head == "{" ? 20 : 0;
  }
  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = CheckpointFormat::kSafetensors;
    view.contents.name = path;
    view.contents.kind = "file";
    CKPT_ASSIGN_OR_RETURN(view.bytes_read,
                          add_safetensors_to_view(env, path, basename_of(path), &view, options));
    view.model.weights_only_format = true;
    mark_weights_only("safetensors holds weights only: this state cannot be in the file", &view);
    view.findings.push_back({Severity::kInfo, std::nullopt,
                             "safetensors stores tensors only: optimizer, scheduler, RNG, "
                             "loader and counters must come from other files",
                             false});
    return view;
  }
};

}  // namespace

Result<uint64_t> add_safetensors_to_view(Env* env, const std::string& path,
                                         const std::string& label, CheckpointView* view,
                                         const ReadOptions& options) {
  CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(path));
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
    s << t.dtype.name() << " [";
    for (size_t i = 0; i < t.shape.size(); ++i) s << (i ? ", " : "") << t.shape[i];
    s << "] " << (t.end - t.begin) << " B @" << (h.data_start + t.begin);
    node.children.push_back(
        {t.name, "tensor", s.str(), t.dtype.name(), t.shape, t.end - t.begin, "", {}});
    if (!options.deep) continue;
    uint64_t bad = 0;
    constexpr uint64_t kChunk = 4u << 20;
    for (uint64_t off = t.begin; off < t.end;) {
      uint64_t n = std::min(kChunk, t.end - off);
      n -= n % std::max<size_t>(1, t.element_size);
      if (n == 0) break;
      buf.resize(n);
      CKPT_RETURN_IF_ERROR(file->read_at(h.data_start + off, buf.data(), n));
      if (t.dtype.known()) bad += count_nonfinite(*t.dtype.known(), buf.data(), n);
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

void mark_weights_only(const std::string& why, CheckpointView* view) {
  for (AuditComponent c :
       {AuditComponent::kOptimizer, AuditComponent::kScheduler, AuditComponent::kRngCpu,
        AuditComponent::kRngCuda, AuditComponent::kLoader, AuditComponent::kCounters}) {
    view->format_gaps[c] = why;
  }
  view->optimizer.evidence = why;
  view->scheduler.evidence = why;
}

}  // namespace ckpt::verify
