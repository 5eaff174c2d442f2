#include "cli/loader_checkpoint.h"

#include <algorithm>

#include "analytics/coverage/torch_randperm.h"
#include "ckpt/io/env.h"
#include "verify/formats/torch_file.h"

namespace ckpt::cli {
namespace {

using verify::Kind;
using verify::Value;

constexpr size_t kMaxFiles = 10000;
constexpr int kMaxDepth = 4;
constexpr int kMaxSearchDepth = 12;

// A dict, or the dict state / items of an object the reader did not construct (Lightning's
// AttributeDict, an OrderedDict subclass).
const Value* dict_of(const Value* v) {
  if (v == nullptr) return nullptr;
  if (v->is(Kind::kDict)) return v;
  if (v->is(Kind::kObject) && v->state != nullptr && v->state->is(Kind::kDict)) return v->state;
  return nullptr;
}

const Value* at(const Value* v, const std::string& key) {
  const Value* d = dict_of(v);
  return d == nullptr ? nullptr : d->get(key);
}

std::optional<int64_t> int_at(const Value* v, const std::string& key) {
  const Value* x = at(v, key);
  if (x == nullptr || !x->is(Kind::kInt)) return std::nullopt;
  return x->i;
}

bool bool_at(const Value* v, const std::string& key) {
  const Value* x = at(v, key);
  return x != nullptr && x->is(Kind::kBool) && x->b;
}

// The first dict under `v` that is a StatefulDataLoader state, with its path.
const Value* find_loader_state(const Value* v, const std::string& path, int depth,
                               std::string* where) {
  if (v == nullptr || depth > kMaxSearchDepth) return nullptr;
  const Value* d = dict_of(v);
  if (d != nullptr) {
    if (d->get("_num_yielded") != nullptr || at(d->get("_snapshot"), "_main_snapshot") != nullptr) {
      *where = path.empty() ? "the root" : path;
      return d;
    }
    for (const auto& [k, child] : d->entries) {
      if (k == nullptr || !k->is(Kind::kStr) || child->is(Kind::kTensor)) continue;
      const std::string p = path.empty() ? k->s : path + "." + k->s;
      if (const Value* r = find_loader_state(child, p, depth + 1, where)) return r;
    }
    return nullptr;
  }
  if (v->is(Kind::kList) || v->is(Kind::kTuple)) {
    for (size_t i = 0; i < v->items.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (const Value* r = find_loader_state(v->items[i], p, depth + 1, where)) return r;
    }
  }
  return nullptr;
}

analytics::LoaderState loader_state_of(const verify::TorchFile& tf, const Value* sd,
                                       const std::string& where) {
  analytics::LoaderState s;
  s.where = where;
  s.finished = bool_at(sd, "_iterator_finished");
  const Value* main = sd;
  if (const Value* snap = at(sd, "_snapshot")) {
    main = at(snap, "_main_snapshot");
    s.batches = int_at(snap, "_snapshot_step").value_or(0) +
                int_at(sd, "_steps_since_snapshot").value_or(0);
    s.workers = static_cast<int>(int_at(main, "_num_workers").value_or(0));
  } else {
    s.batches = int_at(sd, "_num_yielded").value_or(0);
  }
  s.sampler_batches = int_at(main, "_sampler_iter_yielded");
  const Value* it = at(main, "_sampler_iter_state");
  s.samples_yielded = int_at(it, "samples_yielded");
  const Value* gen = at(at(it, "sampler_iter_state"), "generator");
  if (gen != nullptr && gen->is(Kind::kTensor) && gen->tensor) {
    auto bytes = tf.read_bytes(*gen->tensor, analytics::TorchCpuGenerator::kStateBytes);
    if (bytes) s.generator_state = std::move(*bytes);
  }
  return s;
}

void walk(Env* env, const std::string& dir, int depth, std::vector<std::string>* files) {
  std::vector<std::string> names = env->list_dir_or_empty(dir);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (files->size() > kMaxFiles) return;
    const std::string p = dir + "/" + n;
    auto kind = env->entry_kind(p);  // links are not followed
    if (!kind.is_ok()) continue;
    if (*kind == FileKind::kDirectory) {
      if (depth < kMaxDepth) walk(env, p, depth + 1, files);
      continue;
    }
    if (*kind != FileKind::kRegular) continue;
    auto ends = [&](const char* ext) {
      const std::string e = ext;
      return n.size() > e.size() && n.compare(n.size() - e.size(), e.size(), e) == 0;
    };
    if (ends(".ckpt") || ends(".pt") || ends(".pth")) files->push_back(p);
  }
}

}  // namespace

Result<analytics::LoaderCheckpoint> read_loader_checkpoint(Env* env, const std::string& path,
                                                           bool* found) {
  *found = false;
  CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(path));
  CKPT_ASSIGN_OR_RETURN(verify::TorchFile tf, verify::open_torch_file(std::move(file)));
  const Value* root = tf.doc ? dict_of(tf.doc->root) : nullptr;
  analytics::LoaderCheckpoint c;
  c.source = path;
  if (root == nullptr) return c;
  const Value* loops = at(root, "loops");
  c.lightning = dict_of(loops) != nullptr && int_at(root, "global_step").has_value();
  std::string where;
  const Value* sd = find_loader_state(root, "", 0, &where);
  if (!c.lightning && sd == nullptr) return c;
  *found = true;
  std::optional<int64_t> step = int_at(root, "global_step");
  if (!step) step = int_at(root, "step");
  if (!step || *step < 0) {
    return corrupt(path + ": a StatefulDataLoader state (" + where +
                   ") but no top-level \"step\" or \"global_step\" to place it");
  }
  c.step = *step;
  c.epoch = int_at(root, "epoch");
  if (c.lightning) {
    const Value* progress = at(at(loops, "fit_loop"), "epoch_loop.batch_progress");
    c.batches_in_epoch = int_at(at(progress, "current"), "ready");
    c.last_batch = bool_at(progress, "is_last_batch");
    c.batch_size_hparam = int_at(at(root, "hyper_parameters"), "batch_size");
  }
  if (sd != nullptr) c.loader = loader_state_of(tf, sd, where);
  return c;
}

Result<std::vector<analytics::LoaderCheckpoint>> read_loader_checkpoints(Env* env,
                                                                         const std::string& dir) {
  std::vector<std::string> files;
  walk(env, dir, 0, &files);
  if (files.size() > kMaxFiles) {
    return corrupt(dir + ": more than " + std::to_string(kMaxFiles) + " checkpoint files");
  }
  std::vector<analytics::LoaderCheckpoint> out;
  for (const auto& f : files) {
    bool found = false;
    auto c = read_loader_checkpoint(env, f, &found);
    if (!c.is_ok()) {
      // A .pt that is not a torch.save file is someone else's; a damaged .ckpt is an error.
      if (f.size() > 5 && f.compare(f.size() - 5, 5, ".ckpt") == 0) return c.status();
      continue;
    }
    if (found) out.push_back(std::move(c).value());
  }
  return out;
}

}  // namespace ckpt::cli
