// The FormatReader for Megatron-LM / Megatron-Core save folders:
//
//   SAVE/latest_checkpointed_iteration.txt       the newest iteration ("3"), or "release";
//                                                written last (a finalize step), so an iter_
//                                                folder newer than it is a save that did not end
//   SAVE/iter_0000003/mp_rank_XX[_YYY[_ZZZ]]/model_optim_rng.pt   legacy (--ckpt-format torch):
//                                                one torch.save per tensor/pipeline/expert rank,
//                                                + distrib_optim.pt with
//                                                --use-distributed-optimizer
//   SAVE/iter_0000003/{.metadata, __R_N.distcp, common.pt, metadata.json}   torch_dist: a DCP
//                                                folder for the sharded state (model, optimizer
//                                                moments, rng_state) and common.pt for the rest
//
// A save folder (with the tracker) or one iter_/release folder is read. Every file goes through
// the torch.save or DCP readers (never executed); megatron_state.h maps Megatron's names onto the
// contract. Recognised ahead of the plain DCP reader (probe 95 against 90).

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ckpt/io/env.h"
#include "verify/formats/builtin_readers.h"
#include "verify/formats/dcp.h"
#include "verify/formats/detect.h"
#include "verify/formats/megatron_state.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify {
namespace {

constexpr const char* kTracker = "latest_checkpointed_iteration.txt";
constexpr const char* kRankFile = "model_optim_rng.pt";

bool all_digits(const std::string& s, size_t from, size_t n) {
  if (s.size() < from + n) return false;
  for (size_t i = from; i < from + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// mp_rank_XX, mp_rank_XX_YYY, mp_rank_XX_YYY_ZZZ (tensor, pipeline, expert rank).
bool is_rank_dir(const std::string& n) {
  if (n.compare(0, 8, "mp_rank_") != 0 || !all_digits(n, 8, 2)) return false;
  size_t i = 10;
  for (int parts = 0; i < n.size() && parts < 2; ++parts, i += 4) {
    if (n[i] != '_' || !all_digits(n, i + 1, 3)) return false;
  }
  return i == n.size();
}

// iter_NNNNNNN (Megatron pads to 7 digits; more when the run is longer).
std::optional<int64_t> iter_number(const std::string& n) {
  if (n.compare(0, 5, "iter_") != 0 || n.size() < 12 || n.size() > 24) return std::nullopt;
  if (!all_digits(n, 5, n.size() - 5)) return std::nullopt;
  return std::stoll(n.substr(5));
}

std::vector<std::string> rank_dirs(Env* env, const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& n : env->list_dir_or_empty(dir)) {
    if (is_rank_dir(n) && env->is_dir(dir + "/" + n)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_torch_dist(Env* env, const std::string& dir) {
  return env->exists(dir + "/common.pt") || env->exists(dir + "/metadata.json");
}

bool is_iter_dir(Env* env, const std::string& dir) {
  return is_torch_dist(env, dir) || !rank_dirs(env, dir).empty();
}

Result<std::string> read_small(Env* env, const std::string& path, uint64_t cap) {
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path));
  if (f->size() > cap) {
    return corrupt(path + ": " + std::to_string(f->size()) + " bytes, expected at most " +
                   std::to_string(cap));
  }
  return f->read_string(0, f->size());
}

std::string trim(std::string t) {
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  size_t b = 0;
  while (b < t.size() && std::isspace(static_cast<unsigned char>(t[b]))) ++b;
  return t.substr(b);
}

// The iteration folder the tracker names; findings for a tracker behind a newer folder.
Result<std::string> tracked_iter_dir(Env* env, const std::string& save, CheckpointView* view) {
  const std::string tracker = save + "/" + kTracker;
  CKPT_ASSIGN_OR_RETURN(std::string raw, read_small(env, tracker, 64));
  const std::string text = trim(raw);
  std::string name;
  int64_t tracked = -1;
  if (text == "release") {
    name = "release";
  } else if (!text.empty() && text.size() <= 18 && all_digits(text, 0, text.size())) {
    tracked = std::stoll(text);
    char buf[32];
    std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(tracked));
    name = buf;
  } else {
    return corrupt(tracker + ": expected an iteration number or \"release\", got \"" +
                   text.substr(0, 40) + "\"");
  }
  const std::string dir = save + "/" + name;
  if (!env->is_dir(dir)) {
    return corrupt(tracker + ": names " + text + ", but " + name +
                   "/ is missing: Megatron's load_checkpoint fails on this save folder");
  }
  view->findings.push_back({Severity::kInfo, std::nullopt,
                            kTracker + std::string(" names ") + text + ": auditing " + name,
                            false});
  for (const auto& n : env->list_dir_or_empty(save)) {
    auto it = iter_number(n);
    if (it && tracked >= 0 && *it > tracked && env->is_dir(save + "/" + n)) {
      view->findings.push_back(
          {Severity::kWarning, std::nullopt,
           n + "/ is newer than the tracked iteration " + text +
               ": a save that did not finish (the tracker is written last); it is not resumed",
           false});
    }
  }
  return dir;
}

class MegatronReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kMegatron; }
  int probe(Env* env, const std::string& path) const override {
    if (!env->is_dir(path)) return 0;
    if (env->exists(path + "/" + kTracker)) return 95;
    return is_iter_dir(env, path) ? 95 : 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.contents.name = path;
    view.contents.kind = "dir";
    std::string dir = path;
    if (env->exists(path + "/" + kTracker)) {
      CKPT_ASSIGN_OR_RETURN(dir, tracked_iter_dir(env, path, &view));
    }
    if (is_torch_dist(env, dir)) {
      view.format = CheckpointFormat::kMegatronTorchDist;
      CKPT_RETURN_IF_ERROR(read_torch_dist(env, dir, options, &view));
    } else {
      view.format = CheckpointFormat::kMegatron;
      CKPT_RETURN_IF_ERROR(read_legacy(env, dir, options, &view));
    }
    return view;
  }

 private:
  static Status read_legacy(Env* env, const std::string& dir, const ReadOptions& options,
                            CheckpointView* view) {
    const auto ranks = rank_dirs(env, dir);
    if (ranks.empty()) {
      return corrupt(dir + ": no mp_rank_XX/" + kRankFile +
                     " and no common.pt: not a Megatron checkpoint folder");
    }
    std::vector<TorchFile> files;  // the pickles stay alive while the view is built
    std::vector<MegatronRankFile> rank_files;
    uint64_t bytes = 0;
    for (const auto& r : ranks) {
      const std::string label = r + "/" + kRankFile;
      auto file = env->open_random(dir + "/" + label);
      if (!file.is_ok()) {
        rank_files.push_back({label, nullptr, "missing: " + file.status().message()});
        continue;
      }
      const RandomAccessFile* raw = file->get();
      auto tf = open_torch_file(std::move(*file));
      if (!tf.is_ok()) {
        rank_files.push_back({label, nullptr, "unreadable: " + tf.status().message()});
        continue;
      }
      if (files.empty()) {
        add_torch_file_to_view(*tf, label, view, options);
      } else {  // the other ranks: checked against the first (check_megatron_ranks), not merged
        add_global_findings(*tf->doc, label, view);
        if (options.inspect && tf->doc->root != nullptr) {
          size_t budget = 200000;
          InspectNode n = inspect_value(*tf->doc->root, label, &budget);
          n.kind = "file";
          view->contents.children.push_back(std::move(n));
        }
      }
      if (options.deep) CKPT_RETURN_IF_ERROR(deep_scan_torch(*tf, label, view, options));
      bytes += raw->bytes_read();
      files.push_back(std::move(*tf));
      rank_files.push_back({label, files.back().doc->root, ""});
      check_distributed_optimizer(env, dir + "/" + r, r, *files.back().doc->root, view);
    }
    view->bytes_read = bytes;
    for (const auto& f : rank_files) {
      if (f.root != nullptr) {
        add_megatron_state(*f.root, f.label, view);
        break;
      }
    }
    if (files.empty())
      return corrupt(dir + ": " + rank_files.front().label + " " + rank_files.front().error);
    check_megatron_ranks(rank_files, view);
    return Status::ok();
  }

  // --use-distributed-optimizer (legacy): the moments are in distrib_optim.pt beside the file.
  static void check_distributed_optimizer(Env* env, const std::string& rank_dir,
                                          const std::string& rank, const Value& root,
                                          CheckpointView* view) {
    const Value* args = root.get("args");
    const Value* flag = args != nullptr && args->state != nullptr
                            ? args->state->get("use_distributed_optimizer")
                            : nullptr;
    if (flag == nullptr || flag->as_int().value_or(0) == 0 || root.get("optimizer") == nullptr)
      return;
    if (env->exists(rank_dir + "/distrib_optim.pt")) {
      view->findings.push_back({Severity::kInfo, AuditComponent::kOptimizer,
                                rank + "/distrib_optim.pt holds the distributed optimizer's "
                                       "moments (not read)",
                                false});
    } else {
      view->findings.push_back({Severity::kError, AuditComponent::kOptimizer,
                                rank + "/distrib_optim.pt is missing: the run used "
                                       "--use-distributed-optimizer, whose moments live there",
                                true});
    }
  }

  static Status read_torch_dist(Env* env, const std::string& dir, const ReadOptions& options,
                                CheckpointView* view) {
    check_metadata_json(env, dir, view);
    std::optional<TorchFile> common;
    // What dist_checkpointing.save puts in common.pt (every entry that is not sharded), for the
    // finding when it is lost: the components that lived there are then missing.
    static const char* kCommon =
        "args, checkpoint_version, iteration, optimizer (param_groups, common_step), "
        "opt_param_scheduler, num_floating_point_operations_so_far";
    if (auto f = env->open_random(dir + "/common.pt"); f.is_ok()) {
      Result<TorchFile> tf = open_torch_file(std::move(*f));
      if (tf.is_ok()) {
        add_global_findings(*tf->doc, "common.pt", view);
        common = std::move(*tf);
      } else if (tf.status().code() == Code::kCorrupt) {
        view->findings.push_back({Severity::kError, std::nullopt,
                                  "common.pt is unreadable (" + tf.status().message() +
                                      "): it held " + kCommon +
                                      "; Megatron's dist_checkpointing.load reads them from it",
                                  false});
      } else {
        return tf.status();
      }
    } else {
      view->findings.push_back({Severity::kError, std::nullopt,
                                std::string("common.pt is missing: it held ") + kCommon +
                                    "; Megatron's dist_checkpointing.load reads them from it",
                                false});
    }
    if (!env->exists(dir + "/.metadata")) {
      return corrupt(dir +
                     "/.metadata: missing: the sharded state (model, optimizer moments, "
                     "rng_state) has no index; the save did not finish");
    }
    PickleDoc synth;
    DcpLayout layout;
    layout.path_of = torch_dist_path;
    layout.common = common ? common_without_step(*common->doc->root, &synth) : nullptr;
    std::optional<double> step;
    if (common) step = common_step(*common);
    layout.after_detect = [&](const Value& root, CheckpointView* v) {
      add_megatron_state(root, "common.pt", v);
      if (step && v->optimizer.found) {
        for (auto& ps : v->optimizer.state) ps.step = *step;
        v->optimizer.evidence += "; step from common.pt optimizer.state.common_step";
      }
    };
    return read_dcp_folder(env, dir, options, layout, view);
  }

  // metadata.json says which backend wrote the folder; dist_checkpointing needs it to load.
  static void check_metadata_json(Env* env, const std::string& dir, CheckpointView* view) {
    auto text = read_small(env, dir + "/metadata.json", 1 << 16);
    std::string backend;
    if (text.is_ok()) {
      auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object() && j.contains("sharded_backend") && j["sharded_backend"].is_string())
        backend = j["sharded_backend"].get<std::string>();
    }
    if (backend.empty()) {
      view->findings.push_back(
          {Severity::kError, std::nullopt,
           "metadata.json is missing or has no sharded_backend: Megatron's dist_checkpointing "
           "does not recognise the folder as a distributed checkpoint",
           false});
    } else {
      view->findings.push_back(
          {Severity::kInfo, std::nullopt, "metadata.json: sharded_backend " + backend, false});
    }
  }

  // torch_dist keys: "optimizer.state.<moment>.<param fqn>" for the moments, "<name>/shard_..."
  // for ShardedObjects (rng_state, a layer's _extra_state), every other key a model tensor.
  static std::vector<std::string> torch_dist_path(const std::string& fqn) {
    static const std::string kState = "optimizer.state.";
    if (fqn.compare(0, kState.size(), kState) == 0) {
      const size_t dot = fqn.find('.', kState.size());
      if (dot != std::string::npos && dot + 1 < fqn.size()) {
        return {"optimizer", "state", fqn.substr(dot + 1),
                fqn.substr(kState.size(), dot - kState.size())};
      }
    }
    if (fqn.compare(0, 10, "optimizer.") == 0) return {"optimizer", "sharded", fqn.substr(10)};
    const size_t slash = fqn.rfind('/');
    if (slash != std::string::npos) {
      const std::string base = fqn.substr(0, slash);
      if (base == "rng_state") return {"rng_state", fqn.substr(slash + 1)};
      return {"sharded_objects", fqn};
    }
    return {"model", fqn};
  }

  // common.pt's optimizer keeps one step for every param (state.common_step) and param_groups
  // without their params: a copy of the root without that step, so that detection sees the
  // usual {state: {fqn: moments}, param_groups} shape once merged.
  static const Value* common_without_step(const Value& root, PickleDoc* synth) {
    if (root.kind != Kind::kDict) return nullptr;
    Value* out = synth->make(Kind::kDict);
    for (const auto& [k, v] : root.entries) {
      if (k->kind == Kind::kStr && k->s == "optimizer" && v->kind == Kind::kDict) {
        Value* opt = synth->make(Kind::kDict);
        for (const auto& [ok, ov] : v->entries) {
          if (ok->kind == Kind::kStr && ok->s == "state") continue;
          opt->entries.emplace_back(ok, ov);
        }
        out->entries.emplace_back(k, opt);
      } else {
        out->entries.emplace_back(k, v);
      }
    }
    return out;
  }

  static std::optional<double> common_step(const TorchFile& tf) {
    const Value* opt = tf.doc->root != nullptr ? tf.doc->root->get("optimizer") : nullptr;
    const Value* state = opt != nullptr ? opt->get("state") : nullptr;
    const Value* step = state != nullptr ? state->get("common_step") : nullptr;
    if (step == nullptr) return std::nullopt;
    if (step->kind == Kind::kTensor) return tf.read_scalar(*step->tensor);
    return step->as_number();
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_megatron_reader() { return std::make_unique<MegatronReader>(); }

}  // namespace ckpt::verify
