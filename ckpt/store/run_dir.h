// A run directory (docs/format.md §1–2): step directories, the commit record, LATEST and
// retention.
//
// Commit protocol (the caller has already written every rank's files, step 1):
//   2. barrier — the caller's (single process: nothing to do);
//   3. commit(): every file's size and XXH3 — each manifest read and hashed, each rank file's
//      hash taken from its manifest's `file_xxh3` (computed by write_rank while it wrote the
//      file; a rank file is read back only when its manifest predates the field) — then write
//      COMMIT.json.tmp, fsync, rename to COMMIT.json, fsync the directory;
//   4. commit(): write LATEST.tmp, fsync, rename over LATEST, fsync the run directory;
//   5. apply_retention(): delete the oldest committed checkpoints beyond keep_last.
// Re-saving a step (its directory already has a COMMIT.json: a relaunched run saving the step it
// restored) never touches the committed checkpoint until the new one is complete:
//   1'. save_dir() names the attempt directory step-N.resave; each rank writes its files there
//       (a leftover of an earlier attempt is reused: each file is replaced whole);
//   3'. commit() removes data files there that the new record does not list, writes COMMIT.json
//       there, then swaps step-N.resave and step-N with one atomic exchange (Env::exchange,
//       renameat2 RENAME_EXCHANGE): a kill before it leaves the old checkpoint, after it the new;
//   4'. LATEST as in 4, then the replaced checkpoint (now step-N.resave) is removed.
// Readers never see step-N.resave (not a step directory name); retention removes a leftover
// one with its step. Where the filesystem cannot exchange directories, a re-save fails (the
// committed checkpoint is kept) rather than replace the files in place.
// A step directory without COMMIT.json (an interrupted save) is ignored by find_latest() and
// reported by list_checkpoints(); one whose COMMIT.json exists but fails its own hash, does not
// parse or names another step is *damaged*, which is not the same thing: verify reports it and a
// restore refuses to silently step over it. Functions are thread-compatible; only rank 0 commits,
// and only one process writes a run directory (lock_run_dir()).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/tree.h"
#include "ckpt/io/env.h"

namespace ckpt::store {

// A name this format writes in a step directory besides COMMIT.json: INDEX, rank-N.h5,
// rank-N.manifest.json (N decimal digits).
bool is_data_file(const std::string& name);

// Spare rank files (docs/format.md §2, step 5). Retention keeps the rank file of a checkpoint it
// deletes, when the run directory is on a file system, as `RUN/.spare/rank-R.h5` (one a rank)
// instead of unlinking it; the next save of that rank renames it into its step directory and
// overwrites it in place when it has exactly the new file's size — the common case of a state
// whose layout did not change — so the file system neither frees nor allocates its blocks. A
// 4 MB rank file: fresh file + fdatasync + unlink of the previous one 4.9 ms, overwritten in
// place 1.4 ms; 512 MiB: unlink 0.10 s, and the direct-I/O write 0.22 s in place against
// 0.27-0.35 s into fresh blocks (this machine). Every byte of it is rewritten. The disk a run
// needs does not grow: every save holds keep_last + 1 checkpoints until retention runs, and the
// spare keeps that footprint between saves. Readers never look at `.spare/`.
// RUN/.spare/rank-R.h5 for the step directory `step_dir` (RUN/step-N or RUN/step-N.resave).
std::string spare_rank_file(const std::string& step_dir, int64_t rank);

// XXH3-64 of a whole file, streamed.
Result<uint64_t> hash_file(Env* env, const std::string& path);

// Step 1 writes into this directory (see "Re-saving a step" above): run_dir/step-N, or
// run_dir/step-N.resave when step-N already has a COMMIT.json. invalid_argument for a step
// outside [0, kMaxStep] (check_step).
Result<std::string> save_dir(Env* env, const std::string& run_dir, int64_t step);
// run_dir/step-N.resave
std::string resave_dir(const std::string& run_dir, int64_t step);

// Steps 3 and 4 of the protocol (3' and 4' for a re-save) for the files save_dir() named.
Status commit(Env* env, const std::string& run_dir, int64_t step, int64_t world_size,
              const std::vector<std::string>& components);

Result<CommitRecord> read_commit(Env* env, const std::string& step_dir);

// Rank `rank`'s file as the commit record `rec` of `step_dir` lists it (its bytes, whole-file
// and region hashes); corrupt ("DIR/rank-R.h5: not listed in COMMIT.json") when it is not.
Result<CommitFile> listed_rank_file(const CommitRecord& rec, const std::string& step_dir,
                                    int64_t rank);

struct CheckpointEntry {
  int64_t step = 0;
  std::string dir;  // full path
  bool committed = false;
  // COMMIT.json exists but is not a valid record of this step (committed is then false).
  bool damaged = false;
  std::string problem;  // why it is not committed ("no COMMIT.json", or the decode error)
  std::optional<CommitRecord> commit;  // the record read, when committed (no second read)
};

// Every step directory, ascending by step.
Result<std::vector<CheckpointEntry>> list_checkpoints(Env* env, const std::string& run_dir);

struct Latest {
  int64_t step = 0;
  std::string dir;
  std::string note;  // set when LATEST was missing, damaged or older than a committed checkpoint
  // Damaged checkpoints newer than `dir`: what restoring `dir` would step over.
  std::vector<CheckpointEntry> damaged_newer;
  CommitRecord commit;  // its commit record, as read
};

// The newest committed checkpoint: LATEST's target when it is committed and nothing newer is; a
// kNotFound Status when the run has none.
Result<Latest> find_latest(Env* env, const std::string& run_dir);

// find_latest's answer for a restore, which must also know what a fresh start steps over:
// `latest` is empty when nothing is committed (or the run directory does not exist), and then
// `damaged` holds every damaged checkpoint, ascending (latest->damaged_newer otherwise). The
// commit records are read once, newest first, up to the first committed one.
struct LatestOrFresh {
  std::optional<Latest> latest;
  std::vector<CheckpointEntry> damaged;
};
Result<LatestOrFresh> look_up_latest(Env* env, const std::string& run_dir);

// Keeps the newest `keep_last` committed checkpoints (and those whose step is a multiple of
// `keep_every` when > 0); removes older committed ones and interrupted ones older than the newest
// committed. keep_last == 0 keeps everything. It only ever removes a real directory (lstat: never
// through a symlink) directly inside run_dir, named step-N, holding nothing but regular files
// with the format's names; never the newest committed checkpoint, never a damaged one. Anything
// else it leaves alone, with one line in `skipped` (when given) saying why.
Status apply_retention(Env* env, const std::string& run_dir, int keep_last, int64_t keep_every,
                       std::vector<std::string>* skipped = nullptr);

// The checks that tie a rank file to the commit record of its directory `step_dir`: the rank
// file's root attributes (step, components) and top-level groups agree with the record's
// components and step, and the step agrees with the directory's name. kCorrupt naming `file`.
Status check_rank_against_commit(const CommitRecord& rec, const Node& root,
                                 const std::string& step_dir, const std::string& file);

// RUN/LOCK as one process holds it (lock_run_dir).
class RunDirLock {
 public:
  virtual ~RunDirLock() = default;
  // ok while RUN/LOCK is still the file this lock holds; kIoError "RUN/LOCK: the run directory
  // was removed or replaced while this process held its lock ..." once it is not (an `rm -rf` of
  // the run, perhaps a relaunch that took a fresh lock there): a writer checks before each save
  // and before it commits, and stops.
  virtual Status check() const = 0;
  // Held by one save at a time of all the Checkpointers of this process on this run directory,
  // from its first write to its commit: two of them saving at once (non-blocking saves on two
  // threads) are serialised instead of writing the same .tmp files together.
  virtual std::mutex& save_mutex() = 0;
};

// One process writes a run directory. Takes RUN/LOCK (flock; released when the returned object
// is destroyed or the process that took it dies — a child it forks does not inherit it, see
// PosixEnv) and writes "pid P host H" into it; kLocked "RUN/LOCK: locked by pid P host H" when
// another writer holds it. Within one process, calls for the same Env and path share one lock (a
// second Checkpointer restoring what the first saved is not a second job).
// Readers never call this.
Result<std::unique_ptr<RunDirLock>> lock_run_dir(Env* env, const std::string& run_dir);

struct VerifyReport {
  std::vector<std::string> problems;  // one line each; empty = the checkpoint is intact
  size_t files = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;
};

// Checks everything: the commit record, every file's size and hash, every manifest rule, the
// HDF5 structure against the manifest, every tensor hash. Any single-bit flip or truncation of
// any file of the checkpoint appears in `problems`.
VerifyReport verify_checkpoint(Env* env, const std::string& step_dir);

}  // namespace ckpt::store
