// The auditor's reader for ckpt's own format (docs/format.md): a run directory (its newest
// committed checkpoint), a step directory, or one rank file. It checks the commit record, the
// manifest against the file without trusting HDF5 (sizes, extents, offsets, attribute digest),
// and with --deep every file hash and tensor hash, then maps the component groups onto the
// auditor's CheckpointView. An uncommitted step directory is reported, never silently used.
#include "verify/ours/ours_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ckpt/format/component.h"
#include "ckpt/format/manifest.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/loader/sampler_node.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/global_tensor.h"
#include "ckpt/store/hdf5_view.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "verify/ours/index_check.h"
#include "verify/ours/torch_layout.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {
namespace {

// A rank file's HDF5 structure, trusting nothing: on an object store through a local view of
// its structural bytes (the manifest's gaps when the manifest decodes, else the whole object).
Result<Node> raw_structure(Env* env, const std::string& step_dir, int64_t rank) {
  const std::string path = path_join(step_dir, rank_file_name(rank));
  auto m = store::read_manifest(env, step_dir, rank);
  CKPT_ASSIGN_OR_RETURN(auto view, store::hdf5_view(env, path, m.is_ok() ? &*m : nullptr));
  return h5::read_structure(view->path(), nullptr);
}

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

TensorInfo info(const std::string& name, const Tensor& t, const std::string& file,
                const std::string& record) {
  TensorInfo ti;
  ti.name = name;
  ti.dtype = t.dtype;
  ti.shape = t.shape;
  ti.device = "cpu";  // ckpt stores host bytes; the device the run used is in /rng
  ti.file = file;
  ti.record = record;
  ti.nbytes = t.nbytes;
  return ti;
}

// A piece of a global tensor (format version 2): which, of what, or who writes it.
std::string box_summary(const BoxOf& box, const std::vector<int64_t>& sizes) {
  const std::string global = shape_text(box.global_shape);
  if (box.owner >= 0)
    return box.placement + " tensor of global shape " + global + ", written by rank " +
           std::to_string(box.owner);
  const bool fits =
      box.offsets.size() == box.global_shape.size() && sizes.size() == box.global_shape.size();
  return "this rank's " + box.placement + " box " +
         (fits ? store::extent_string(store::make_extent(box.offsets, sizes)) : std::string("?")) +
         " of global shape " + global + " (INDEX lists every rank's)";
}

InspectNode inspect(const Node& n, const std::string& name) {
  InspectNode out;
  out.name = name;
  out.kind = "group";
  for (const auto& [k, v] : n.attrs) {
    InspectNode a;
    a.name = k;
    a.kind = "attr";
    a.summary = std::visit(
        [](const auto& x) -> std::string {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>)
            return x ? "true" : "false";
          else if constexpr (std::is_same_v<T, int64_t>)
            return std::to_string(x);
          else if constexpr (std::is_same_v<T, double>) {
            char b[32];
            std::snprintf(b, sizeof b, "%.9g", x);
            return b;
          } else if constexpr (std::is_same_v<T, std::string>)
            return "\"" + x.substr(0, 80) + "\"";
          else
            return "[" + std::to_string(x.size()) + " items]";
        },
        v);
    out.children.push_back(std::move(a));
  }
  for (const auto& [k, t] : n.tensors) {
    InspectNode c;
    c.name = k;
    c.kind = "tensor";
    c.dtype = dtype_name(t.dtype);
    c.shape = t.shape;
    c.nbytes = t.nbytes;
    c.summary = t.alias_of.empty()
                    ? std::string(dtype_name(t.dtype)) + " " + std::to_string(t.nbytes) + " B"
                    : "alias of " + t.alias_of;
    if (t.box) c.summary += "; " + box_summary(*t.box, t.shape);
    out.children.push_back(std::move(c));
  }
  for (const auto& [k, child] : n.children) out.children.push_back(inspect(child, k));
  return out;
}

// Deep checks of an optimizer's moments: all-zero and non-finite float32/float64 tensors.
void scan_moment(const std::string& name, const Tensor& t, OptimizerPart* opt) {
  if (t.data == nullptr || t.nbytes == 0) return;
  bool all_zero = true, finite = true;
  if (t.dtype == DType::kFloat32) {
    const float* p = static_cast<const float*>(t.data);
    for (size_t i = 0; i < t.nbytes / 4; ++i) {
      all_zero = all_zero && p[i] == 0.0f;
      finite = finite && std::isfinite(p[i]);
    }
  } else if (t.dtype == DType::kFloat64) {
    const double* p = static_cast<const double*>(t.data);
    for (size_t i = 0; i < t.nbytes / 8; ++i) {
      all_zero = all_zero && p[i] == 0.0;
      finite = finite && std::isfinite(p[i]);
    }
  } else {
    return;
  }
  if (all_zero) opt->zero_moments.insert(name);
  if (!finite) opt->nonfinite.insert(name);
}

// The loader cursor a run restored last before it saved a checkpoint: journal.jsonl's last
// "restore" event ({"step", "loader": {"epoch", "position"}}) before the "save" event of that
// checkpoint. The cursor is counted from there, at the global batch the checkpoint was saved
// with: a restore at another world size changes the global batch, so counting from step 0 would
// call a correct resharded resume "reset".
struct CursorAnchor {
  int64_t step = 0;
  loader::LoaderCursor cursor;
};

// `journal`: the run directory's events (null when it has none that read).
std::optional<CursorAnchor> cursor_anchor(const std::vector<nlohmann::json>* journal,
                                          const std::string& step_dir) {
  if (journal == nullptr) return std::nullopt;
  const std::string name = path_basename(step_dir);
  std::optional<CursorAnchor> last, found;
  for (const nlohmann::json& e : *journal) {
    const std::string event = e.value("event", "");
    if (event == "restore" && e.contains("loader") && e["loader"].is_object() &&
        e.contains("step") && e["step"].is_number_integer()) {
      const nlohmann::json& l = e["loader"];
      if (!l.contains("epoch") || !l["epoch"].is_number_unsigned() || !l.contains("position") ||
          !l["position"].is_number_unsigned())
        continue;
      last = CursorAnchor{e["step"].get<int64_t>(),
                          {l["epoch"].get<uint64_t>(), l["position"].get<uint64_t>()}};
    } else if (event == "save" && e.value("checkpoint", "") == name) {
      found = last;  // the newest save of this checkpoint (a re-save replaces it)
    }
  }
  return found;
}

// Our sampler's cursor is a function of the global step (grad_accum_steps global batches per
// step): counted from step 0 when the run never restored a loader, else from the cursor it
// restored last (`anchor`) within that epoch. A cursor that disagrees means the loader was reset
// or skipped. Past an epoch's end after a restore the check is not made (a resharded epoch's
// last step may be partial).
void check_cursor(const Node& root, const std::string& file,
                  const std::optional<CursorAnchor>& anchor, CheckpointView* v) {
  const Node* l = root.find_child("loader");
  const Node* t = root.find_child("train");
  if (l == nullptr || t == nullptr) return;
  auto sc = loader::sampler_from_node(*l);
  if (!sc.is_ok()) {
    v->findings.push_back(
        {Severity::kError, AuditComponent::kLoader, file + ": " + sc.status().message(), true});
    return;
  }
  auto sampler = loader::ResumableSampler::create(sc->first, 0);
  if (!sampler.is_ok()) {
    v->findings.push_back({Severity::kError, AuditComponent::kLoader,
                           file + ": " + sampler.status().message(), true});
    return;
  }
  // An optimizer step consumes grad_accum_steps global batches (docs/format.md, "journal"), and
  // grad_accum_pos more were drawn for the step in progress.
  const int64_t global_step = t->get_int("global_step");
  const int64_t accum = std::max<int64_t>(1, t->get_int("grad_accum_steps", 1));
  const int64_t pos = t->get_int("grad_accum_pos", 0);
  if (global_step < 0 || pos < 0 || pos >= accum) return;
  const __int128 batches = static_cast<__int128>(global_step) * accum + pos;
  if (batches > std::numeric_limits<int64_t>::max()) return;
  const int64_t steps = static_cast<int64_t>(batches);
  const uint64_t spe = sampler->steps_per_epoch();
  if (spe == 0) return;
  const uint64_t gb = sc->first.global_batch();
  loader::LoaderCursor want{static_cast<uint64_t>(steps) / spe,
                            (static_cast<uint64_t>(steps) % spe) * gb};
  std::string since;
  if (anchor) {
    const __int128 drawn =
        (static_cast<__int128>(global_step) - anchor->step) * accum + pos;  // batches since
    const __int128 at = static_cast<__int128>(anchor->cursor.position) + drawn * gb;
    if (drawn < 0 || at >= static_cast<__int128>(sc->first.dataset_size)) return;
    want = {anchor->cursor.epoch, static_cast<uint64_t>(at)};
    since = ", counted from the cursor restored at step " + std::to_string(anchor->step) +
            " (epoch " + std::to_string(anchor->cursor.epoch) + " position " +
            std::to_string(anchor->cursor.position) + ", journal.jsonl)";
  }
  const loader::LoaderCursor& got = sc->second;
  const bool same = got == want || (sampler->at_epoch_end(got) && want.position == 0 &&
                                    want.epoch == got.epoch + 1);
  if (!same) {
    v->findings.push_back(
        {Severity::kError, AuditComponent::kLoader,
         file + ": loader cursor epoch " + std::to_string(got.epoch) + " position " +
             std::to_string(got.position) + " but global step " + std::to_string(global_step) +
             (accum > 1 || pos > 0
                  ? " (" + std::to_string(steps) + " batches with gradient accumulation " +
                        std::to_string(accum) + ")"
                  : std::string()) +
             " implies epoch " + std::to_string(want.epoch) + " position " +
             std::to_string(want.position) + since +
             " (the loader was reset or skipped on a restart)",
         true});
  }
}

// The rank-file group that holds an audited component (rng_cpu → /rng, counters → /train).
const Node* group_of(const Node& root, AuditComponent c) {
  return root.find_child(component_name(stored_in(c)));
}

// With `values` (ckpt diff --deep) every tensor read carries its bytes (hash-checked by read_rank).
void map_model(const Node& m, const std::string& file, bool values, CheckpointView* v) {
  v->model.found = !m.tensors.empty();
  v->model.source = file;
  for (const auto& [k, t] : m.tensors) {
    v->model.tensors.push_back(info(k, t, file, "/model/" + k));
    if (values && (t.data != nullptr || t.nbytes == 0)) {
      v->model.tensors.back().values = std::make_shared<const std::string>(
          static_cast<const char*>(t.data), static_cast<const char*>(t.data) + t.nbytes);
    }
  }
  v->model.evidence = file + ": /model holds " + std::to_string(m.tensors.size()) + " tensors";
}

void map_optimizer(const Node& o, const std::string& file, bool deep, CheckpointView* v) {
  OptimizerPart& opt = v->optimizer;
  opt.found = true;
  opt.count = 1;
  opt.source = file;
  opt.kind = o.get_string("type");
  std::map<std::string, int64_t> index;  // parameter name → position in param_names
  const auto names = o.get_strings("param_names");
  for (size_t i = 0; i < names.size(); ++i) index[names[i]] = static_cast<int64_t>(i);
  if (const Node* groups = o.find_child("groups")) {
    for (const auto& [gname, g] : groups->children) {
      OptimizerPart::Group group;
      for (const auto& p : g.get_strings("params")) {
        auto it = index.find(p);
        group.params.push_back(it == index.end() ? -1 : it->second);
      }
      if (g.find_attr("lr")) group.lr = g.get_double("lr");
      if (g.find_attr("momentum")) group.momentum = g.get_double("momentum");
      opt.groups.push_back(std::move(group));
    }
  }
  if (const Node* state = o.find_child("state")) {
    for (const auto& [pname, ps] : state->children) {
      OptimizerPart::ParamState st;
      auto it = index.find(pname);
      st.id = it == index.end() ? -1 : it->second;
      for (const auto& [k, t] : ps.tensors) {
        st.tensors[k] = info(k, t, file, "/optimizer/state/" + pname + "/" + k);
        if (deep) scan_moment(pname + "." + k, t, &opt);
      }
      if (ps.find_attr("step")) st.step = static_cast<double>(ps.get_int("step"));
      opt.state.push_back(std::move(st));
    }
  }
  opt.evidence = file + ": /optimizer " + opt.kind + ", " + std::to_string(opt.groups.size()) +
                 " group(s), state for " + std::to_string(opt.state.size()) + " of " +
                 std::to_string(names.size()) + " parameters";
}

void map_scheduler(const Node& s, const std::string& file, CheckpointView* v) {
  SchedulerPart& sp = v->scheduler;
  sp.found = true;
  sp.source = file;
  sp.kind = s.get_string("kind");
  sp.last_epoch = s.get_int("last_step");
  sp.base_lrs = {s.get_double("base_lr")};
  sp.last_lr = {s.get_double("last_lr")};
  sp.evidence = file + ": /scheduler " + sp.kind + " at last_step " +
                std::to_string(*sp.last_epoch) + " (closed-form spec stored)";
}

// /rng holds both audited halves: rng_cpu (/rng/cpu/state) and rng_cuda (/rng/cuda), plus the
// devices the run saw.
void map_rng(const Node& r, const std::string& file, CheckpointView* v) {
  if (const Node* cpu = r.find_child("cpu")) {
    if (const Tensor* st = cpu->find_tensor("state")) {
      v->rng_cpu.found = true;
      v->rng_cpu.nbytes = static_cast<int64_t>(st->nbytes);
      v->rng_cpu.source = file;
      v->rng_cpu.evidence = file + ": /rng/cpu/state uint8 [" + std::to_string(st->nbytes) + "]";
    }
  }
  const bool cuda = r.get_bool("cuda_available");
  v->devices_known = true;
  v->devices.insert("cpu");
  if (cuda) {
    for (int64_t i = 0; i < r.get_int("cuda_device_count"); ++i) {
      v->devices.insert("cuda:" + std::to_string(i));
    }
  }
  if (const Node* c = r.find_child("cuda")) {
    v->rng_cuda.found = !c->tensors.empty();
    v->rng_cuda.source = file;
    for (const auto& [k, t] : c->tensors)
      v->rng_cuda.nbytes.push_back(static_cast<int64_t>(t.nbytes));
    v->rng_cuda.evidence =
        file + ": /rng/cuda holds " + std::to_string(c->tensors.size()) + " device state(s)";
  } else {
    v->rng_cuda.evidence = file + ": /rng records cuda_available=" + (cuda ? "true" : "false");
  }
}

void map_loader(const Node& l, const std::string& file, CheckpointView* v) {
  LoaderPart& lp = v->loader;
  lp.found = true;
  lp.source = file;
  lp.kind = "ckpt cursor";
  lp.epoch = l.get_int("epoch");
  // Samples consumed since the run began: whole epochs plus the position in this one.
  const int64_t per_epoch =
      l.get_bool("drop_last")
          ? l.get_int("dataset_size") /
                std::max<int64_t>(1, l.get_int("batch_size") * l.get_int("world_size")) *
                l.get_int("batch_size") * l.get_int("world_size")
          : l.get_int("dataset_size");
  lp.samples = *lp.epoch * per_epoch + l.get_int("position");
  lp.evidence = file + ": /loader epoch " + std::to_string(*lp.epoch) + ", position " +
                std::to_string(l.get_int("position")) + " of " +
                std::to_string(l.get_int("dataset_size")) + " (seed " +
                std::to_string(l.get_int("seed")) + ", world_size " +
                std::to_string(l.get_int("world_size")) + ", batch " +
                std::to_string(l.get_int("batch_size")) + ")";
}

// /train holds both audited counters and the grad scaler's loss scale.
void map_train(const Node& root, const Node& t, const std::string& file,
               const std::optional<CursorAnchor>& anchor, CheckpointView* v) {
  CountersPart& c = v->counters;
  c.found = true;
  c.source = file;
  c.global_step = t.get_int("global_step");
  c.epoch = static_cast<double>(t.get_int("epoch"));
  c.evidence = file + ": /train global_step " + std::to_string(*c.global_step) + ", epoch " +
               std::to_string(t.get_int("epoch")) + ", samples_seen " +
               std::to_string(t.get_int("samples_seen"));
  check_cursor(root, file, anchor, v);
  // A framework that steps the scheduler k times per optimizer step records k (Accelerate: once
  // per process; python/ckpt/integrations/_common.py).
  const int64_t k =
      t.find_attr("scheduler_steps_per_step") ? t.get_int("scheduler_steps_per_step") : 1;
  if (k > 1 && k <= 65536 && v->scheduler.found) {
    v->scheduler.steps_per_step = k;
    for (SchedulerPart& s : v->more_schedulers) s.steps_per_step = k;
    v->scheduler.evidence += "; /train scheduler_steps_per_step " + std::to_string(k) +
                             ": the framework steps it " + std::to_string(k) +
                             " times per optimizer step";
  }
  if (t.find_attr("config_digest")) v->config_digest = t.get_string("config_digest");
  if (t.find_attr("env_digest")) v->environment_digest = t.get_string("env_digest");
  if (t.find_attr("amp_loss_scale")) {
    v->mixed_precision = true;
    v->mixed_precision_evidence = file + ": /train/amp_loss_scale";
    v->grad_scaler.found = true;
    v->grad_scaler.scale = t.get_double("amp_loss_scale");
    v->grad_scaler.evidence =
        file + ": /train amp_loss_scale " + std::to_string(*v->grad_scaler.scale);
  }
}

// One rank file's groups onto the view, one step per group.
void map_components(const Node& root, const std::string& file, bool deep, bool values,
                    const std::optional<CursorAnchor>& anchor, CheckpointView* v) {
  if (const Node* m = group_of(root, AuditComponent::kModel)) map_model(*m, file, values, v);
  // The C++ adapter's layout, or torch's own state_dict layout (the Python package).
  if (const Node* o = group_of(root, AuditComponent::kOptimizer)) {
    is_torch_layout(*o) ? detect_torch_layout(*o, "optimizer", file, v)
                        : map_optimizer(*o, file, deep, v);
  }
  if (const Node* s = group_of(root, AuditComponent::kScheduler)) {
    is_torch_layout(*s) ? detect_torch_layout(*s, "scheduler", file, v)
                        : map_scheduler(*s, file, v);
  }
  if (const Node* r = group_of(root, AuditComponent::kRngCpu)) map_rng(*r, file, v);
  if (const Node* l = group_of(root, AuditComponent::kLoader)) map_loader(*l, file, v);
  if (const Node* t = group_of(root, AuditComponent::kCounters))
    map_train(root, *t, file, anchor, v);
}

class OursReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kCkptH5; }

  int probe(Env* env, const std::string& path) const override {
    if (env->is_dir(path)) {
      if (env->exists(path_join(path, "COMMIT.json")) ||
          env->exists(path_join(path, "rank-00000.manifest.json")))
        return 100;
      if (env->exists(path_join(path, "LATEST"))) return 100;
      auto names = env->list_dir(path);
      if (names.is_ok()) {
        for (const auto& n : *names) {
          int64_t step;
          if (parse_step_dir_name(n, &step)) return 60;
        }
      }
      return 0;
    }
    const std::string base = path_basename(path);
    if (base.rfind("rank-", 0) == 0 && ends_with(base, ".h5")) return 90;
    return 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CheckpointView view;
    view.path = path;
    view.format = CheckpointFormat::kCkptH5;
    std::string step_dir = path;
    int64_t rank = 0;
    bool run_dir = false;
    if (!env->is_dir(path)) {  // one rank file: its directory is the checkpoint
      step_dir = path_dirname(path);
      const std::string base = path_basename(path);
      rank = std::atoll(base.substr(5, 5).c_str());
    } else if (!env->exists(path_join(path, "COMMIT.json")) &&
               !env->exists(path_join(path, "rank-00000.manifest.json"))) {
      CKPT_ASSIGN_OR_RETURN(step_dir, latest_of_run(env, path, &view));
      run_dir = true;
    }
    auto commit = store::read_commit(env, step_dir);
    if (!commit.is_ok()) {
      if (commit.status().code() == Code::kNotFound) {
        return corrupt(
            step_dir +
            ": no COMMIT.json — an interrupted save, not a checkpoint (restore skips it)");
      }
      return commit.status();
    }
    const std::string file = path_join(step_dir, rank_file_name(rank));
    CKPT_ASSIGN_OR_RETURN(
        Node root, read_tree(env, step_dir, rank, options.deep, options.tensor_values, &view));
    std::vector<std::string> damaged;
    if (options.deep) damaged = deep_verify(env, step_dir, &view);
    const IndexCheck ic = check_index(env, step_dir, *commit, damaged);
    note_index(ic, step_dir, &view);
    check_groups(root, file, commit->components, &view);
    // The run directory's journal, read once: the cursor's anchor and the run's history.
    const auto journal = store::read_journal(env, path_dirname(step_dir));
    const std::vector<nlohmann::json>* events = journal.is_ok() ? &*journal : nullptr;
    map_components(root, file, options.deep, options.tensor_values, cursor_anchor(events, step_dir),
                   &view);
    globalize_model(env, step_dir, ic, options.tensor_values, &view);
    if (run_dir) note_history(env, path, rank, events, &view);
    if (options.inspect) view.contents = inspect(root, step_dir);
    return view;
  }

 private:
  // A run directory: its newest committed checkpoint (uncommitted ones are findings).
  static Result<std::string> latest_of_run(Env* env, const std::string& path,
                                           CheckpointView* view) {
    auto all = store::list_checkpoints(env, path);
    if (!all.is_ok()) return all.status();
    for (const auto& e : *all) {
      if (!e.committed) {
        view->findings.push_back(
            {Severity::kWarning, std::nullopt,
             e.dir + " is not a committed checkpoint (" + e.problem + "); restore skips it",
             false});
      }
    }
    auto latest = store::find_latest(env, path);
    if (!latest.is_ok()) {
      return corrupt(path + ": a ckpt run directory without any committed checkpoint");
    }
    if (!latest->note.empty())
      view->findings.push_back({Severity::kWarning, std::nullopt, latest->note, false});
    for (const auto& d : latest->damaged_newer) {
      view->findings.push_back(
          {Severity::kError, std::nullopt,
           d.dir + " is damaged (" + d.problem +
               "): a restore refuses the run until it is repaired or removed, or falls back "
               "past it when allowed",
           false});
    }
    view->findings.push_back({Severity::kInfo, std::nullopt,
                              "auditing the newest committed checkpoint " + latest->dir, false});
    return latest->dir;
  }

  // The rank file's tree, metadata only unless --deep (the optimizer's bytes) or `values` (the
  // model's, for ckpt diff --deep). When the file no longer matches its
  // manifest (a group deleted behind the library's back), the mismatch is an error finding and
  // the tree is read as the file holds it, so every component is still judged.
  static Result<Node> read_tree(Env* env, const std::string& step_dir, int64_t rank, bool deep,
                                bool values, CheckpointView* view) {
    // A FIFO or device named like the rank file is refused as what it is, before its size (0)
    // is compared with the manifest's; h5::read_structure refuses it too, never opening it.
    const std::string file = path_join(step_dir, rank_file_name(rank));
    auto kind = env->entry_kind(file);
    if (kind.is_ok() && *kind == FileKind::kOther) {
      return corrupt(file + ": not a regular file (a FIFO, socket or device is never read)");
    }
    store::ReadOptions ro;
    if (deep) ro.components.insert("optimizer");
    if (values) ro.components.insert("model");
    ro.metadata_only = ro.components.empty();
    auto root = store::read_rank(env, step_dir, rank, ro);
    if (root.is_ok() || root.status().code() != Code::kCorrupt) return root;
    view->findings.push_back({Severity::kError, std::nullopt, root.status().message(), false});
    if (!ro.metadata_only) {
      ro.components.clear();
      ro.metadata_only = true;
      auto meta = store::read_rank(env, step_dir, rank, ro);
      if (meta.is_ok()) return meta;
    }
    auto raw = raw_structure(env, step_dir, rank);
    if (!raw.is_ok()) return root.status();
    return raw;
  }

  // Every byte checked; the rank files whose check failed.
  static std::vector<std::string> deep_verify(Env* env, const std::string& step_dir,
                                              CheckpointView* view) {
    auto rep = store::verify_checkpoint(env, step_dir);
    for (const auto& p : rep.problems)
      view->findings.push_back({Severity::kError, std::nullopt, p, false});
    if (rep.problems.empty()) {
      view->findings.push_back({Severity::kInfo, std::nullopt,
                                "verified " + std::to_string(rep.files) + " files, " +
                                    std::to_string(rep.tensors) + " tensor hashes",
                                false});
    }
    view->bytes_read = rep.bytes;
    return rank_files_named(rep.problems);
  }

  // A sharded checkpoint's INDEX (index_check.h): its problems are errors; the tensors a missing
  // or damaged rank file loses are charged to their component (/model → model, ...), which is
  // then inconsistent, never present.
  static void note_index(const IndexCheck& ic, const std::string& step_dir, CheckpointView* view) {
    if (!ic.present) return;
    const std::string where = path_join(step_dir, "INDEX") + ": ";
    std::set<std::string> loss_lines;
    for (size_t i = 0; i < ic.loss.tensors.size() && i < ic.loss_lines.size(); ++i) {
      const std::string& tensor = ic.loss.tensors[i].tensor;
      const size_t end = tensor.find('/', 1);
      const auto c = audited(tensor.substr(1, end == std::string::npos ? end : end - 1));
      loss_lines.insert(where + ic.loss_lines[i]);
      view->findings.push_back({Severity::kError, c, where + ic.loss_lines[i], c.has_value()});
    }
    for (const std::string& p : ic.problems) {
      if (loss_lines.count(p) == 0)
        view->findings.push_back({Severity::kError, std::nullopt, p, false});
    }
    if (ic.decoded && ic.tiled) {
      view->findings.push_back({Severity::kInfo, std::nullopt,
                                where + std::to_string(ic.tensors) + " tensors, " +
                                    std::to_string(ic.boxes) + " boxes in " +
                                    std::to_string(ic.files) +
                                    " rank files: the boxes of every tensor tile it exactly",
                                false});
    }
  }

  // The audited component a group name stands for (its first, for /rng and /train).
  static std::optional<AuditComponent> audited(const std::string& group) {
    for (AuditComponent c : kAuditComponents) {
      if (group == component_name(stored_in(c))) return c;
    }
    return std::nullopt;
  }

  // The commit record, the root's component list and the groups the file really holds.
  static void check_groups(const Node& root, const std::string& file,
                           const std::vector<std::string>& committed, CheckpointView* view) {
    const auto comps = root.get_strings("components");
    if (comps != committed) {
      view->findings.push_back({Severity::kError, std::nullopt,
                                file + ": components " + join(comps) +
                                    " differ from the commit record's " + join(committed),
                                false});
    }
    for (const auto& g : committed) {
      if (root.find_child(g) != nullptr) continue;
      const std::string why = file + ": the commit record lists " + g + " but the file has no /" +
                              g + " group (removed after the save)";
      if (g == "optimizer") view->optimizer.evidence = why;
      if (g == "scheduler") view->scheduler.evidence = why;
      view->findings.push_back({Severity::kError, audited(g), why, false});
    }
  }

  // A sharded checkpoint (format version 2): rank 0's file holds only its own boxes of the
  // sharded tensors, so each model tensor the INDEX lists takes the global dtype and shape from
  // it, and with `values` (diff --deep) its elements assembled from every rank file's boxes, each
  // box's XXH3 checked (a box that fails is an error finding, and the tensor has no values). A
  // tensor that lost boxes with a missing file has no values either (its loss is reported).
  static void globalize_model(Env* env, const std::string& step_dir, const IndexCheck& ic,
                              bool values, CheckpointView* view) {
    if (!ic.decoded || ic.index == nullptr) return;
    const store::GlobalIndex& index = *ic.index;
    const std::set<std::string> lost(ic.damaged_files.begin(), ic.damaged_files.end());
    store::GlobalTensorReader reader(env, step_dir);
    for (TensorInfo& t : view->model.tensors) {
      const int64_t i = index.find_tensor(t.record);
      if (i < 0) continue;
      const store::IndexTensor& it = index.tensor(static_cast<size_t>(i));
      t.dtype = it.dtype;
      t.shape.assign(it.shape.begin(), it.shape.begin() + it.ndim);
      uint64_t numel = 1;
      for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
      t.nbytes = numel * dtype_size(it.dtype);
      t.values = nullptr;
      const std::vector<store::TensorPiece> pieces = store::index_pieces(index, i);
      bool whole = values;
      for (const store::TensorPiece& p : pieces) whole = whole && lost.count(p.file) == 0;
      if (!whole) continue;
      std::string bytes(t.nbytes, '\0');
      Status s = reader.assemble(t.record, it.dtype, t.shape, pieces, bytes.data());
      if (!s.is_ok()) {
        view->findings.push_back({Severity::kError, AuditComponent::kModel, s.message(), true});
        continue;
      }
      t.values = std::make_shared<const std::string>(std::move(bytes));
    }
  }

  // A run directory's history: for each component not fine in the newest checkpoint, since which
  // step it has been missing. The committed checkpoints say what each rank file really holds;
  // journal.jsonl's save events ({"step", "components"}) cover the steps whose checkpoints
  // retention has removed since. A committed file wins over the journal for its step.
  static void note_history(Env* env, const std::string& run, int64_t rank,
                           const std::vector<nlohmann::json>* journal, CheckpointView* view) {
    auto all = store::list_checkpoints(env, run);
    if (!all.is_ok()) return;
    struct Saved {
      std::set<std::string> groups;
      bool from_journal = false;
    };
    std::map<int64_t, Saved> timeline;
    if (journal != nullptr) {
      for (const auto& e : *journal) {
        if (e.value("event", "") != "save" || !e.contains("step") ||
            !e["step"].is_number_integer() || !e.contains("components") ||
            !e["components"].is_array())
          continue;
        Saved s{{}, true};
        for (const auto& c : e["components"])
          if (c.is_string()) s.groups.insert(c.get<std::string>());
        timeline[e["step"].get<int64_t>()] = s;
      }
    }
    for (const auto& e : *all) {
      if (!e.committed) continue;
      auto tree = raw_structure(env, e.dir, rank);
      if (!tree.is_ok()) continue;
      Saved s;
      for (const auto& [g, child] : tree->children) s.groups.insert(g);
      timeline[e.step] = s;
    }
    std::map<std::string, std::pair<int64_t, bool>> since;  // group → (first step, from journal)
    std::set<std::string> seen_groups;
    for (const auto& [step, saved] : timeline) {
      seen_groups.insert(saved.groups.begin(), saved.groups.end());
      for (const auto& g : seen_groups) {
        if (saved.groups.count(g) == 0) {
          since.emplace(g, std::make_pair(step, saved.from_journal));
        } else {
          since.erase(g);
        }
      }
    }
    for (const auto& [g, first] : since) {
      view->findings.push_back(
          {Severity::kWarning, audited(g),
           "run history: /" + g + " has been missing since step " + std::to_string(first.first) +
               (first.second ? " (journal.jsonl's save event; that checkpoint is gone, removed by "
                               "retention)"
                             : " (committed checkpoints and journal.jsonl of " + run + ")"),
           false});
    }
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_ours_reader() { return std::make_unique<OursReader>(); }

}  // namespace ckpt::verify
