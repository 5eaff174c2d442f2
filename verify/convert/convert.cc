// The steps of convert_checkpoint, in order: check OUT_DIR, open the source (sources.h), route
// its parts to components (route.h), encode each component (encode.h), write rank 0 and commit
// (ckpt/store), report.
#include "verify/convert/convert.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "ckpt/format/component.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/rank_root.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "verify/convert/encode.h"
#include "verify/convert/sources.h"
#include "verify/formats/torch_file.h"

namespace ckpt::verify::convert {
namespace {

Status check_out_dir(Env* env, const std::string& out) {
  // "" is no directory: a path_join() with it would write LOCK and the run into the working
  // directory.
  if (out.empty()) return invalid_argument("OUT_DIR is empty: name the new run directory");
  if (!env->exists(out)) return Status::ok();
  if (!env->is_dir(out)) return invalid_argument(out + ": exists and is not a directory");
  CKPT_ASSIGN_OR_RETURN(auto names, env->list_dir(out));
  if (!names.empty()) {
    return invalid_argument(out + ": not empty (holds \"" + names.front() +
                            "\"); convert writes a new run directory and never overwrites one");
  }
  return Status::ok();
}

// An empty container: only its kind (and length) tags.
bool holds_nothing(const Node& n) {
  if (!n.tensors.empty() || !n.children.empty()) return false;
  for (const auto& [k, a] : n.attrs) {
    if (k != "ckpt.kind" && k != "ckpt.len") return false;
  }
  return true;
}

// What routing found, turned into the rank file's groups.
class Assembler {
 public:
  Assembler(const Source& s, const Routing& r, EncodeTally* tally, ConvertReport* rep)
      : s_(s), r_(r), tally_(*tally), rep_(*rep) {}

  Status run(Node* root) {
    CKPT_RETURN_IF_ERROR(container(r_.model, "/model", "model state dict", root));
    CKPT_RETURN_IF_ERROR(container(r_.optimizer, "/optimizer", "optimizer state dict", root));
    CKPT_RETURN_IF_ERROR(container(r_.scheduler, "/scheduler", "LR scheduler state dict", root));
    CKPT_RETURN_IF_ERROR(rng(root));
    train(root);
    CKPT_RETURN_IF_ERROR(extra(root));
    for (size_t i = 0; i < r_.more.size(); ++i) {
      const Found& f = r_.more[i];
      std::string to = "/extra";
      if (s_.trees.size() > 1) to += "/" + s_.trees[f.tree].label;
      for (const auto& k : f.keys) to += "/" + k;
      mapped(f, to, r_.more_as[i]);
    }
    return Status::ok();
  }

 private:
  std::string where(const Found& f) const { return source_path(s_.trees[f.tree].label, f.path); }
  // The same, as the encoder's starting path (a labelled tree's root ends with ':').
  std::string start(const Found& f) const {
    const std::string& label = s_.trees[f.tree].label;
    if (f.path.empty()) return label.empty() ? "" : label + ":";
    return source_path(label, f.path);
  }
  void mapped(const Found& f, const std::string& to, const std::string& as) {
    rep_.mapped.push_back({where(f), to, as});
  }
  TreeEncoder encoder(size_t tree) { return TreeEncoder(s_.fetch[tree], &r_.moved, &tally_); }

  Status container(const std::optional<Found>& f, const std::string& group, const std::string& as,
                   Node* root) {
    if (!f) return Status::ok();
    Node n;
    CKPT_ASSIGN_OR_RETURN(bool ok, encoder(f->tree).container(*f->v, start(*f), &n));
    if (!ok) return Status::ok();
    root->children[group.substr(1)] = std::move(n);
    mapped(*f, group, as);
    return Status::ok();
  }

  Status rng(Node* root) {
    if (!r_.rng_cpu && r_.rng_cuda.empty()) return Status::ok();
    Node rng;
    if (r_.rng_cpu) {
      Tensor t;
      CKPT_ASSIGN_OR_RETURN(
          bool ok, encoder(r_.rng_cpu->tree).tensor(*r_.rng_cpu->v, where(*r_.rng_cpu), &t));
      if (ok) {
        rng.child("cpu").tensors["state"] = std::move(t);
        mapped(*r_.rng_cpu, "/rng/cpu/state", "CPU generator state (5056-byte mt19937)");
      }
    }
    CKPT_RETURN_IF_ERROR(python_rng(&rng));
    CKPT_RETURN_IF_ERROR(numpy_rng(&rng));
    int64_t devices = 0;
    for (const Found& f : r_.rng_cuda) {
      Tensor t;
      CKPT_ASSIGN_OR_RETURN(bool ok, encoder(f.tree).tensor(*f.v, where(f), &t));
      if (!ok) continue;
      const std::string to = "/rng/cuda/" + std::to_string(devices);
      rng.child("cuda").tensors[std::to_string(devices++)] = std::move(t);
      mapped(f, to, "CUDA generator state");
    }
    rng.attrs["cuda_available"] = devices > 0 || r_.cuda_devices > 0;
    rng.attrs["cuda_device_count"] = std::max(devices, r_.cuda_devices);
    root->children["rng"] = std::move(rng);
    return Status::ok();
  }

  // Python's random state in the Python package's layout (python/ckpt/_rng.py): version,
  // state (625 ints), gauss.
  Status python_rng(Node* rng) {
    if (!r_.rng_python) return Status::ok();
    const Value& t = *r_.rng_python->v;
    Node py;
    py.attrs["version"] = t.items[0]->i;
    std::vector<int64_t> state;
    for (const Value* x : t.items[1]->items) {
      if (x->kind != Kind::kInt) {
        tally_.unmapped.push_back({where(*r_.rng_python), "Python random state with a non-int"});
        return Status::ok();
      }
      state.push_back(x->i);
    }
    py.attrs["state"] = state;
    if (t.items[2]->kind == Kind::kFloat) {
      py.attrs["gauss"] = t.items[2]->f;
    } else {
      py.attrs["ckpt.none"] = std::vector<std::string>{"gauss"};
    }
    rng->children["python"] = std::move(py);
    mapped(*r_.rng_python, "/rng/python", "Python random state (random.getstate())");
    return Status::ok();
  }

  // numpy's global RandomState in the Python package's layout: kind, keys (uint32[624] widened
  // to int64, as the package stores them: torch has no uint32), pos, has_gauss, cached.
  Status numpy_rng(Node* rng) {
    if (!r_.rng_numpy) return Status::ok();
    const Value& t = *r_.rng_numpy->v;
    const auto pos = t.items[2]->as_int(), has_gauss = t.items[3]->as_int();
    const auto cached = t.items[4]->as_number();
    Tensor keys;
    CKPT_ASSIGN_OR_RETURN(
        bool ok,
        encoder(r_.rng_numpy->tree).tensor(*t.items[1], where(*r_.rng_numpy) + "[1]", &keys));
    if (!ok) return Status::ok();
    if (keys.dtype != DType::kUInt32 || !pos || !has_gauss || !cached) {
      tally_.unmapped.push_back({where(*r_.rng_numpy), "numpy RNG state of an unexpected shape"});
      return Status::ok();
    }
    std::vector<int64_t> wide(keys.nbytes / 4);
    for (size_t i = 0; i < wide.size(); ++i) {
      uint32_t k;
      std::memcpy(&k, static_cast<const char*>(keys.data) + 4 * i, 4);
      wide[i] = k;
    }
    tally_.bytes += wide.size() * 8 - keys.nbytes;  // what is written
    Node np;
    np.attrs["kind"] = t.items[0]->s;
    np.tensors["keys"] = Tensor::copy_of(DType::kInt64, {static_cast<int64_t>(wide.size())},
                                         wide.data(), wide.size() * 8);
    np.attrs["pos"] = *pos;
    np.attrs["has_gauss"] = *has_gauss;
    np.attrs["cached"] = *cached;
    rng->children["numpy"] = std::move(np);
    mapped(*r_.rng_numpy, "/rng/numpy", "numpy global RNG state (np.random.get_state())");
    return Status::ok();
  }

  void train(Node* root) {
    Node t;
    if (r_.global_step) t.attrs["global_step"] = *r_.global_step;
    if (r_.epoch) {
      t.attrs["epoch"] = static_cast<int64_t>(std::floor(*r_.epoch));
      if (*r_.epoch != std::floor(*r_.epoch)) t.attrs["epoch_float"] = *r_.epoch;
    }
    if (r_.global_step || r_.epoch) {
      const std::string at = r_.counters_path.empty() ? "epoch" : r_.counters_path;
      rep_.mapped.push_back({source_path(s_.trees[r_.counters_tree].label, at), "/train",
                             "counters (global_step, epoch)"});
    }
    if (r_.grad_scaler) {
      if (const Value* sc = r_.grad_scaler->v->get("scale"); sc != nullptr && sc->as_number()) {
        t.attrs["amp_loss_scale"] = *sc->as_number();
        mapped(*r_.grad_scaler, "/train/amp_loss_scale",
               "GradScaler scale (the whole state stays in /extra)");
      }
    }
    if (!t.empty()) root->children["train"] = std::move(t);
  }

  // Everything not moved, in its place: one tree's root dict is /extra itself; several trees
  // are /extra/<label>.
  Status extra(Node* root) {
    Node ex;
    bool any = false;
    const bool single = s_.trees.size() == 1;
    if (!single) ex.attrs["ckpt.kind"] = std::string("dict");
    for (size_t i = 0; i < s_.trees.size(); ++i) {
      const Value* v = s_.trees[i].root;
      if (v == nullptr || r_.moved.count(v) != 0) continue;
      const std::string label = s_.trees[i].label.empty() ? "(top level)" : s_.trees[i].label;
      TreeEncoder enc = encoder(i);
      Node n;
      const std::string& l = s_.trees[i].label;
      const bool plain = is_plain(*v);
      // A file that holds one tensor or scalar: {"value": it} with ckpt.plain, as the Python
      // package stores a plain tracked value.
      CKPT_ASSIGN_OR_RETURN(bool ok,
                            enc.container(plain ? wrap(*v) : *v, l.empty() ? "" : l + ":", &n));
      if (!ok) continue;
      if (plain) n.attrs["ckpt.plain"] = true;
      if (holds_nothing(n)) continue;
      rep_.mapped.push_back({label, single ? "/extra" : "/extra/" + label,
                             "the rest of the state, in its place (torch state_dict layout)"});
      if (single) {
        ex = std::move(n);
      } else {
        ex.children[s_.trees[i].label] = std::move(n);
      }
      any = true;
    }
    if (any) root->children["extra"] = std::move(ex);
    return Status::ok();
  }

  static bool is_plain(const Value& v) {
    return v.kind == Kind::kTensor || v.kind == Kind::kBool || v.kind == Kind::kInt ||
           v.kind == Kind::kFloat || v.kind == Kind::kStr || v.kind == Kind::kBytes;
  }
  const Value& wrap(const Value& v) {
    Value* d = wrappers_.make(Kind::kDict);
    Value* key = wrappers_.make(Kind::kStr);
    key->s = "value";
    d->entries.emplace_back(key, &v);
    return *d;
  }

  const Source& s_;
  const Routing& r_;
  EncodeTally& tally_;
  ConvertReport& rep_;
  PickleDoc wrappers_;  // owns the {"value": v} dicts of plain files
};

// The value of a one-element step tensor.
std::optional<double> scalar_of(const Source& s, size_t tree, const TensorRecord& t) {
  auto x = s.fetch[tree](t);
  if (!x.is_ok() || x->nbytes == 0 || x->nbytes > 8) return std::nullopt;
  const void* p = x->data;
  switch (x->dtype) {
    case DType::kFloat32:
      return *static_cast<const float*>(p);
    case DType::kFloat64:
      return *static_cast<const double*>(p);
    case DType::kInt64:
      return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::kInt32:
      return *static_cast<const int32_t*>(p);
    default:
      return std::nullopt;
  }
}

uint64_t total_tensor_bytes(const Value* v, int depth, std::set<const Value*>* seen) {
  if (v == nullptr || depth > 64 || !seen->insert(v).second) return 0;
  if (v->kind == Kind::kTensor) return v->tensor->nbytes();
  uint64_t n = 0;
  for (const Value* x : v->items) n += total_tensor_bytes(x, depth + 1, seen);
  for (const auto& [k, x] : v->entries) n += total_tensor_bytes(x, depth + 1, seen);
  return n;
}

Status write_run(Env* env, const std::string& out, Node* root, ConvertReport* rep) {
  CKPT_RETURN_IF_ERROR(env->make_dirs(out));
  CKPT_ASSIGN_OR_RETURN(auto lock, store::lock_run_dir(env, out));
  // The lock file is ours; anything else appearing now is another writer's.
  CKPT_ASSIGN_OR_RETURN(auto names, env->list_dir(out));
  for (const auto& n : names) {
    if (n != "LOCK") return invalid_argument(out + ": \"" + n + "\" appeared while converting");
  }
  rep->checkpoint = step_dir_name(rep->step);
  const std::string dir = path_join(out, rep->checkpoint);
  CKPT_RETURN_IF_ERROR(env->make_dirs(dir));
  CKPT_RETURN_IF_ERROR(store::write_rank(env, dir, 0, rep->step, 1, root).status());
  return store::commit(env, out, rep->step, 1, rep->components);
}

}  // namespace

Result<ConvertReport> convert_checkpoint(Env* env, const ReaderSet& readers,
                                         const std::string& input, const std::string& out_dir,
                                         const ConvertOptions& options) {
  CKPT_RETURN_IF_ERROR(check_out_dir(env, out_dir));
  CKPT_ASSIGN_OR_RETURN(Source s, open_source(env, readers, input));
  ConvertReport rep;
  rep.input = input;
  rep.output = out_dir;
  rep.format = s.format;
  rep.unmapped = s.unmapped;
  Routing r =
      route(s.trees, [&s](size_t tree, const TensorRecord& t) { return scalar_of(s, tree, t); });
  rep.step = std::max<int64_t>(0, r.global_step.value_or(0));
  if (!check_step(rep.step).is_ok()) {  // data, not usage: exit 65
    return corrupt(input + ": global_step " + std::to_string(rep.step) +
                   " cannot name a ckpt checkpoint (a step is in [0, " + std::to_string(kMaxStep) +
                   "])");
  }

  std::set<const Value*> seen;
  uint64_t total = 0;
  for (const SourceTree& t : s.trees) total += total_tensor_bytes(t.root, 0, &seen);
  ProgressBar bar(options.progress, total, "convert");
  EncodeTally tally;
  tally.progress = [&bar](uint64_t n) { bar.advance(n); };
  Node root;
  CKPT_RETURN_IF_ERROR(Assembler(s, r, &tally, &rep).run(&root));
  rep.unmapped.insert(rep.unmapped.end(), tally.unmapped.begin(), tally.unmapped.end());
  rep.tensors = tally.tensors;
  rep.bytes = tally.bytes;
  for (Component c : kComponents) {
    if (root.find_child(component_name(c)) != nullptr) rep.components.push_back(component_name(c));
  }
  if (rep.components.empty())
    return corrupt(input + ": nothing convertible (no tensors, no state dicts)");
  set_root_attrs({std::string("ckpt ") + kVersion + " convert", "", rep.step, 0, 1, rep.components},
                 &root);
  root.attrs["source_format"] = std::string(format_name(rep.format));
  root.attrs["source_path"] = input;
  CKPT_RETURN_IF_ERROR(write_run(env, out_dir, &root, &rep));
  return rep;
}

}  // namespace ckpt::verify::convert
