// ckpt._core: the Python binding of ckpt's store layer (docs/python.md). Links no libtorch and
// includes no torch header: tensors cross as (data pointer, byte length, dtype name, shape).
//
// Save: Python builds a nested dict {"attrs": {...}, "tensors": {name: (ptr, nbytes, dtype,
// shape)}, "children": {...}}; save_rank() turns it into a ckpt::Node (borrowing the bytes) and
// runs write_rank; commit()/apply_retention() are the commit protocol's steps 3-5.
// Restore: OpenRank(dir, rank).tree is the checked structure (attrs, and (dtype, shape, alias_of)
// for every tensor) without tensor bytes; its read_into() validates every destination against it
// before any byte is read, then restores through resume::restore_rank straight into them.
// Non-blocking save: BackgroundSaver.submit() turns the tree into a ckpt::Node, snapshots its
// tensors into the store::BackgroundSaver's arena (GIL released) and returns; write_rank (and,
// in a single process, commit, retention and the journal's "committed" event) run on its thread.
// wait() (GIL released) raises the background failure.
// The format's facts come from the core, never spelled again in Python: the step directory's and
// rank file's names, the root attributes (root_attrs), the environment record (environment_json),
// the dtypes (DTYPES), and the adapter layouts seen in torch's layout (OpenRank.torch_layout).
// Status errors become ckpt.errors exceptions by their code (raise_status).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/rank_root.h"
#include "ckpt/format/torch_layout.h"
#include "ckpt/format/tree.h"
#include "ckpt/io/env.h"
#include "ckpt/io/location.h"
#include "ckpt/store/background_save.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "host_tensor.h"
#include "resume/restore.h"
#include "sampler.h"
#include "shard.h"

namespace py = pybind11;

namespace ckpt::python {

[[noreturn]] void raise_status(const Status& s) {
  const char* cls = "CheckpointError";
  switch (s.code()) {
    case Code::kCorrupt:
      cls = "CorruptCheckpointError";
      break;
    case Code::kMismatch:
      cls = "MismatchError";
      break;
    case Code::kNotFound:
      cls = "NotFoundError";
      break;
    case Code::kLocked:  // store::lock_run_dir's refusal: "RUN/LOCK: locked by pid P host H"
      cls = "LockedError";
      break;
    case Code::kInvalidArgument:
      cls = "InvalidArgumentError";
      break;
    default:
      break;
  }
  py::object type = py::module_::import("ckpt.errors").attr(cls);
  PyErr_SetString(type.ptr(), s.message().c_str());
  throw py::error_already_set();
}

void check(const Status& s) {
  if (!s.is_ok()) raise_status(s);
}

// Runs `f` — storage work, which on s3:// is network round trips retried for seconds — without
// the GIL, so the training script's other threads (data loading, a heartbeat) run meanwhile.
// `f` must not touch Python objects; its Status or Result is checked after, with the GIL.
template <typename F>
auto without_gil(F&& f) {
  py::gil_scoped_release nogil;
  return f();
}

// The file system every binding reads and writes through: one Env for the package, as `main`
// gives the CLI's commands theirs (the seam an object-store backend plugs into).
Env* package_env() { return routing_env(Env::posix()); }

namespace {

AttrValue to_attr(const std::string& path, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) return v.cast<int64_t>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
    if (seq.size() > 0 && py::isinstance<py::float_>(seq[0])) return v.cast<std::vector<double>>();
    if (seq.size() > 0 && py::isinstance<py::str>(seq[0]))
      return v.cast<std::vector<std::string>>();
    return v.cast<std::vector<int64_t>>();
  }
  raise_status(invalid_argument(
      path + ": cannot store a " +
      py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>() + " as an attribute"));
}

py::object from_attr(const AttrValue& a) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, a);
}

void to_node(const std::string& path, const py::dict& d, Node* node) {
  if (d.contains("attrs")) {
    for (auto [k, v] : d["attrs"].cast<py::dict>()) {
      const std::string name = k.cast<std::string>();
      node->attrs[name] = to_attr(path + "/" + name, v);
    }
  }
  if (d.contains("tensors")) {
    for (auto [k, v] : d["tensors"].cast<py::dict>()) {
      const std::string name = k.cast<std::string>();
      // (ptr, nbytes, dtype, shape), or (0, 0, dtype, shape, alias_of) for a tied tensor, or
      // (ptr, nbytes, dtype, box_sizes, "", global_shape, box_offsets, placement, owner) for a
      // box of a global tensor (owner -1: this rank writes it; else ptr 0 and nbytes 0)
      py::tuple tup = v.cast<py::tuple>();
      if (tup.size() != 4 && tup.size() != 5 && tup.size() != 9) {
        raise_status(invalid_argument(path + "/" + name + ": a tensor is a tuple of 4, 5 or 9"));
      }
      const std::string dtype = tup[2].cast<std::string>();
      auto dt = dtype_from_name(dtype);
      if (!dt) raise_status(invalid_argument(path + "/" + name + ": unknown dtype " + dtype));
      const auto shape = tup[3].cast<std::vector<int64_t>>();
      if (tup.size() == 5) {
        Tensor t;
        t.dtype = *dt;
        t.shape = shape;
        t.alias_of = tup[4].cast<std::string>();
        node->tensors[name] = std::move(t);
        continue;
      }
      Tensor t = Tensor::borrow(*dt, shape, reinterpret_cast<const void*>(tup[0].cast<uintptr_t>()),
                                tup[1].cast<size_t>());
      if (tup.size() == 9) {
        BoxOf box;
        box.global_shape = tup[5].cast<std::vector<int64_t>>();
        box.offsets = tup[6].cast<std::vector<int64_t>>();
        box.placement = tup[7].cast<std::string>();
        box.owner = tup[8].cast<int64_t>();
        if (box.owner >= 0) t.shape.clear();  // the owner's file has the bytes and the shape
        t.box = std::move(box);
      }
      node->tensors[name] = std::move(t);
    }
  }
  if (d.contains("children")) {
    for (auto [k, v] : d["children"].cast<py::dict>()) {
      const std::string name = k.cast<std::string>();
      to_node(path + "/" + name, v.cast<py::dict>(), &node->child(name));
    }
  }
}

py::dict from_node(const Node& node) {
  py::dict attrs, tensors, children, boxes;
  for (const auto& [k, v] : node.attrs) attrs[py::str(k)] = from_attr(v);
  for (const auto& [k, t] : node.tensors) {
    tensors[py::str(k)] = py::make_tuple(dtype_name(t.dtype), t.shape, t.alias_of);
    if (t.box) {
      boxes[py::str(k)] =
          py::make_tuple(t.box->global_shape, t.box->offsets, t.box->placement, t.box->owner);
    }
  }
  for (const auto& [k, c] : node.children) children[py::str(k)] = from_node(c);
  py::dict d;
  if (!boxes.empty()) d["boxes"] = boxes;
  d["attrs"] = attrs;
  d["tensors"] = tensors;
  d["children"] = children;
  return d;
}

std::string step_dir(const std::string& run_dir, int64_t step) {
  return path_join(run_dir, step_dir_name(step));
}

// Step 1 of a save into the directory store::save_dir names (the attempt directory of a re-save);
// "dir" is the step directory either way.
Status write_rank_files(Env* env, const std::string& run_dir, int64_t step, int64_t rank,
                        int64_t world_size, Node* root, store::RankWriteStats* stats) {
  CKPT_ASSIGN_OR_RETURN(const std::string dir, store::save_dir(env, run_dir, step));
  CKPT_RETURN_IF_ERROR(env->make_dirs(dir));
  return store::write_rank(env, dir, rank, step, world_size, root, stats).status();
}

py::dict save_rank(const std::string& run_dir, int64_t step, int64_t rank, int64_t world_size,
                   const py::dict& tree) {
  check(check_step(step));
  Node root;
  to_node("", tree, &root);
  const std::string dir = step_dir(run_dir, step);
  // As the C++ Checkpointer: O_DIRECT where it works; s3:// to the store.
  Env* env = routing_env(Env::posix_direct_io());
  store::RankWriteStats stats;
  {
    py::gil_scoped_release nogil;
    Status s = write_rank_files(env, run_dir, step, rank, world_size, &root, &stats);
    if (!s.is_ok()) {
      py::gil_scoped_acquire gil;
      raise_status(s);
    }
  }
  py::dict out;
  out["dir"] = dir;
  out["file_bytes"] = stats.file_bytes;
  out["tensor_bytes"] = stats.tensor_bytes;
  out["tensors"] = stats.tensors;
  out["direct_io"] = stats.direct_io;
  py::dict secs;  // where write_rank's time went (store::RankWriteStats)
  secs["hash"] = stats.hash_seconds;
  secs["structure"] = stats.structure_seconds;
  secs["write"] = stats.write_seconds;
  secs["sync"] = stats.sync_seconds;
  secs["manifest"] = stats.manifest_seconds;
  out["seconds"] = secs;
  return out;
}

// One rank file's checked structure, opened once: `tree` for Python to plan its destinations
// from, then read_into() reads into them from the same structure (no second HDF5 parse).
class OpenRank {
 public:
  // A committed step (COMMIT.json) is restored with its whole file checked against the commit
  // record, dataset headers included: the datasets then come from the manifest (5× faster).
  // `record`: the step's commit record when find_latest read it already (one GET less on a store).
  OpenRank(const std::string& dir, int64_t rank, const CommitRecord* record)
      : dir_(dir), rank_(rank) {
    Env* env = package_env();
    auto commit = record != nullptr ? Result<CommitRecord>(*record)
                                    : without_gil([&] { return store::read_commit(env, dir_); });
    if (!commit.is_ok() && commit.status().code() != Code::kNotFound) raise_status(commit.status());
    if (commit.is_ok()) {
      auto listed = store::listed_rank_file(*commit, dir_, rank_);
      if (!listed.is_ok()) raise_status(listed.status());
      listed_ = *listed;
    }
    auto st = without_gil([&] {
      return store::open_rank_structure(
          env, dir, rank,
          listed_ ? store::DatasetCheck::kFromManifest : store::DatasetCheck::kOpenEvery);
    });
    if (!st.is_ok()) raise_status(st.status());
    rs_ = std::move(*st);
    tree_ = from_node(rs_->root);
  }

  py::dict tree() const { return tree_; }

  // None when component `name` is already in torch's layout (the Python package wrote it), or is
  // no adapter-layout optimizer where kind is "optimizer"; else
  // (tree, sources): the component as torch's layout for a live object of `kind` ("module" or
  // "optimizer"), in the shape of `tree`'s entries, and for each of its tensors' paths (relative
  // to the component) the path in the file, which read_into's destinations name.
  py::object torch_layout(const std::string& name, const std::string& kind) const {
    if (!rs_) raise_status(invalid_argument(dir_ + ": torch_layout after read_into"));
    const Node* in = rs_->root.find_child(name);
    if (in == nullptr) raise_status(not_found(rs_->file + ": no component " + name));
    if (is_torch_layout(*in)) return py::none();
    TorchLayoutKind k = TorchLayoutKind::kModule;
    if (kind == "optimizer") {
      if (!is_adapter_optimizer_layout(*in)) return py::none();  // no layout of ours: as is
      k = TorchLayoutKind::kOptimizer;
    } else if (kind != "module") {
      raise_status(invalid_argument("torch_layout: kind " + kind + " is not module or optimizer"));
    }
    std::map<std::string, std::string> sources;
    auto out = to_torch_layout(*in, k, &sources);
    if (!out.is_ok()) raise_status(out.status().with_context(rs_->file));
    return py::make_tuple(from_node(*out), sources);
  }

  // dests: "/component/a/b" -> (ptr, nbytes, dtype, shape[, fresh]). Every destination is checked
  // against the file before any byte is read; then every tensor is read (and its hash checked)
  // into them. A fresh one (memory allocated for this restore, holding nothing live) is written
  // by check_first's checking read already (resume::HostSpan::fresh).
  // Once per OpenRank: the structure goes to the restore.
  void read_into(const py::dict& dests, bool check_first) {
    if (!rs_) raise_status(invalid_argument(dir_ + ": read_into was called on this rank before"));
    struct Dest {
      void* ptr;
      size_t nbytes;
      std::string dtype;
      std::vector<int64_t> shape;
      bool fresh;
    };
    std::map<std::string, Dest> want;
    std::set<std::string> components;
    for (auto [k, v] : dests) {
      const std::string path = k.cast<std::string>();
      auto item = v.cast<py::tuple>();
      if (item.size() != 4 && item.size() != 5) {
        raise_status(invalid_argument("read_into: the destination of " + path +
                                      " is not (ptr, nbytes, dtype, shape[, fresh])"));
      }
      const bool fresh = item.size() == 5 && item[4].cast<bool>();
      want[path] = Dest{reinterpret_cast<void*>(item[0].cast<uintptr_t>()), item[1].cast<size_t>(),
                        item[2].cast<std::string>(), item[3].cast<std::vector<int64_t>>(), fresh};
      components.insert(store::top_component(path));
    }
    Env* env = package_env();
    const std::string file = rs_->file;
    for (auto& [path, d] : want) {
      const Tensor* t = store::find_tensor(&rs_->root, path);
      if (t == nullptr) raise_status(not_found(file + ": no tensor " + path));
      if (t->box) {
        raise_status(invalid_argument(file + ": tensor " + path +
                                      " is a piece of a global tensor: ShardRead reads it"));
      }
      if (dtype_name(t->dtype) != d.dtype || t->shape != d.shape || t->nbytes != d.nbytes) {
        raise_status(mismatch(file + ": tensor " + path + " is " + dtype_name(t->dtype) + " of " +
                              std::to_string(t->shape.size()) + " dims; the destination is " +
                              d.dtype + " of " + std::to_string(d.shape.size()) +
                              " dims or another size"));
      }
    }
    // The fast pipeline; every byte of a committed file checked against the commit record.
    resume::RestoreOptions opts;
    opts.groups = components;        // the Python Checkpointer's groups are named freely
    opts.check_first = check_first;  // destinations include live memory: every hash first
    // fresh memory (allocated for this restore) is filled by the check read already
    for (auto& [path, d] : want) opts.destinations[path] = {d.ptr, d.nbytes, d.fresh};
    // Pieces of global tensors are read by ShardRead (shard.cc) from whichever rank files hold
    // them, each checked against its hash there; this file gives the rest, each tensor checked
    // against its own hash. The whole-file check would read this rank's pieces a second time.
    auto& entries = rs_->manifest.tensors;
    const size_t all = entries.size();
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [](const ManifestEntry& e) { return e.box.has_value(); }),
                  entries.end());
    // an uncommitted step directory has no whole-file hash to check
    if (listed_ && entries.size() == all) resume::check_whole_file(*listed_, &opts);
    store::RankStructure rs = std::move(*rs_);
    rs_.reset();
    Status s;
    {
      py::gil_scoped_release nogil;
      s = resume::restore_rank(env, std::move(rs), opts).status();
    }
    check(s);
  }

 private:
  std::string dir_;
  int64_t rank_;
  std::optional<CommitFile> listed_;  // this rank's file in COMMIT.json, when committed
  std::optional<store::RankStructure> rs_;
  py::dict tree_;
};

py::list damaged_list(const std::vector<store::CheckpointEntry>& entries) {
  py::list out;
  for (const auto& e : entries) {
    py::dict d;
    d["step"] = e.step;
    d["dir"] = e.dir;
    d["problem"] = e.problem;
    out.append(d);
  }
  return out;
}

py::dict latest_dict(const store::Latest& latest) {
  py::dict out;
  out["step"] = latest.step;
  out["dir"] = latest.dir;
  out["note"] = latest.note;
  out["world_size"] = latest.commit.world_size;
  out["components"] = latest.commit.components;
  out["record"] = latest.commit;  // for OpenRank and ShardRead: no second read of COMMIT.json
  out["damaged_newer"] = damaged_list(latest.damaged_newer);  // what restoring it steps over
  return out;
}

py::dict find_latest(const std::string& run_dir) {
  Env* env = package_env();
  auto latest = without_gil([&] { return store::find_latest(env, run_dir); });
  if (!latest.is_ok()) {
    if (latest.status().code() == Code::kNotFound) return py::dict();
    raise_status(latest.status());
  }
  return latest_dict(*latest);
}

// store::look_up_latest: (find_latest's dict, or None when nothing is committed; the damaged
// checkpoints a fresh start steps over, as damaged_newer's entries, empty when there is one).
py::tuple look_up_latest(const std::string& run_dir) {
  Env* env = package_env();
  auto found = without_gil([&] { return store::look_up_latest(env, run_dir); });
  if (!found.is_ok()) raise_status(found.status());
  py::object latest = found->latest ? py::object(latest_dict(*found->latest)) : py::none();
  return py::make_tuple(latest, damaged_list(found->damaged));
}

// store::list_checkpoints: every step directory, ascending, as {"step", "dir", "committed",
// "damaged", "problem"}, with "world_size" and "components" from the commit record of a
// committed one.
py::list list_checkpoints(const std::string& run_dir) {
  Env* env = package_env();
  auto all = without_gil([&] { return store::list_checkpoints(env, run_dir); });
  if (!all.is_ok()) raise_status(all.status());
  py::list out;
  for (const auto& e : *all) {
    py::dict d;
    d["step"] = e.step;
    d["dir"] = e.dir;
    d["committed"] = e.committed;
    d["damaged"] = e.damaged;
    d["problem"] = e.problem;
    if (e.committed && e.commit) {
      d["world_size"] = e.commit->world_size;
      d["components"] = e.commit->components;
    }
    out.append(d);
  }
  return out;
}

// RUN/LOCK held by this process (store::lock_run_dir) until release() or destruction.
// check(): raises while RUN/LOCK is no longer the file locked (the run directory was deleted).
// begin_save()/end_save(): this process's turn to save to the run directory, shared by every
// Checkpointer of it there (RunDirLock::save_mutex); a BackgroundSaver job takes it too.
class PyLock {
 public:
  explicit PyLock(const std::string& run_dir) {
    auto l = without_gil([&] { return store::lock_run_dir(package_env(), run_dir); });
    if (!l.is_ok()) raise_status(l.status());
    lock_ = std::shared_ptr<store::RunDirLock>(std::move(*l));
  }
  void release() {
    if (turn_.owns_lock()) turn_.unlock();
    py::gil_scoped_release nogil;  // on a store: the lease is deleted (network)
    lock_.reset();
  }
  void check_held() const {
    if (!lock_) raise_status(invalid_argument("RUN/LOCK: released (the Checkpointer was closed)"));
    check(without_gil([&] { return lock_->check(); }));  // on a store: renews the lease
  }
  void begin_save() {
    check_held();
    std::unique_lock<std::mutex> turn(lock_->save_mutex(), std::defer_lock);
    {
      py::gil_scoped_release nogil;  // a background save of another Checkpointer may hold it
      turn.lock();
    }
    turn_ = std::move(turn);
  }
  void end_save() {
    if (turn_.owns_lock()) turn_.unlock();
  }
  std::shared_ptr<store::RunDirLock> held() const { return lock_; }

 private:
  std::shared_ptr<store::RunDirLock> lock_;
  std::unique_lock<std::mutex> turn_;
};

// The journal, shared with a BackgroundSaver's thread (which appends its save's end).
struct SharedJournal {
  std::mutex mu;
  std::unique_ptr<store::Journal> journal;
  Status append(store::JournalEventType t, nlohmann::json j, bool durable) {
    std::lock_guard<std::mutex> lock(mu);
    if (!journal) return invalid_argument("journal.jsonl: appended to after close()");
    return journal->append(t, std::move(j), durable);
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu);
    journal.reset();
  }
};

class PyJournal {
 public:
  explicit PyJournal(const std::string& run_dir) : shared_(std::make_shared<SharedJournal>()) {
    auto j = without_gil([&] { return store::Journal::open(package_env(), run_dir); });
    if (!j.is_ok()) raise_status(j.status());
    shared_->journal = std::move(*j);
  }
  void append(const std::string& type, const std::string& json, bool durable) {
    auto t = store::journal_event_from_name(type);
    if (!t) raise_status(invalid_argument("journal: unknown event type " + type));
    nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      raise_status(invalid_argument("journal: event is not a JSON object"));
    check(without_gil([&] { return shared_->append(*t, std::move(j), durable); }));
  }
  // Closes journal.jsonl now (a BackgroundSaver's job may still hold the SharedJournal).
  void close() {
    py::gil_scoped_release nogil;  // on a store: the journal object is written (network)
    shared_->close();
  }
  std::shared_ptr<SharedJournal> shared() const { return shared_; }

 private:
  std::shared_ptr<SharedJournal> shared_;
};

// What one background save left for wait() to report.
struct SaveOutcome {
  int64_t step = 0;
  std::string dir;
  uint64_t file_bytes = 0;
  double stall_seconds = 0;
  double seconds = 0;
};

class PyBackgroundSaver {
 public:
  // Returns {"stall_seconds", "snapshot_seconds", "snapshot_bytes", "waited_seconds", "dir"}.
  // commit: this process commits, applies retention and journals (world_size 1); otherwise the
  // caller runs the barrier and commit after wait() on its own thread.
  py::dict submit(const std::string& run_dir, int64_t step, int64_t rank, int64_t world_size,
                  const py::dict& tree, const std::vector<std::string>& components, bool commit,
                  int keep_last, int64_t keep_every, PyJournal* journal, double capture_seconds,
                  PyLock* lock) {
    check(check_step(step));
    if (lock != nullptr) lock->check_held();
    // Shared with the job: the lock outlives a Checkpointer's close() while its save runs.
    std::shared_ptr<store::RunDirLock> run_lock = lock != nullptr ? lock->held() : nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    Node root;
    to_node("", tree, &root);
    auto out = std::make_shared<SaveOutcome>();
    out->step = step;
    out->dir = step_dir(run_dir, step);
    std::shared_ptr<SharedJournal> jr = journal != nullptr ? journal->shared() : nullptr;
    auto elapsed = [t0, capture_seconds] {
      return capture_seconds +
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    store::BackgroundJob job;
    job.label = "step " + std::to_string(step);
    job.write = [=](Node* tree, const store::SubmitReport& report) -> Status {
      Env* env = routing_env(Env::posix_direct_io());
      out->stall_seconds = capture_seconds + report.snapshot_seconds;
      store::RankWriteStats stats;
      std::unique_lock<std::mutex> turn;
      if (run_lock != nullptr) turn = std::unique_lock<std::mutex>(run_lock->save_mutex());
      Status s = write_rank_files(env, run_dir, step, rank, world_size, tree, &stats);
      if (s.is_ok() && commit && run_lock != nullptr) s = run_lock->check();
      out->file_bytes = stats.file_bytes;
      if (s.is_ok() && commit) s = store::commit(env, run_dir, step, world_size, components);
      if (s.is_ok() && commit) s = store::apply_retention(env, run_dir, keep_last, keep_every);
      out->seconds = elapsed();
      if (jr == nullptr || !commit) return s;
      if (!s.is_ok()) {  // journaled before it travels to wait(); best effort
        (void)jr->append(
            store::JournalEventType::kSave,
            {{"step", step}, {"blocking", false}, {"committed", false}, {"error", s.to_string()}},
            true);
        return s;
      }
      return jr->append(store::JournalEventType::kSave,
                        {{"step", step},
                         {"blocking", false},
                         {"committed", true},
                         {"bytes", out->file_bytes},
                         {"stall_seconds", out->stall_seconds},
                         {"seconds", out->seconds}},
                        true);
    };
    store::SubmitReport report;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = saver_.submit(std::move(root), std::move(job), &report);
    }
    check(s);
    last_ = out;
    py::dict d;
    d["dir"] = out->dir;
    d["stall_seconds"] = capture_seconds + report.snapshot_seconds;  // waited_seconds apart
    d["snapshot_seconds"] = report.snapshot_seconds;
    d["snapshot_bytes"] = report.snapshot_bytes;
    d["waited_seconds"] = report.waited_seconds;
    return d;
  }

  // None when no save was in flight; else {"step", "dir", "file_bytes", "stall_seconds",
  // "seconds"}. Raises the background failure (ckpt.errors).
  py::object wait() {
    if (!saver_.in_flight()) return py::none();
    Status s;
    {
      py::gil_scoped_release nogil;
      s = saver_.wait();
    }
    check(s);
    py::dict d;
    d["step"] = last_->step;
    d["dir"] = last_->dir;
    d["file_bytes"] = last_->file_bytes;
    d["stall_seconds"] = last_->stall_seconds;
    d["seconds"] = last_->seconds;
    return std::move(d);
  }

  bool in_flight() const { return saver_.in_flight(); }

  py::dict stats() const {
    const store::BackgroundSaverStats st = saver_.stats();
    py::dict d;
    d["arena_capacity"] = st.arena_capacity;
    d["arena_used"] = st.arena_used;
    d["arena_allocations"] = st.arena_allocations;
    d["submitted"] = st.submitted;
    d["failed"] = st.failed;
    return d;
  }

 private:
  store::BackgroundSaver saver_;
  std::shared_ptr<SaveOutcome> last_;
};

std::vector<std::string> read_journal(const std::string& run_dir) {
  auto lines = without_gil([&] { return store::read_journal(package_env(), run_dir); });
  if (!lines.is_ok()) raise_status(lines.status());
  std::vector<std::string> out;
  for (const auto& j : *lines) out.push_back(j.dump());
  return out;
}

}  // namespace
}  // namespace ckpt::python

PYBIND11_MODULE(_core, m) {
  using namespace ckpt;
  using namespace ckpt::python;
  m.doc() = "ckpt's C++ core: rank files, commit protocol, journal, resumable sampler";
  m.def("save_rank", &save_rank, py::arg("run_dir"), py::arg("step"), py::arg("rank"),
        py::arg("world_size"), py::arg("tree"));
  m.def(
      "commit",
      [](const std::string& run_dir, int64_t step, int64_t world_size,
         const std::vector<std::string>& components) {
        check(without_gil(
            [&] { return store::commit(package_env(), run_dir, step, world_size, components); }));
      },
      py::arg("run_dir"), py::arg("step"), py::arg("world_size"), py::arg("components"));
  m.def(
      "apply_retention",
      [](const std::string& run_dir, int keep_last, int64_t keep_every) {
        check(without_gil(
            [&] { return store::apply_retention(package_env(), run_dir, keep_last, keep_every); }));
      },
      py::arg("run_dir"), py::arg("keep_last"), py::arg("keep_every"));
  m.def("find_latest", &find_latest, py::arg("run_dir"));
  m.def("look_up_latest", &look_up_latest, py::arg("run_dir"));
  m.def("list_checkpoints", &list_checkpoints, py::arg("run_dir"));
  // A run directory as the user wrote it, checked (ckpt/io/location.h): s3:// goes to the store,
  // any other URL is refused with one line, never taken for a local folder.
  m.def(
      "location",
      [](const std::string& text) {
        check(env_for_location(text).status());
        return normalize_location(text);
      },
      py::arg("text"));
  // Requests and bytes this process sent to object stores so far (ckpt/io/location.h).
  m.def("store_traffic", [] {
    const StoreTraffic t = store_traffic();
    py::dict d;
    d["gets"] = t.gets;
    d["puts"] = t.puts;
    d["heads"] = t.heads;
    d["lists"] = t.lists;
    d["deletes"] = t.deletes;
    d["multipart"] = t.multipart;
    d["retries"] = t.retries;
    d["bytes_up"] = t.bytes_up;
    d["bytes_down"] = t.bytes_down;
    return d;
  });
  m.def(
      "is_dir",
      [](const std::string& path) {
        return without_gil([&] { return package_env()->is_dir(path); });
      },
      py::arg("path"));
  m.def(
      "remove_tree",
      [](const std::string& path) {
        check(without_gil([&] { return package_env()->remove_tree(path); }));
      },
      py::arg("path"));
  m.def(
      "make_dirs",
      [](const std::string& path) {
        check(without_gil([&] { return package_env()->make_dirs(path); }));
      },
      py::arg("path"));
  m.attr("MAX_STEP") = kMaxStep;  // a checkpoint's step is in [0, MAX_STEP] (check_step)
  m.attr("FORMAT") = kFormatName;
  m.attr("FORMAT_VERSION") = kFormatVersion;
  m.attr("VERSION") = kVersion;
  m.def(
      "step_dir_name",
      [](int64_t step) {
        check(check_step(step));
        return step_dir_name(step);
      },
      py::arg("step"));
  m.def("rank_file_name", &rank_file_name, py::arg("rank"));
  m.def(
      "root_attrs",
      [](const std::string& producer, const std::string& libtorch_version, int64_t step,
         int64_t rank, int64_t world_size, const std::vector<std::string>& components) {
        Node root;
        set_root_attrs({producer, libtorch_version, step, rank, world_size, components}, &root);
        return from_node(root)["attrs"].cast<py::dict>();
      },
      py::arg("producer"), py::arg("libtorch_version"), py::arg("step"), py::arg("rank"),
      py::arg("world_size"), py::arg("components"));
  m.def(
      "environment_json",
      [](const std::string& libtorch, const std::string& toolchain_key,
         const std::string& toolchain, bool cuda_available, int64_t cuda_devices,
         const std::string& cuda_runtime, const std::string& host) {
        return environment_json(
            {libtorch, toolchain_key, toolchain, cuda_available, cuda_devices, cuda_runtime, host});
      },
      py::arg("libtorch"), py::arg("toolchain_key"), py::arg("toolchain"),
      py::arg("cuda_available"), py::arg("cuda_devices"), py::arg("cuda_runtime"), py::arg("host"));
  {  // name -> (element size, quantized): quantized bytes mean nothing without scale and zero point
    py::dict dtypes;
    for (DType t : all_dtypes()) {
      dtypes[py::str(dtype_name(t))] = py::make_tuple(dtype_size(t), dtype_is_quantized(t));
    }
    m.attr("DTYPES") = dtypes;
  }
  // A step's commit record as find_latest read it (opaque: handed to OpenRank and ShardRead).
  py::class_<CommitRecord>(m, "CommitRecord")
      .def_property_readonly("step", [](const CommitRecord& r) { return r.step; });
  py::class_<OpenRank>(m, "OpenRank")
      .def(py::init<const std::string&, int64_t, const CommitRecord*>(), py::arg("step_dir"),
           py::arg("rank"), py::arg("record") = nullptr)
      .def_property_readonly("tree", &OpenRank::tree)
      .def("torch_layout", &OpenRank::torch_layout, py::arg("component"), py::arg("kind"))
      .def("read_into", &OpenRank::read_into, py::arg("dests"), py::arg("check_first") = false);
  m.def(
      "verify",
      [](const std::string& step_dir) {
        return store::verify_checkpoint(package_env(), step_dir).problems;
      },
      py::arg("step_dir"));
  m.def(
      "xxh3_hex",
      [](const py::bytes& b) {
        std::string s = b;
        return hex64(xxh3_64(s.data(), s.size()));
      },
      py::arg("data"));
  // XXH3-64 of the `nbytes` at `ptr`, without a copy (the first save's check that the ranks hold
  // a replicated component alike, _shard.check_replicas).
  m.def(
      "xxh3_memory",
      [](uintptr_t ptr, size_t nbytes) {
        py::gil_scoped_release nogil;
        return xxh3_64(reinterpret_cast<const void*>(ptr), nbytes);
      },
      py::arg("ptr"), py::arg("nbytes"));
  m.def("module_wrapper_prefix", &module_wrapper_prefix, py::arg("keys"));
  m.def("read_journal", &read_journal, py::arg("run_dir"));
  py::class_<PyLock>(m, "RunLock")
      .def(py::init<const std::string&>(), py::arg("run_dir"))
      .def("release", &PyLock::release)
      .def("check", &PyLock::check_held)
      .def("begin_save", &PyLock::begin_save)
      .def("end_save", &PyLock::end_save);
  py::class_<PyJournal>(m, "Journal")
      .def(py::init<const std::string&>(), py::arg("run_dir"))
      .def("append", &PyJournal::append, py::arg("type"), py::arg("json"), py::arg("durable"))
      .def("close", &PyJournal::close);
  // The destructor waits for the save in flight (without the GIL: the job never takes it).
  py::class_<PyBackgroundSaver>(m, "BackgroundSaver")
      .def(py::init<>())
      .def("submit", &PyBackgroundSaver::submit, py::arg("run_dir"), py::arg("step"),
           py::arg("rank"), py::arg("world_size"), py::arg("tree"), py::arg("components"),
           py::arg("commit"), py::arg("keep_last"), py::arg("keep_every"), py::arg("journal"),
           py::arg("capture_seconds") = 0.0, py::arg("lock") = nullptr)
      .def("wait", &PyBackgroundSaver::wait)
      .def("in_flight", &PyBackgroundSaver::in_flight)
      .def("stats", &PyBackgroundSaver::stats);
  bind_sampler(m);
  bind_shard(m);
  bind_host_tensor(m);
}
