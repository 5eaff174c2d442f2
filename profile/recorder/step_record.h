// The step profiler's data model: what one rank did in each training step.
//
// A RankTrace is what the recorder writes and what every importer (PyTorch chrome traces, recorder
// files) produces; the analyzer only ever sees RankTraces. Times are seconds from the rank's own
// origin (its first step or the recorder's start), so ranks are compared by step number, never by
// wall-clock alignment. Plain values: no sharing, no locking; copy or move them freely.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::profile {

// The phases of a step, in the order DESIGN.md lists them. The numeric values are part of the
// recorder file format (the "p" array), so append only.
enum class Phase : uint8_t {
  kDataWait = 0,
  kH2D,
  kForward,
  kBackward,
  kOptimizer,
  kCollective,
  kCheckpoint,
  kEval,
  kOther,
};
constexpr int kNumPhases = 9;
using PhaseTimes = std::array<double, kNumPhases>;  // seconds per phase

const char* phase_name(Phase p);  // "data_wait", "h2d", ...
std::optional<Phase> phase_from_name(std::string_view name);
inline int index(Phase p) { return static_cast<int>(p); }

// What the GPU did inside one step's window, from CUDA kernel, memcpy and memset events on the
// device's streams (Kineto GPU traces). All zero when the trace carries no GPU activity.
struct GpuStep {
  double busy_s = 0;               // union of every GPU activity in the step window, all streams
  double compute_s = 0;            // union of the kernels that are not communication
  double comm_s = 0;               // union of the NCCL kernels (ncclKernel_*, ncclDevKernel_*)
  double exposed_comm_s = 0;       // NCCL time with no compute kernel running beside it
  double idle_in_data_wait_s = 0;  // GPU idle while the host waited for the data loader
  double sync_s = 0;               // host time blocked in cuda*Synchronize
  double pageable_h2d_s = 0;       // GPU time of HtoD copies from pageable memory
};

struct StepRecord {
  int64_t step = 0;
  double start_s = 0;     // from the rank's origin
  double duration_s = 0;  // wall time of the whole step
  PhaseTimes phase_s{};   // exclusive time per phase; the rest of duration_s is unattributed
  PhaseTimes gpu_s{};     // GPU time per phase from CUDA events; all zero when not measured
  int64_t samples = 0;
  int64_t tokens = 0;
  int32_t pageable_h2d = 0;  // host-to-device copies from pageable memory in this step
  int32_t pinned_h2d = 0;    // ... and from pinned memory
  GpuStep gpu;               // from GPU trace events (importer only; not in recorder files)
};

// One sample of the background sampler (every 100 ms by default).
struct CpuSample {
  double t_s = 0;
  double host_busy = 0;     // fraction of all cores busy (user+nice+system+irq+softirq+steal)
  double host_iowait = 0;   // fraction of all cores idle waiting for I/O
  double process_busy = 0;  // this process's CPU time / wall time / cores
  int64_t step = -1;        // the step in progress when sampled (-1: before the first)
  int phase = -1;           // the phase in progress (index), -1: none
};

struct RankTrace {
  std::string source;  // the file it came from
  std::string format;  // "ckpt-profile" or "pytorch-trace"
  int rank = -1;
  int world_size = 0;
  int cpu_cores = 0;
  std::vector<StepRecord> steps;
  std::vector<CpuSample> cpu;
  double end_s = 0;        // the last moment the file shows the rank alive
  bool clean_end = false;  // the recorder closed the file (false: killed, hung, or a trace)
  bool has_gpu = false;    // the trace carries GPU kernel/copy events (StepRecord::gpu is set)
  // The DataLoader iterator class a trace names ("_MultiProcessingDataLoaderIter",
  // "_SingleProcessDataLoaderIter"), empty when unknown.
  std::string loader_iter;
  // Traces only: the first step's start on the trace's own clock (Kineto: µs since the epoch, so
  // captures of one process order in time; the legacy form starts each capture near 0), and the
  // OS process id of the step events (-1 when the trace does not record one).
  double origin_s = 0;
  int64_t pid = -1;
  // How the input files became this rank (several captures joined, a rank that had to be
  // guessed): the analyzer copies these into Report::notes.
  std::vector<std::string> layout_notes;
};

}  // namespace ckpt::profile
