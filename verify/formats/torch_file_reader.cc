// The FormatReader for single torch.save files: plain torch.save dicts, Lightning .ckpt files,
// and (refused with a clear message) TorchScript archives and legacy pre-1.6 files.
#include "verify/formats/builtin_readers.h"
#include "verify/formats/detect.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

bool is_lightning(const Value* root) {
  return root != nullptr && root->kind == Kind::kDict &&
         (root->get("pytorch-lightning_version") != nullptr ||
          (root->get("loops") != nullptr && root->get("state_dict") != nullptr));
}

std::string basename_of(const std::string& path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

class TorchFileReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kTorchSave; }

  int probe(Env* env, const std::string& path) const override {
    auto f = env->open_random(path);  // regular files only
    if (!f.is_ok()) return 0;
    auto head = (*f)->read_string(0, std::min<uint64_t>((*f)->size(), 512));
    if (head.is_ok() && !sniff_torch(*head).empty()) return 60;
    for (const char* ext : {".pt", ".pth", ".bin", ".ckpt", ".pkl", ".tar"}) {
      const std::string e = ext;
      if (path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0)
        return 10;
    }
    return 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(path));
    const RandomAccessFile* raw = file.get();
    CKPT_ASSIGN_OR_RETURN(TorchFile tf, open_torch_file(std::move(file)));
    CheckpointView view;
    view.path = path;
    view.format =
        is_lightning(tf.doc->root) ? CheckpointFormat::kLightning : CheckpointFormat::kTorchSave;
    view.contents.name = path;
    view.contents.kind = "file";
    const std::string label = basename_of(path);
    if (view.format == CheckpointFormat::kLightning) {
      const std::string why = "Lightning's checkpoint (dump_checkpoint) saves no RNG state";
      view.format_gaps[AuditComponent::kRngCpu] = why;
      view.format_gaps[AuditComponent::kRngCuda] = why;
    }
    add_torch_file_to_view(tf, label, &view, options);
    if (view.format == CheckpointFormat::kLightning) {
      if (const Value* hp = tf.doc->root->get("hyper_parameters"))
        view.config_digest = value_digest(*hp);
    }
    if (options.deep) CKPT_RETURN_IF_ERROR(deep_scan_torch(tf, label, &view, options));
    view.bytes_read = raw->bytes_read();
    return view;
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_torch_file_reader() {
  return std::make_unique<TorchFileReader>();
}

}  // namespace ckpt::verify
