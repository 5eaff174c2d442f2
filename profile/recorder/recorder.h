// StepRecorder: times the phases of every training step on one rank and writes them to that
// rank's file, off the hot path.
//
// Usage (one recorder per rank, owned by the training loop):
//   auto rec = StepRecorder::open({.path = "run/profile-rank00001.jsonl", .rank = 1,
//                                  .world_size = 8});
//   { auto s = (*rec)->phase(Phase::kDataWait); batch = loader.next(); }
//   { auto s = (*rec)->phase(Phase::kForward); ... }
//   (*rec)->end_step(/*samples=*/batch_size, /*tokens=*/tokens_in_batch);
//   ...
//   (*rec)->close();  // or let the destructor do it
// Phases nest: an inner phase pauses the outer one, so every nanosecond is counted once. Time in no
// phase is "unattributed" and shows up as `other` in the analysis.
//
// Threading: phase(), begin_phase(), end_phase(), note_h2d_copy() and end_step() belong to the
// training thread (one thread per recorder; they touch no lock, only end_step takes an
// uncontended mutex once per step). A background thread samples /proc every sample_period,
// writes finished steps and the samples, and collects CUDA event timings; flush() and close() may
// be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/base/status.h"
#include "profile/recorder/gpu_timer.h"
#include "profile/recorder/step_record.h"

namespace ckpt::profile {

struct RecorderOptions {
  std::string path;  // this rank's file; one file per rank, e.g. profile-rank00001.jsonl
  int rank = 0;
  int world_size = 1;
  int64_t first_step = 0;  // the step number of the first end_step (for resumed runs)
  std::chrono::milliseconds sample_period{100};
  std::unique_ptr<GpuPhaseTimer> gpu;  // optional: CUDA events for GPU phases
};

class StepRecorder {
 public:
  // On success the file exists with its header and the sampler thread runs. On failure: IoError
  // naming the path, or InvalidArgument for a bad rank/world size.
  static Result<std::unique_ptr<StepRecorder>> open(RecorderOptions options);
  ~StepRecorder();
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  // RAII phase: ends the phase it began when it goes out of scope.
  class [[nodiscard]] Scope {
   public:
    explicit Scope(StepRecorder* r) : r_(r) {}
    Scope(Scope&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (r_ != nullptr) r_->end_phase();
    }

   private:
    StepRecorder* r_;
  };
  Scope phase(Phase p) {
    begin_phase(p);
    return Scope(this);
  }

  void begin_phase(Phase p) {
    int64_t now = now_ns();
    if (depth_ > 0) acc_[index(stack_[depth_ - 1])] += now - since_;
    if (depth_ < kMaxDepth) {
      stack_[depth_++] = p;
    } else {
      ++overflow_;  // deeper than kMaxDepth: counted to the innermost phase that fits
    }
    since_ = now;
    current_phase_.store(index(p), std::memory_order_relaxed);
    if (gpu_ && is_gpu_phase(p)) gpu_->begin(p);
  }

  // Ends the innermost open phase; the phase it interrupted resumes.
  void end_phase() {
    int64_t now = now_ns();
    if (overflow_ > 0) {
      --overflow_;
      return;
    }
    if (depth_ == 0) return;
    Phase p = stack_[--depth_];
    acc_[index(p)] += now - since_;
    since_ = now;
    current_phase_.store(depth_ > 0 ? index(stack_[depth_ - 1]) : -1, std::memory_order_relaxed);
    if (gpu_ && is_gpu_phase(p)) gpu_->end(p);
  }

  // Counts one host-to-device copy in the current step, from pinned or pageable host memory.
  void note_h2d_copy(bool pinned) { pinned ? ++pinned_ : ++pageable_; }

  // Closes the current step: its wall time runs from the previous end_step (or open). Phases still
  // open carry on into the next step.
  void end_step(int64_t samples, int64_t tokens = 0);

  // Blocks until every ended step is written and flushed. Returns the first write error, if any.
  Status flush();
  // Stops the sampler, writes what is left and the end marker, closes the file. Idempotent.
  Status close();

  int64_t next_step() const { return step_; }
  const std::string& path() const { return path_; }

  // Monotonic nanoseconds (steady_clock; a vDSO read, ~20 ns).
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  StepRecorder() = default;
  void writer_loop();
  void write_pending(std::vector<StepRecord>& batch, std::string& buf);

  static constexpr int kMaxDepth = 8;

  // Training thread only.
  std::array<Phase, kMaxDepth> stack_{};
  int depth_ = 0;
  int overflow_ = 0;
  int64_t since_ = 0;
  std::array<int64_t, kNumPhases> acc_{};
  int64_t step_start_ns_ = 0;
  int64_t step_ = 0;
  int32_t pinned_ = 0, pageable_ = 0;

  // Read by the sampler for its heartbeat ("step 1234 in collective").
  std::atomic<int64_t> current_step_{0};
  std::atomic<int> current_phase_{-1};

  // Shared with the writer thread, under mu_.
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable written_;
  std::vector<StepRecord> pending_;
  uint64_t ended_ = 0;      // steps handed to the writer
  uint64_t written_n_ = 0;  // steps on disk
  bool flush_requested_ = false;
  bool stop_ = false;
  bool closed_ = false;
  Status error_;

  std::string path_;
  int64_t origin_ns_ = 0;
  std::chrono::milliseconds period_{100};
  std::unique_ptr<GpuPhaseTimer> gpu_;
  std::FILE* file_ = nullptr;
  std::thread writer_;
};

}  // namespace ckpt::profile
