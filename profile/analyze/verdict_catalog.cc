#include "profile/analyze/verdict_catalog.h"

namespace ckpt::profile {

const char* const kVerdictIds[kNumVerdicts] = {
    "hung",           "input_bound",      "cpu_bound_loader", "io_bound_loader",    "straggler",
    "periodic_stall", "collective_bound", "pageable_h2d",     "sequence_imbalance", "compute_bound",
    "gpu_idle"};

namespace {

const std::vector<VerdictText>& catalog() {
  static const std::vector<VerdictText> kCatalog = {
      {"hung",
       "steps stopped advancing",
       "py-spy dump / gdb thread backtraces on every rank; NCCL_DEBUG=INFO or "
       "TORCH_DISTRIBUTED_DEBUG=DETAIL to see which collective each rank is in",
       {{"find the rank that did not enter the collective (the others wait in it) and fix it",
         "small once found"},
        {"set a collective timeout so a hang fails fast instead of burning the allocation",
         "free"}},
       {"tuning throughput before the hang is explained: a hung collective has a different fix"}},
      {"input_bound",
       "steps wait for input data",
       "rerun with synthetic in-memory batches: if the step time drops by the data-wait share, "
       "the input pipeline is the bottleneck; record host CPU alongside (the ckpt recorder does)",
       {{"more DataLoader workers and deeper prefetch (prefetch_factor)",
         "free to try; if it does not help, that itself says CPU-bound"},
        {"fix the dataset layout: sequential shards of 100 MB-1 GB, cheap-to-decode encoding",
         "medium: one re-export"},
        {"move deterministic preprocessing offline, keep random augmentation online",
         "medium: one offline pass"}},
       {"adding GPUs to a starved job: it adds load to the saturated loader and worsens the tail",
        "more learning-rate tuning when the loss curve is healthy"}},
      {"cpu_bound_loader",
       "the input pipeline is limited by host CPU (decode/augment/collate)",
       "per-process CPU of the loader workers (top -H / pidstat -t 1) while training",
       {{"move deterministic decode/resize offline; store pre-resized, cheap-to-decode data",
         "medium: one offline pass"},
        {"GPU decode/augment (DALI, torchvision.io.decode_jpeg on device)", "medium: code change"},
        {"use more host cores per GPU, or a cheaper codec", "medium to large"}},
       {"more DataLoader workers beyond the core count: the cores are already saturated",
        "adding GPUs: more demand on the same saturated CPUs"}},
      {"io_bound_loader",
       "the input pipeline waits on storage (I/O or metadata latency)",
       "iostat -x 1 and the dataset layout (ckpt profile layout DIR): file count and size "
       "distribution; many small files move the bottleneck to metadata",
       {{"repack loose files into sequential shards of 100 MB-1 GB (tar/webdataset, parquet)",
         "medium: one re-export"},
        {"more workers and deeper prefetch to hide latency", "free"},
        {"stage the dataset on local NVMe or in page cache", "small to medium"}},
       {"faster CPUs or GPU decode: the CPUs are idle, they are waiting for bytes",
        "adding GPUs: more load on the same storage"}},
      {"straggler",
       "one rank is consistently slow and the others wait for it in collectives",
       "per-rank compute time without collectives on the slow rank's host: nvidia-smi -q "
       "(clocks, temperature, throttling), other processes, its data shard sizes",
       {{"drain or replace the slow node, or fix what slows it (thermal throttling, a noisy "
         "neighbour, a slower NIC)",
         "small once identified"},
        {"per-rank tail monitoring so the next straggler is named automatically", "small"}},
       {"tuning collectives (bucket sizes, algorithms): the time in them is waiting, not "
        "transfer",
        "adding ranks: every added rank is another chance to wait for the slowest"}},
      {"periodic_stall",
       "slow steps recur every K steps",
       "match K against the checkpoint, eval, logging and GC intervals; time the stalled step's "
       "phases with annotations (record_function(\"checkpoint\")) if they are unattributed",
       {{"asynchronous checkpointing: block only for the device-to-host copy, write in the "
         "background",
         "medium"},
        {"run evaluation less often or on a separate process/node", "small"},
        {"collect garbage on a schedule (gc.freeze, gc.collect every N steps on all ranks)",
         "small"}},
       {"judging throughput by the mean step time: the stall is in the tail and grows with rank "
        "count"}},
      {"collective_bound",
       "the step is dominated by collective transfer time",
       "the transfer part of collective time (its minimum over ranks) against the link bandwidth; "
       "nccl-tests all_reduce_perf on the same nodes",
       {{"overlap communication with backward (DDP bucket_cap_mb, gradient as bucket view)",
         "small"},
        {"gradient accumulation or a larger batch per rank to communicate less often",
         "small; changes the optimisation"},
        {"compression or lower-precision gradients (bf16 all-reduce)", "medium"}},
       {"adding ranks on the same network: the transfer does not shrink per rank"}},
      {"pageable_h2d",
       "host-to-device copies come from pageable memory",
       "count of pageable vs pinned Memcpy HtoD events per step in a CUDA trace",
       {{"DataLoader(pin_memory=True) and .to(device, non_blocking=True)", "free"},
        {"a pinned staging ring for custom loaders", "small"}},
       {"pinning everything when the bottleneck is upstream: small gain if data wait dominates"}},
      {"sequence_imbalance",
       "step time follows the number of tokens in the step",
       "tokens per rank per step and the padding fraction",
       {{"pack sequences or bucket by length so every rank gets similar token counts",
         "medium: loader change"},
        {"token-based (not sample-based) batching", "medium"}},
       {"blaming a slow node: the slowness moves with the data, not with the rank"}},
      {"compute_bound",
       "the step is spent in computation: the input pipeline keeps up",
       "kernel-level profile (GPU utilisation, SM occupancy, tensor-core use) of a few steps",
       {{"mixed precision (bf16/fp16) and fused kernels", "small to medium"},
        {"larger batch per GPU if memory allows", "small; changes the optimisation"},
        {"activation checkpointing trade-offs, compiler (torch.compile)", "medium"}},
       {"more DataLoader workers or faster storage: input is not the bottleneck"}},
      {"gpu_idle",
       "the GPU sits idle waiting for the host",
       "the GPU timeline of a few steps (the trace's stream rows): look for gaps before the "
       "first kernel of each step (data), around cuda*Synchronize calls (host syncs) and between "
       "small kernels (launch-bound)",
       {{"if the idle time is spent waiting for data: the input_bound fixes (workers, prefetch, "
         "pinned memory with non_blocking copies)",
         "free to small"},
        {"remove host syncs in the step (.item(), .cpu(), printing losses every step)", "small"},
        {"CUDA graphs or torch.compile for launch-bound steps of many small kernels", "medium"}},
       {"a faster GPU: the GPU is already waiting"}},
  };
  return kCatalog;
}

}  // namespace

const char* verdict_name(VerdictId id) {
  auto i = static_cast<size_t>(id);
  return i < size_t(kNumVerdicts) ? kVerdictIds[i] : "unknown";
}

std::optional<VerdictId> verdict_from_name(std::string_view name) {
  for (int i = 0; i < kNumVerdicts; ++i) {
    if (name == kVerdictIds[i]) return static_cast<VerdictId>(i);
  }
  return std::nullopt;
}

double verdict_min_share(VerdictId id) {
  static constexpr double kMinShare[kNumVerdicts] = {/*hung*/ 0,
                                                     /*input_bound*/ 0.05,
                                                     /*cpu_bound_loader*/ 0,
                                                     /*io_bound_loader*/ 0,
                                                     /*straggler*/ 0.01,
                                                     /*periodic_stall*/ 0.02,
                                                     /*collective_bound*/ 0.10,
                                                     /*pageable_h2d*/ 0.01,
                                                     /*sequence_imbalance*/ 0.02,
                                                     /*compute_bound*/ 0.80,
                                                     /*gpu_idle*/ 0.20};
  auto i = static_cast<size_t>(id);
  return i < size_t(kNumVerdicts) ? kMinShare[i] : 0;
}

std::vector<Fix> verdict_fixes(VerdictId id, std::string_view cause) {
  const VerdictText* t = verdict_text(id);
  if (t == nullptr) return {};
  if (id != VerdictId::kPeriodicStall) return t->fixes;
  const std::vector<Fix>& f = t->fixes;  // async checkpoint, eval less often, scheduled GC
  if (cause == "checkpoint") return {f[0]};
  if (cause == "eval") return {f[1]};
  if (cause == "data_wait") {
    auto input = verdict_text(VerdictId::kInputBound)->fixes;
    input.insert(input.begin(), {"deeper prefetch (prefetch_factor) so the workers' bursts are "
                                 "absorbed instead of stalling one step in K",
                                 "free"});
    return input;
  }
  if (cause == "collective") return verdict_text(VerdictId::kStraggler)->fixes;
  if (cause == "compute" || cause == "forward" || cause == "backward" || cause == "optimizer") {
    return verdict_text(VerdictId::kSequenceImbalance)->fixes;
  }
  if (cause == "unattributed") {
    return {f[2],
            {"annotate the stalled steps' untimed work (record_function around logging, "
             "metrics, host syncs) so the next trace names it",
             "free"}};
  }
  return f;
}

const VerdictText* verdict_text(VerdictId id) {
  return verdict_text(std::string(verdict_name(id)));
}

const VerdictText* verdict_text(const std::string& id) {
  for (const auto& v : catalog()) {
    if (id == v.id) return &v;
  }
  return nullptr;
}

}  // namespace ckpt::profile
