// shard_index_bench: format version 2's box index at scale, by simulation in one process (no
// ranks launched, no files written). For a 7B-parameter Llama-shaped model (32 layers, hidden
// 4096, MLP 11008, vocab 32000: 291 tensors) plus Adam's two moments (873 float32 tensors), laid
// out under FSDP (Shard(0) over all ranks) and FSDP x TP 8 (colwise Shard(0) / rowwise Shard(1)
// over TP, Shard(0) over the data-parallel ranks, norms replicated over TP and written once by
// the owner rule), at 1,024 and 4,096 ranks, it measures:
//   - rank 0's index build: every box from the placements, each rank file's byte offsets and
//     XXH3s (synthesised here; a real commit gathers them from the ranks' manifests), the
//     builder, encode_index. Time and peak heap (every allocation counted) during it.
//   - the index's size, bytes per box, and a full decode_index + tiling check;
//   - every rank's restore planning for the same layout and for a restore at half the ranks, as
//     ShardRead does it: the INDEX read from a step directory (in memory) as
//     resume::read_index_for reads it — the head, then the records the rank's targets meet —
//     and plan_reshard; time per rank, and the bytes and reads of the INDEX it made.
// Goals (issue 22): build <= 1 s and <= 64 MB at 1,024 ranks, <= 32 B per box, plan <= 100 ms,
// <= 64 KiB of index read per rank.
// DCP's figures for the same layout come from bench/shard_scale_dcp.py (torch's planner and
// pickle), which runs this program after its own.
//   shard_index_bench [--ranks 1024,4096] [--quick]
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/io/mem_env.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/box_owner.h"
#include "ckpt/store/box_tiling.h"
#include "resume/index_read.h"
#include "resume/reshard_plan.h"

// --- heap accounting: every operator new/delete of the process
// ------------------------------------
namespace {
std::atomic<int64_t> g_heap{0}, g_peak{0};
void note_alloc(void* p) {
  if (!p) return;
  const int64_t now = g_heap.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                      static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void note_free(void* p) {
  if (p) g_heap.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
}
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace {

using ckpt::DType;
using ckpt::store::BoxSource;
using ckpt::store::Extent;
using ckpt::store::GlobalIndex;
using ckpt::store::IndexBuilder;
using ckpt::store::Placement;
using ckpt::store::TensorSpec;

// Wall time, and this thread's CPU time: on a shared machine the wall time also counts the time
// spent waiting for a core, so both are printed and the goals are judged on the CPU time.
struct Clock {
  double wall = 0, cpu = 0;
  static Clock now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return {
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
        ts.tv_sec + ts.tv_nsec * 1e-9};
  }
  Clock since(const Clock& start) const { return {wall - start.wall, cpu - start.cpu}; }
};

// How tensor parallelism places a parameter.
enum class Tp { kColwise, kRowwise, kReplicated };

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  Tp tp;
};

std::vector<Param> llama_7b() {
  const int64_t h = 4096, mlp = 11008, vocab = 32000;
  std::vector<Param> p;
  p.push_back({"tok_embeddings.weight", {vocab, h}, Tp::kColwise});
  for (int l = 0; l < 32; ++l) {
    const std::string b = "layers." + std::to_string(l) + ".";
    for (const char* w : {"attention.wq", "attention.wk", "attention.wv"}) {
      p.push_back({b + w + ".weight", {h, h}, Tp::kColwise});
    }
    p.push_back({b + "attention.wo.weight", {h, h}, Tp::kRowwise});
    p.push_back({b + "feed_forward.w1.weight", {mlp, h}, Tp::kColwise});
    p.push_back({b + "feed_forward.w2.weight", {h, mlp}, Tp::kRowwise});
    p.push_back({b + "feed_forward.w3.weight", {mlp, h}, Tp::kColwise});
    p.push_back({b + "attention_norm.weight", {h}, Tp::kReplicated});
    p.push_back({b + "ffn_norm.weight", {h}, Tp::kReplicated});
  }
  p.push_back({"norm.weight", {h}, Tp::kReplicated});
  p.push_back({"output.weight", {vocab, h}, Tp::kColwise});
  return p;
}

// torch.chunk's part r of n over k: (offset, size).
std::pair<int64_t, int64_t> chunk(int64_t n, int64_t k, int64_t r) {
  const int64_t c = (n + k - 1) / k;
  const int64_t lo = std::min(r * c, n), hi = std::min((r + 1) * c, n);
  return {lo, hi - lo};
}

struct Layout {
  int64_t ranks = 0, tp = 1;
  int64_t dp() const { return ranks / tp; }
  // The box global rank `rank` holds of `p` (rank = dp_index * tp + tp_index), and whether it
  // writes it (a replicated box is written by its owner only).
  Extent box(const Param& p, int64_t rank) const {
    const int64_t d = rank / tp, t = rank % tp;
    Extent e = ckpt::store::make_extent(std::vector<int64_t>(p.shape.size(), 0), p.shape);
    if (tp > 1 && p.tp == Tp::kColwise) {  // TP outer, FSDP inner along dimension 0
      auto [o, s] = chunk(e.sizes[0], tp, t);
      e.offsets[0] = o;
      e.sizes[0] = s;
    } else if (tp > 1 && p.tp == Tp::kRowwise) {
      auto [o, s] = chunk(e.sizes[1], tp, t);
      e.offsets[1] = o;
      e.sizes[1] = s;
    }
    auto [o, s] = chunk(e.sizes[0], dp(), d);
    e.offsets[0] += o;
    e.sizes[0] = s;
    return e;
  }
};

struct Tensor {
  std::string name;
  const Param* param;
};

std::vector<Tensor> with_adam(const std::vector<Param>& params) {
  std::vector<Tensor> t;
  for (const Param& p : params) t.push_back({"model/" + p.name, &p});
  for (const Param& p : params) t.push_back({"optimizer/state/" + p.name + "/exp_avg", &p});
  for (const Param& p : params) t.push_back({"optimizer/state/" + p.name + "/exp_avg_sq", &p});
  return t;
}

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

struct BuildResult {
  GlobalIndex index;
  std::string bytes;
  Clock took;
  int64_t peak_heap = 0;
};

BuildResult build_index(const Layout& layout, const std::vector<Tensor>& tensors) {
  const int64_t heap_before = g_heap.load();
  g_peak.store(heap_before);
  const Clock t0 = Clock::now();
  // Owners of replicated boxes, within each TP group (every group sees the same sizes).
  std::vector<int64_t> owner_tp(tensors.size(), 0);
  if (layout.tp > 1) {
    std::vector<ckpt::store::ReplicatedItem> items;
    std::vector<size_t> which;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].param->tp != Tp::kReplicated) continue;
      const Extent e = layout.box(*tensors[i].param, 0);
      items.push_back({tensors[i].name, e.numel() * 4});
      which.push_back(i);
    }
    ckpt::store::OwnerOptions o;
    for (int64_t t = 0; t < layout.tp; ++t) o.candidates.push_back(t);
    auto a = ckpt::store::assign_owners(items, o);
    if (!a.is_ok()) {
      std::fprintf(stderr, "%s\n", a.status().to_string().c_str());
      std::exit(1);
    }
    for (size_t k = 0; k < which.size(); ++k) owner_tp[which[k]] = a->owner[k];
  }
  const size_t boxes_total = tensors.size() * static_cast<size_t>(layout.ranks);
  IndexBuilder b(1000);
  b.reserve(tensors.size(), boxes_total);
  std::vector<uint32_t> files(layout.ranks);
  for (int64_t r = 0; r < layout.ranks; ++r) {
    char name[32];
    std::snprintf(name, sizeof(name), "rank-%05lld.h5", static_cast<long long>(r));
    files[r] = *b.add_file(name);
  }
  std::vector<uint64_t> next_offset(layout.ranks, 4096);
  std::vector<BoxSource> sources;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const uint32_t dataset = *b.intern(t.name);
    sources.clear();
    for (int64_t r = 0; r < layout.ranks; ++r) {
      if (t.param->tp == Tp::kReplicated && layout.tp > 1 && r % layout.tp != owner_tp[i]) continue;
      BoxSource s;
      s.extent = layout.box(*t.param, r);
      if (s.extent.empty()) continue;
      s.file = files[r];
      s.dataset = dataset;
      s.offset = next_offset[r];
      next_offset[r] += (s.extent.numel() * 4 + 4095) / 4096 * 4096;
      s.xxh3 = mix(i * 1000003ull + static_cast<uint64_t>(r));
      sources.push_back(s);
    }
    const Placement pl = t.param->tp == Tp::kReplicated && layout.tp > 1 ? Placement::kReplicated
                                                                         : Placement::kSharded;
    TensorSpec spec{t.name, DType::kFloat32, t.param->shape, pl};
    const ckpt::Status s = b.add_tensor(spec, sources);
    if (!s.is_ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      std::exit(1);
    }
  }
  std::vector<BoxSource>().swap(sources);
  BuildResult out;
  out.index = std::move(b).finish();
  out.bytes = ckpt::store::encode_index(out.index);
  out.took = Clock::now().since(t0);
  out.peak_heap = g_peak.load() - heap_before;
  return out;
}

std::vector<ckpt::resume::TargetBox> targets_of(const Layout& layout,
                                                const std::vector<Tensor>& tensors, int64_t rank) {
  std::vector<ckpt::resume::TargetBox> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back({t.name, layout.box(*t.param, rank)});
  return out;
}

struct PlanStats {
  double max_s = 0, sum_s = 0, max_wall = 0;  // CPU seconds, and the largest wall time
  std::vector<double> cpu;                    // per rank
  double quantile(double q) const {
    std::vector<double> v = cpu;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  }
  uint64_t max_files = 0, max_index_bytes = 0, max_index_reads = 0;
  int64_t ranks = 0;
};

// The INDEX where a restore finds it: in a step directory, listed in the commit record with the
// XXH3 of the file and of its head.
struct StepDir {
  ckpt::MemEnv env;
  ckpt::CommitRecord record;
  const std::string dir = "run/step-000000001000";
  explicit StepDir(const std::string& bytes) {
    if (!env.make_dirs(dir).is_ok() || !env.write_atomic(dir + "/INDEX", bytes).is_ok()) {
      std::fprintf(stderr, "cannot write the INDEX in memory\n");
      std::exit(1);
    }
    record.step = 1000;
    record.files.push_back({"INDEX", bytes.size(), ckpt::xxh3_64(bytes.data(), bytes.size()),
                            ckpt::store::index_head_xxh3(bytes)});
  }
};

// What each sampled rank of `target` does before it reads a byte of a rank file: read the INDEX
// as a restore does (its head and the records its targets meet: resume/index_read.h) and plan.
PlanStats plan_ranks(StepDir& step, const Layout& target, const std::vector<Tensor>& tensors,
                     int64_t stride) {
  PlanStats st;
  for (int64_t r = 0; r < target.ranks; r += stride) {
    const auto targets = targets_of(target, tensors, r);
    const Clock t0 = Clock::now();
    ckpt::resume::IndexReadStats read;
    auto index = ckpt::resume::read_index_for(&step.env, step.dir, step.record, targets, {}, &read);
    if (!index.is_ok()) {
      std::fprintf(stderr, "rank %lld: %s\n", static_cast<long long>(r),
                   index.status().to_string().c_str());
      std::exit(1);
    }
    auto plan = ckpt::resume::plan_reshard(*index, targets);
    const Clock took = Clock::now().since(t0);
    const double dt = took.cpu;
    st.max_wall = std::max(st.max_wall, took.wall);
    if (!plan.is_ok()) {
      std::fprintf(stderr, "rank %lld: %s\n", static_cast<long long>(r),
                   plan.status().to_string().c_str());
      std::exit(1);
    }
    st.max_s = std::max(st.max_s, dt);
    st.cpu.push_back(dt);
    st.sum_s += dt;
    st.max_files = std::max<uint64_t>(st.max_files, plan->files.size());
    st.max_index_bytes = std::max<uint64_t>(st.max_index_bytes, read.bytes);
    st.max_index_reads = std::max<uint64_t>(st.max_index_reads, read.reads);
    ++st.ranks;
  }
  return st;
}

void run(int64_t ranks, int64_t tp, const std::vector<Tensor>& tensors, bool quick) {
  const Layout layout{ranks, tp};
  BuildResult built = build_index(layout, tensors);
  const GlobalIndex& index = built.index;
  const double per_box = static_cast<double>(built.bytes.size()) / index.box_count();
  const Clock t1 = Clock::now();
  auto decoded = ckpt::store::decode_index(built.bytes, "INDEX");
  const Clock decode = Clock::now().since(t1);
  if (!decoded.is_ok()) {
    std::fprintf(stderr, "%s\n", decoded.status().to_string().c_str());
    std::exit(1);
  }
  const Clock t2 = Clock::now();
  const auto tiling = ckpt::store::check_index_tiling(*decoded);
  const Clock tiling_took = Clock::now().since(t2);
  // Sampled ranks step by an odd stride, so they fall on every TP index.
  const int64_t stride = quick ? ranks / 16 + 3 : 1;
  StepDir step(built.bytes);
  const PlanStats same = plan_ranks(step, layout, tensors, stride);
  const Layout half{ranks / 2, tp};
  const PlanStats resharded = plan_ranks(step, half, tensors, ranks / 16 + 3);
  const uint64_t dir = decoded->directory_bytes();

  std::printf("\n== %lld ranks, %s: %zu tensors, %zu boxes, %zu files\n",
              static_cast<long long>(ranks), tp > 1 ? "FSDP x TP 8" : "FSDP (Shard(0))",
              index.tensor_count(), index.box_count(), index.file_count());
  std::printf(
      "  rank-0 index build      %8.3f s cpu (%.3f s wall)  peak heap %.1f MiB (index %.1f MiB + "
      "bytes %.1f MiB)\n",
      built.took.cpu, built.took.wall, built.peak_heap / 1048576.0,
      index.memory_bytes() / 1048576.0, built.bytes.size() / 1048576.0);
  std::printf("  index size              %8.2f MiB  %.2f B/box (16 B/box record + %.1f KiB head)\n",
              built.bytes.size() / 1048576.0, per_box, dir / 1024.0);
  std::printf(
      "  decode whole + validate %8.3f s cpu (%.3f s wall)  tiling check %.3f s cpu (%s): what "
      "ckpt verify does\n",
      decode.cpu, decode.wall, tiling_took.cpu, tiling.ok() ? "exact" : "NOT exact");
  std::printf(
      "  read index + plan, same layout  %8.3f ms cpu median, %.3f p99, %.3f max (%.3f ms wall "
      "max) over %lld ranks%s; files per rank %llu\n",
      same.quantile(0.5) * 1e3, same.quantile(0.99) * 1e3, same.max_s * 1e3, same.max_wall * 1e3,
      static_cast<long long>(same.ranks), quick ? " (sampled)" : "",
      static_cast<unsigned long long>(same.max_files));
  std::printf(
      "  read index + plan, at %-5lld     %8.3f ms cpu max (%.3f ms wall max) over %lld sampled "
      "ranks; files per rank %llu\n",
      static_cast<long long>(half.ranks), resharded.max_s * 1e3, resharded.max_wall * 1e3,
      static_cast<long long>(resharded.ranks),
      static_cast<unsigned long long>(resharded.max_files));
  const uint64_t most = std::max(same.max_index_bytes, resharded.max_index_bytes);
  std::printf(
      "  index a rank reads      %8.1f KiB at most (head %.1f KiB + its records), in at most "
      "%llu reads (same layout) / %llu (at %lld)\n",
      most / 1024.0, dir / 1024.0, static_cast<unsigned long long>(same.max_index_reads),
      static_cast<unsigned long long>(resharded.max_index_reads),
      static_cast<long long>(half.ranks));
  std::printf(
      "  goals (1,024 ranks; times as cpu): build <= 1 s, <= 64 MiB; <= 32 B/box; plan <= 100 ms; "
      "<= 64 KiB of index per rank: "
      "%s\n",
      ranks != 1024 ? "n/a at this size"
      : (built.took.cpu <= 1 && built.peak_heap <= (64 << 20) && per_box <= 32 &&
         same.max_s <= 0.1 && resharded.max_s <= 0.1 && most <= (64 << 10))
          ? "met"
          : "NOT met");
  std::printf("  DCP: bench/shard_scale_dcp.py\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {1024, 4096};
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      sizes.clear();
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        sizes.push_back(std::strtoll(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr, "usage: shard_index_bench [--ranks 1024,4096] [--quick]\n");
      return 64;
    }
  }
  const std::vector<Param> params = llama_7b();
  const std::vector<Tensor> tensors = with_adam(params);
  uint64_t numel = 0;
  for (const Param& p : params) {
    uint64_t n = 1;
    for (int64_t s : p.shape) n *= static_cast<uint64_t>(s);
    numel += n;
  }
  std::printf(
      "shard_index_bench: Llama-7B-shaped, %zu parameters (%.2f B elements) + Adam = %zu "
      "float32 tensors\n",
      params.size(), numel / 1e9, tensors.size());
  for (int64_t ranks : sizes) {
    for (int64_t tp : {int64_t{1}, int64_t{8}}) {
      if (ranks % tp != 0) continue;
      run(ranks, tp, tensors, quick);
    }
  }
  return 0;
}
