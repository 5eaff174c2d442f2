// The FormatReader for DeepSpeed save_checkpoint folders:
//
//   SAVE_DIR/latest                          the tag of the newest checkpoint ("global_step3")
//   SAVE_DIR/global_stepN/mp_rank_00_model_states.pt              ZeRO 0-2: module, lr_scheduler,
//                                                                  global_steps, ds_config, ...
//   SAVE_DIR/global_stepN/zero_pp_rank_R_mp_rank_00_model_states.pt   ZeRO 3 (one per rank)
//   SAVE_DIR/global_stepN/[bf16_]zero_pp_rank_R_mp_rank_00_optim_states.pt  ZeRO 1-3 optimizer
//
// A save folder (with `latest`) or one tag folder is read; every torch.save file of the tag is
// read by the torch.save reader (never executed) and folded into one view, so structural
// detection finds the optimizer (ZeRO's base_optimizer_state / optimizer_state_dict), the
// scheduler and the counters (global_steps). ds_config gives the config digest. A rank file
// that is missing (the model states say which must exist) or does not parse is named with what
// it held (deepspeed_loss.h), and the rest is still read.
#include <dirent.h>

#include <algorithm>
#include <map>
#include <vector>

#include "ckpt/io/env.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/deepspeed_loss.h"
#include "verify/formats/detect.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

bool is_model_states(const std::string& n) {
  return n.find("mp_rank_") != std::string::npos && ends_with(n, "_model_states.pt");
}

// A tag folder: model states, or (the model states lost) ZeRO optimizer partitions.
bool holds_model_states(Env* env, const std::string& dir) {
  for (const auto& n : env->list_dir_or_empty(dir)) {
    if (is_model_states(n) || is_deepspeed_optim_states(n)) return true;
  }
  return false;
}

// The tag `latest` names, trimmed; empty when there is no usable `latest`.
std::string latest_tag(Env* env, const std::string& dir) {
  auto f = env->open_random(dir + "/latest");
  if (!f.is_ok() || (*f)->size() > 4096) return "";
  auto text = (*f)->read_string(0, (*f)->size());
  if (!text.is_ok()) return "";
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.empty() || t.find('/') != std::string::npos || t == "..") return "";
  return t;
}

class DeepSpeedReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kDeepSpeed; }
  int probe(Env* env, const std::string& path) const override {
    if (!env->is_dir(path)) return 0;
    const std::string tag = latest_tag(env, path);
    if (!tag.empty() && holds_model_states(env, path + "/" + tag)) return 85;
    return holds_model_states(env, path) ? 85 : 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = CheckpointFormat::kDeepSpeed;
    view.contents.name = path;
    view.contents.kind = "dir";
    std::string dir = path;
    const std::string tag = latest_tag(env, path);
    if (!tag.empty() && holds_model_states(env, path + "/" + tag)) {
      dir = path + "/" + tag;
      view.findings.push_back(
          {Severity::kInfo, std::nullopt, "latest names " + tag + ": auditing " + dir, false});
    }
    uint64_t bytes = 0;
    std::vector<TorchFile> keep;  // the pickles stay alive while the view is built
    std::map<std::string, const Value*> read;
    std::map<std::string, std::string> damaged;
    for (const auto& n : env->list_dir_or_empty(dir)) {
      if (!ends_with(n, ".pt")) continue;
      CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(dir + "/" + n));
      const RandomAccessFile* raw = file.get();
      Result<TorchFile> opened = open_torch_file(std::move(file));
      if (!opened.is_ok()) {
        // One rank's damaged file: the others are still read, and the loss is named.
        if (opened.status().code() != Code::kCorrupt) return opened.status();
        damaged[n] = "unreadable (" + opened.status().message() + ")";
        continue;
      }
      TorchFile tf = std::move(*opened);
      add_torch_file_to_view(tf, n, &view, options);
      if (is_model_states(n) && tf.doc->root != nullptr && !view.config_digest) {
        if (const Value* cfg = tf.doc->root->get("ds_config"))
          view.config_digest = value_digest(*cfg);
      }
      if (options.deep) CKPT_RETURN_IF_ERROR(deep_scan_torch(tf, n, &view, options));
      bytes += raw->bytes_read();
      if (tf.doc->root != nullptr) read[n] = tf.doc->root;
      keep.push_back(std::move(tf));
    }
    report_deepspeed_loss(read, damaged, &view);
    note_zero3_placeholders(env, dir, &view);
    note_bf16(env, dir, &view);
    view.bytes_read = bytes;
    return view;
  }

 private:
  // bf16 runs (DeepSpeed's BF16_Optimizer / bf16 ZeRO) name the optimizer files bf16_...: the
  // module holds bf16 weights, the fp32 master copy is in those files.
  static void note_bf16(Env* env, const std::string& dir, CheckpointView* view) {
    int files = 0;
    for (const auto& n : env->list_dir_or_empty(dir))
      files += n.rfind("bf16_zero_pp_rank_", 0) == 0 && ends_with(n, "_optim_states.pt");
    if (files == 0 || !view->optimizer.found) return;
    view->optimizer.evidence += "; bf16 run: the fp32 master weights are in " +
                                std::to_string(files) + " bf16_zero_pp_rank_*_optim_states.pt";
  }

  // ZeRO-3 saves the module as empty placeholders: the weights are the fp32 partitions in the
  // optimizer files (DeepSpeed's zero_to_fp32.py rebuilds a state_dict from them).
  static void note_zero3_placeholders(Env* env, const std::string& dir, CheckpointView* view) {
    if (!view->model.found || view->model.tensors.empty()) return;
    for (const auto& t : view->model.tensors) {
      if (t.nbytes != 0) return;
    }
    bool optim = false;
    for (const auto& n : env->list_dir_or_empty(dir))
      optim = optim || ends_with(n, "_optim_states.pt");
    if (!optim) return;
    view->model.evidence +=
        "; ZeRO-3 placeholders (0 elements): the weights are the fp32 partitions in "
        "zero_pp_rank_*_optim_states.pt (zero_to_fp32.py rebuilds them)";
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_deepspeed_reader() {
  return std::make_unique<DeepSpeedReader>();
}

}  // namespace ckpt::verify
