// Checkpointer: complete save and restore for libtorch training code, in two calls.
//
//   ckpt::Checkpointer ck(opts);                 // run directory, retention, rank
//   ck.track({.model = m, .optimizer = &opt, .scheduler = &sched, .sampler = &s, .counters = &c});
//   auto restored = ck.restore_latest();         // fresh start when the run has no checkpoint
//   ck.log_start(*restored);
//   ... for each step: ck.log_progress({...}); if (step % K == 0) ck.save(step);
//
// save() captures every tracked component (model, optimizer, scheduler, rng, loader, train
// counters, extra), writes this rank's file, commits (rank 0), moves LATEST and applies retention —
// the protocol of docs/format.md §2 — and journals it. restore_latest() restores every component
// the checkpoint has into the tracked objects and reports which were missing; it refuses with a
// clear error a hash mismatch, a tensor that does not fit the model, or a missing component the
// caller declared required. The tracked objects are borrowed: they must outlive the Checkpointer.
// Rank 0 is the run directory's one writer: its first call takes RUN/LOCK (store::lock_run_dir)
// and holds it until the Checkpointer is destroyed or the process dies (not a child it forks);
// while another process holds it every call fails with "locked by pid P host H". Checkpointers
// of one process on one run directory share the lock and take turns to save (one save's write
// and commit at a time). A save checks first that RUN/LOCK is still the file it locked (the run
// directory was not deleted under it) and fails otherwise. Saving step N again when step N is
// committed (a relaunched run) replaces it atomically (store/run_dir.h, "Re-saving a step").
// Steps are in [0, kMaxStep] (check_step); save() refuses others before it writes.
// options.read_only: a reader of a live run — restore_latest() only, no lock, nothing written.
// save(step, {.blocking = false}) returns after a snapshot of the captured tensors into memory
// the Checkpointer owns (store::BackgroundSaver: one copy of the state, allocated once) and writes,
// hashes, fsyncs and commits on one background thread; wait() returns its Status, and a failure
// is never lost (the next save()/wait() returns it, the journal records it, the destructor waits
// and reports it on stderr). With world_size > 1 the background thread only writes this rank's
// file; the barriers and the commit run on the training thread at the next save(), wait() or
// the destructor (docs/distributed.md, "Non-blocking saves with several ranks"). restore_latest()
// waits for a save in flight first.
// Not thread-safe: call from the training thread.
// restore_latest() reads through the fast pipeline (resume::restore_rank) straight into the model's
// parameters and the optimizer's state tensors, and checks every tensor's hash and the commit
// record's whole-file hash before it writes anything live (docs/resume.md, "All or nothing").
// What a failure leaves:
//   - a failure before the in-place copy (no checkpoint readable, a missing required component,
//     a tensor that does not fit, a hash mismatch, an RNG state or extra value that does not
//     restore, ...): every tracked object is bitwise as before;
//   - a failure of the in-place copy itself — the file written to between the check and the
//     copy, or a read error in the copy — which the error says: the model's parameters and the
//     optimizer's existing state tensors on the CPU are partly overwritten, and the extra values
//     (extra()) hold the checkpoint's; device and non-contiguous tensors and the RNG are put
//     back; the optimizer's hyperparameters and state, the scheduler, the sampler and the
//     counters are untouched. Restore again;
//   - a failure to journal the restore (the last step): every object is restored.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/component.h"
#include "ckpt/io/env.h"
#include "ckpt/store/background_save.h"
#include "ckpt/store/run_dir.h"
#include "ckpt/torch/extra_state.h"
#include "ckpt/torch/fwd.h"
#include "ckpt/torch/rng_state.h"

namespace ckpt::sched {
class Scheduler;
}
namespace ckpt::loader {
class ResumableSampler;
struct LoaderCursor;
}  // namespace ckpt::loader
namespace ckpt::store {
class Journal;
class RunDirLock;
enum class JournalEventType;
}  // namespace ckpt::store

namespace ckpt {

// The /train component: counters a run's logs and bookkeeping depend on.
struct TrainCounters {
  int64_t global_step = 0;
  int64_t epoch = 0;
  int64_t samples_seen = 0;
  int64_t tokens_seen = 0;
  int64_t grad_accum_steps = 1;
  int64_t grad_accum_pos = 0;
  double amp_loss_scale = 0;  // 0 = no AMP
  std::string config;         // the run's configuration as text; its digest is stored
};

// What restore_latest() does when a checkpoint newer than the newest intact one has a damaged
// commit record (it exists but fails its own hash, does not parse or names another step).
enum class OnDamaged {
  kRefuse,    // fail, naming the damaged checkpoint (the default: someone should look at it)
  kFallback,  // restore the newest intact checkpoint; the journal's restore event says what was
              // skipped and why
};

struct CheckpointerOptions {
  std::string run_dir;
  int keep_last = 3;       // committed checkpoints to keep (0 = all)
  int64_t keep_every = 0;  // also keep steps that are multiples of this (0 = none)
  int64_t rank = 0;
  int64_t world_size = 1;  // processes writing files (sampler ranks in one process count as 1)
  // Components to leave out of saves (optimizer, scheduler, rng, loader, train, extra): the
  // incomplete checkpoints people write, on purpose, to show what breaks. The model cannot be
  // omitted (save() refuses). Names from text go through parse_components().
  std::set<Component> omit;
  // Components restore_latest() must find; a missing one is an error instead of a note.
  std::set<Component> required;
  OnDamaged on_damaged = OnDamaged::kRefuse;
  // Default: Env::posix_direct_io() — tensor bodies go to the disk with O_DIRECT where the
  // filesystem allows it, through pwrite otherwise (README.md, "Blocking save"); Env::posix()
  // writes everything through the page cache.
  Env* env = nullptr;
  // A reader of a live run (an evaluation script): restore_latest() takes no RUN/LOCK and writes
  // nothing — no journal event, no directory; save(), log_start() and log_progress() refuse
  // (invalid_argument). Several read-only Checkpointers and the run's writer coexist.
  bool read_only = false;
  // With world_size > 1: waits until every rank reached this point (e.g. a c10d Gloo barrier).
  // save() calls it after this rank's file is durable and again after rank 0 committed. If rank
  // 0's commit fails it returns without the second barrier, so the other ranks fail at their
  // barrier's timeout rather than believe the checkpoint committed.
  std::function<Status()> barrier;
};

struct RestoreReport {
  bool restored = false;  // false: no checkpoint, a fresh start
  int64_t step = 0;
  std::string checkpoint;            // "step-000000000050"
  std::set<Component> components;    // restored (component_names() for text)
  std::set<Component> missing;       // tracked but absent from the checkpoint
  std::string note;                  // e.g. LATEST was stale
  std::vector<std::string> skipped;  // damaged checkpoints stepped over (kFallback), with why
  size_t shards = 0;                 // tracked LocalShards restored
  int64_t saved_world_size = 0;      // ranks that wrote the checkpoint (≠ world_size: resharded)
};

// A piece of a global tensor that a libtorch program shards by hand (format version 2,
// docs/format.md §8): `*local` (a contiguous CPU tensor) holds the elements offsets[d] ..
// offsets[d] + local->size(d) of a tensor of `global_shape`. Saved as a box of "/shards/<name>";
// restored from the boxes of whatever layout saved it (another world size, another split) straight
// into `*local`'s memory, every saved box's hash checked before any live byte is written.
// A replica several ranks hold (replicated = true) is written once, by `owner`, which every rank
// gives the same (store::assign_owners computes one without a collective).
inline constexpr char kShardsGroup[] = "shards";
struct LocalShard {
  std::string name;  // unique, no '/'
  torch::Tensor* local = nullptr;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;
  bool replicated = false;
  int64_t owner = 0;  // with replicated: the rank that writes it
};

// What a Checkpointer captures; a null pointer is a component not tracked. Borrowed: the objects
// must outlive the Checkpointer.
struct Tracked {
  torch::nn::Module* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;  // needs the model (state is keyed by parameter)
  sched::Scheduler* scheduler = nullptr;
  loader::ResumableSampler* sampler = nullptr;
  TrainCounters* counters = nullptr;
  std::vector<LocalShard>* shards = nullptr;  // group "/shards"; restored by resume::ShardRead
};

// One journal progress line: what step `step` trained with.
struct ProgressEvent {
  int64_t step = 0;
  double lr = 0;
  double loss = 0;
  uint64_t epoch = 0;         // loader epoch of the step's batch
  uint64_t position = 0;      // global loader position after the step
  int64_t samples = 0;        // samples seen so far
  uint64_t batch_digest = 0;  // digest of the batch's sample ids (0: not recorded)
};

struct SaveOptions {
  // false: return after the snapshot (capture + one copy of the tensor bytes); the write, hash,
  // fsync, commit, retention and journal run on the background thread. A save still in flight
  // is waited for first either way (at most one in flight).
  bool blocking = true;
};

class Checkpointer {
 public:
  explicit Checkpointer(CheckpointerOptions options);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // What to capture (replaces what was tracked before).
  void track(const Tracked& tracked) { tracked_ = tracked; }
  torch_adapter::GeneratorRegistry& generators() { return generators_; }
  torch_adapter::ExtraRegistry& extra() { return extra_; }

  // Journals a process start: fresh or restored (and from which step), the tracked sampler's
  // spec, the tracked scheduler's spec, the gradient-accumulation factor and what is omitted —
  // what `ckpt lr` and `ckpt coverage` replay the run from. `extra` adds the caller's own keys
  // (e.g. the distributed setup); invalid_argument when it is not a JSON object.
  Status log_start(const RestoreReport& restored,
                   const nlohmann::json& extra = nlohmann::json::object());
  Status save(int64_t step, const SaveOptions& save_options = {});
  // Blocks until the save in flight (if any) is committed and returns its Status; ok when none.
  Status wait();
  // The background saver's arena and counters (capacity stays put across saves of one state).
  store::BackgroundSaverStats background_stats() const;
  Result<RestoreReport> restore_latest();
  // One journal line per step (see ProgressEvent), so LR, loss and sample order can be compared.
  Status log_progress(const ProgressEvent& e);

  const std::string& run_dir() const { return options_.run_dir; }

 private:
  Status capture(Node* root, std::set<Component>* components);
  // The groups a save writes: the components', and "shards" when LocalShards are tracked.
  std::vector<std::string> group_names(const std::set<Component>& components) const;
  Status check_save_options() const;
  Status write_files(Node* root, int64_t step, uint64_t* file_bytes);
  Status commit_files(int64_t step, const std::set<Component>& components, nlohmann::json event);
  Status save_in_background(int64_t step, Node root, std::set<Component> components,
                            std::chrono::steady_clock::time_point t0, double waited);
  Status journal_failure(int64_t step, const Status& failed);
  Status append_journal(store::JournalEventType type, nlohmann::json event, bool durable);
  Status open_journal();
  Status acquire_lock();
  Status check_writable(const char* call) const;
  // This process's turn to save to the run directory (RunDirLock::save_mutex); empty off rank 0.
  std::unique_lock<std::mutex> take_turn();
  // Refuses (on_damaged = refuse) or lists in rep->skipped the damaged checkpoints newer than
  // the newest intact one (`newest`, -1: none).
  Status check_damaged(const std::vector<store::CheckpointEntry>& damaged, int64_t newest,
                       RestoreReport* rep) const;
  Status journal_restore(const RestoreReport& rep, const loader::LoaderCursor* cursor);

  CheckpointerOptions options_;
  Env* env_;
  Tracked tracked_;
  torch_adapter::GeneratorRegistry generators_;
  torch_adapter::ExtraRegistry extra_;
  std::unique_ptr<store::RunDirLock> lock_;  // declared first: released after the journal
  std::unique_ptr<store::Journal> journal_;
  std::mutex journal_mu_;  // the background thread journals its save's end
  // Declared last: destroyed (its thread joined) before the journal and the lock.
  std::unique_ptr<store::BackgroundSaver> saver_;
};

// Digest of the environment that can change a run's numbers: libtorch version, compiler, CUDA
// availability and devices, host. `env_json` receives the details.
std::string environment_digest(std::string* env_json);

}  // namespace ckpt
