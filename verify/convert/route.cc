#include "verify/convert/route.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_set>

#include "verify/convert/encode.h"
#include "verify/formats/detect.h"
#include "verify/formats/knowledge.h"

namespace ckpt::verify::convert {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxVisits = 2'000'000;

std::string key_text(const Value* k) {
  if (k->kind == Kind::kStr) return printable(k->s);
  if (k->kind == Kind::kInt) return std::to_string(k->i);
  return summarize(*k);
}

bool is_loader_state(const Value& d) {
  if (d.get("_num_yielded") != nullptr || d.get("_snapshot") != nullptr ||
      d.get("_sampler_iter_yielded") != nullptr)
    return true;  // torchdata StatefulDataLoader
  const Value* fit = d.get("fit_loop");
  return fit != nullptr && fit->kind == Kind::kDict;  // Lightning loops
}

class Router {
 public:
  Router(const ScalarRead& scalar, Routing* out) : scalar_(scalar), r_(*out) {}

  void walk(size_t tree, const Value& root) {
    struct Item {
      const Value* v;
      std::string path;
      int depth;
      std::vector<std::string> keys;
    };
    std::deque<Item> queue{{&root, "", 0, {}}};
    std::unordered_set<const Value*> seen;
    size_t visits = 0;
    while (!queue.empty() && visits++ < kMaxVisits) {
      Item it = queue.front();
      queue.pop_front();
      const Value* v = it.v;
      if (!seen.insert(v).second || it.depth > kMaxDepth) continue;
      keys_ = &it.keys;
      if (v->kind == Kind::kDict) {
        if (claim_dict(tree, *v, it.path, it.depth)) continue;
        if (model_candidate(tree, *v, it.path)) continue;
        for (const auto& [k, x] : v->entries) {
          const std::string key = key_text(k);
          queue.push_back(
              {x, it.path.empty() ? key : it.path + "." + key, it.depth + 1, with(it.keys, key)});
        }
      } else if (v->kind == Kind::kList || v->kind == Kind::kTuple) {
        if (is_python_rng_state(v) || is_numpy_rng_state(v)) {
          auto& slot = is_python_rng_state(v) ? r_.rng_python : r_.rng_numpy;
          if (!slot) slot = Found{v, tree, it.path, *keys_};
          continue;
        }
        bool all_cuda = !v->items.empty();
        for (const Value* x : v->items) all_cuda = all_cuda && is_cuda_rng_state(x);
        const bool cuda_key = it.path.find("cuda") != std::string::npos;
        for (size_t i = 0; i < v->items.size(); ++i) {
          const std::string sub = it.path + "[" + std::to_string(i) + "]";
          if (all_cuda && cuda_key) {
            take_cuda(tree, v->items[i], sub);
          } else {
            queue.push_back({v->items[i], sub, it.depth + 1, with(it.keys, std::to_string(i))});
          }
        }
      } else if (v->kind == Kind::kTensor) {
        if (is_cpu_rng_state(v) && !r_.rng_cpu) {
          r_.rng_cpu = Found{v, tree, it.path, *keys_};
        } else if (is_cuda_rng_state(v) && it.path.find("cuda") != std::string::npos) {
          take_cuda(tree, v, it.path);
        }
      }
    }
  }

  // Every tensor location, including inside components (the BFS stops at them).
  void devices(const Value& root) {
    std::vector<const Value*> stack{&root};
    std::unordered_set<const Value*> seen;
    size_t visits = 0;
    while (!stack.empty() && visits++ < kMaxVisits) {
      const Value* v = stack.back();
      stack.pop_back();
      if (v == nullptr || !seen.insert(v).second) continue;
      if (v->kind == Kind::kTensor && v->tensor->location.rfind("cuda", 0) == 0) {
        const std::string& loc = v->tensor->location;
        const size_t colon = loc.find(':');
        int64_t index = 0;
        if (colon != std::string::npos) index = std::atoll(loc.c_str() + colon + 1);
        r_.cuda_devices = std::max<int64_t>(r_.cuda_devices, std::min<int64_t>(index, 1023) + 1);
      }
      for (const Value* x : v->items) stack.push_back(x);
      for (const auto& [k, x] : v->entries) stack.push_back(x);
    }
  }

  void finish() {
    if (best_model_.v != nullptr) r_.model = best_model_;
    auto move = [&](const std::optional<Found>& f, const std::string& to) {
      if (f) r_.moved[f->v] = to;
    };
    move(r_.model, "/model");
    move(r_.optimizer, "/optimizer");
    move(r_.scheduler, "/scheduler");
    move(r_.rng_cpu, "/rng/cpu/state");
    if (r_.rng_cpu) {  // only beside a torch generator: /rng is the torch RNG component
      move(r_.rng_python, "/rng/python");
      move(r_.rng_numpy, "/rng/numpy");
    } else {
      r_.rng_python.reset();
      r_.rng_numpy.reset();
    }
    for (size_t i = 0; i < r_.rng_cuda.size(); ++i)
      r_.moved[r_.rng_cuda[i].v] = "/rng/cuda/" + std::to_string(i);
  }

 private:
  bool claim_dict(size_t tree, const Value& d, const std::string& path, int depth) {
    if (is_optimizer_state(d)) {
      if (!r_.optimizer) {
        r_.optimizer = Found{&d, tree, path, *keys_};
      } else {
        more(tree, d, path, "a second optimizer (ckpt holds one in /optimizer)");
      }
      return true;
    }
    if (is_scheduler_state(d)) {
      if (!r_.scheduler) {
        r_.scheduler = Found{&d, tree, path, *keys_};
      } else {
        more(tree, d, path, "a second LR scheduler (ckpt holds one in /scheduler)");
      }
      return true;
    }
    if (is_grad_scaler_state(d)) {
      if (!r_.grad_scaler) r_.grad_scaler = Found{&d, tree, path, *keys_};
      return true;  // stays in /extra; its scale also goes to /train/amp_loss_scale
    }
    if (depth <= 2) counters(tree, d, path);
    if (is_loader_state(d)) {
      more(tree, d, path,
           "a data-loader / loop state (ckpt's /loader holds its own sampler cursor; kept "
           "verbatim)");
      return true;
    }
    return false;
  }

  // The largest dict whose values are all tensors (not all uint8: an RNG dict) is the model;
  // one kept under an averaging name (model_ema, ema, swa_model, shadow...) only when there is
  // no other: an EMA copy holds the model's tensors and one more (AveragedModel's n_averaged),
  // but it is not what the training resumes.
  bool model_candidate(size_t tree, const Value& d, const std::string& path) {
    size_t tensors = 0, others = 0;
    bool all_uint8 = true;
    for (const auto& [k, x] : d.entries) {
      if (x->kind == Kind::kTensor) {
        ++tensors;
        all_uint8 = all_uint8 && x->tensor->dtype.is(DType::kUInt8);
      } else if (x->kind != Kind::kNone) {
        ++others;
      }
    }
    if (tensors == 0 || others != 0 || all_uint8) return false;
    const bool averaged = is_averaged_copy(*keys_);
    if ((!averaged && (best_averaged_ || tensors > best_count_)) ||
        (averaged && best_averaged_ && tensors > best_count_) || best_model_.v == nullptr) {
      best_model_ = Found{&d, tree, path, *keys_};
      best_count_ = tensors;
      best_averaged_ = averaged;
    }
    return true;
  }

  // Whether a key on the way to a dict names an averaged copy of the model.
  static bool is_averaged_copy(const std::vector<std::string>& keys) {
    for (const std::string& k : keys) {
      std::string l(k);
      std::transform(l.begin(), l.end(), l.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      for (const char* w : {"ema", "swa", "shadow", "averaged"}) {
        const size_t at = l.find(w);
        if (at == std::string::npos) continue;
        const size_t end = at + std::strlen(w);
        const bool left = at == 0 || !std::isalpha(static_cast<unsigned char>(l[at - 1]));
        const bool right = end == l.size() || !std::isalpha(static_cast<unsigned char>(l[end]));
        if (left && right) return true;
      }
    }
    return false;
  }

  // The step and epoch counters, under the names the libraries give them (knowledge.h; one
  // table for the auditor and here).
  void counters(size_t tree, const Value& d, const std::string& path) {
    // Composer's State keeps them in timestamp {"Timestamp": {epoch, batch, ...}}: its step is
    // `batch` (its `iteration` counts something else and stays 0).
    if (const Value* ts = d.get("Timestamp"); ts != nullptr && ts->kind == Kind::kDict) {
      const Value* b = ts->get("batch");
      const Value* e = ts->get("epoch");
      if (b != nullptr && b->kind == Kind::kInt && !r_.global_step) {
        r_.global_step = b->i;
        r_.counters_path = (path.empty() ? "" : path + ".") + "Timestamp.batch";
        r_.counters_tree = tree;
      }
      if (e != nullptr && e->kind == Kind::kInt && !r_.epoch) r_.epoch = e->as_number();
    }
    for (const char* k : step_counter_keys()) {
      const Value* v = d.get(k);
      if (v == nullptr || r_.global_step) continue;
      if (v->kind == Kind::kInt) {
        r_.global_step = v->i;
      } else if (v->kind == Kind::kTensor && v->tensor->numel() == 1 && scalar_) {
        if (auto x = scalar_(tree, *v->tensor)) r_.global_step = std::llround(*x);
      }
      if (r_.global_step) {
        r_.counters_path = path.empty() ? k : path + "." + k;
        r_.counters_tree = tree;
      }
    }
    for (const char* k : epoch_counter_keys()) {
      const Value* v = d.get(k);
      if (v != nullptr && (v->kind == Kind::kInt || v->kind == Kind::kFloat) && !r_.epoch)
        r_.epoch = v->as_number();
    }
  }

  void take_cuda(size_t tree, const Value* v, const std::string& path) {
    if (!is_cuda_rng_state(v)) return;
    r_.rng_cuda.push_back(Found{v, tree, path, *keys_});
  }

  static std::vector<std::string> with(std::vector<std::string> keys, const std::string& k) {
    keys.push_back(k);
    return keys;
  }

  void more(size_t tree, const Value& d, const std::string& path, const std::string& as) {
    r_.more.push_back(Found{&d, tree, path, *keys_});
    r_.more_as.push_back(as);
  }

  const ScalarRead& scalar_;
  Routing& r_;
  const std::vector<std::string>* keys_ = nullptr;  // of the dict being classified
  Found best_model_;
  size_t best_count_ = 0;
  bool best_averaged_ = false;
};

}  // namespace

std::string source_path(const std::string& label, const std::string& path) {
  if (label.empty()) return path.empty() ? "(top level)" : path;
  return path.empty() ? label : label + ":" + path;
}

Routing route(const std::vector<SourceTree>& trees, const ScalarRead& scalar) {
  Routing r;
  Router router(scalar, &r);
  for (size_t i = 0; i < trees.size(); ++i) {
    if (trees[i].root == nullptr) continue;
    router.walk(i, *trees[i].root);
    router.devices(*trees[i].root);
  }
  router.finish();
  return r;
}

}  // namespace ckpt::verify::convert
