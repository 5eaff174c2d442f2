// Non-blocking save benchmark: the stall a training loop sees with store::BackgroundSaver
// (snapshot copy into the reused arena) and the total time to commit, against the blocking save
// (write_rank + commit + retention) of the same state and a raw pwrite + fdatasync of the same
// bytes, all in this process. Prints medians and ratios; no assertions.
//   blocking save        write_rank + commit + apply_retention on this thread
//   non-blocking stall   BackgroundSaver::submit() (the previous save is waited for first)
//   non-blocking total   submit() to wait() returning: the checkpoint committed
// The first non-blocking save also allocates the arena (printed apart); later ones reuse it.
// Both saves write through Env::posix_direct_io(), the Checkpointer's default.
// Usage: async_save_bench [--mb 512] [--tensor-mb 8] [--small 256] [--reps 5] [--dir /tmp/...]
#include <thread>

#include "bench/bench_state.h"
#include "bench/bench_util.h"
#include "ckpt/store/background_save.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace ckpt::bench {
namespace {

constexpr char kUsage[] =
    "usage: async_save_bench [--mb N] [--tensor-mb N] [--small N] [--reps N] "
    "[--dir D]";

Status save_steps(Env* env, const std::string& run, int64_t step, Node* root) {
  const std::string sd = path_join(run, step_dir_name(step));
  CKPT_RETURN_IF_ERROR(env->make_dirs(sd));
  CKPT_RETURN_IF_ERROR(store::write_rank(env, sd, 0, step, 1, root).status());
  CKPT_RETURN_IF_ERROR(store::commit(env, run, step, 1, {"model", "optimizer", "train"}));
  return store::apply_retention(env, run, 1, 0);
}

// A tree that borrows the state's bytes, as a capture produces it.
Node borrowed(const State& s) { return s.root; }

int run(const BenchFlags& a) {
  Env* env = Env::posix_direct_io();  // as the Checkpointer writes by default
  const std::string base = work_dir(a.dir, "ckpt-async-bench");
  if (base.empty()) return 1;
  State s;
  build_state(a.mb, a.tensor_mb, a.small, &s);
  std::printf(
      "async_save_bench: %zu tensors, %.1f MB of tensor bytes, %llu reps (median), dir %s\n",
      s.spans.size(), s.bytes / 1e6, static_cast<unsigned long long>(a.reps), base.c_str());
  std::printf("load average at start: %s (%u cores)\n", load_average().c_str(),
              std::thread::hardware_concurrency());
  const std::string run_dir = path_join(base, "run");
  const std::string raw_file = path_join(base, "raw.bin");
  std::vector<double> t_raw, t_block, t_stall, t_total;
  double first_stall = 0;
  int64_t step = 0;
  store::BackgroundSaver saver;
  for (uint64_t r = 0; r < a.reps; ++r) {
    t_raw.push_back(raw_save(raw_file, s));
    Node tree = borrowed(s);
    auto t0 = Clock::now();
    if (Status st = save_steps(env, run_dir, ++step, &tree); !st.is_ok()) {
      std::fprintf(stderr, "async_save_bench: %s\n", st.to_string().c_str());
      return 1;
    }
    t_block.push_back(seconds_since(t0));
    // Non-blocking: the stall, then the rest of the save in the background.
    const int64_t bg_step = ++step;
    store::BackgroundJob job;
    job.label = "step " + std::to_string(bg_step);
    job.write = [&, bg_step](Node* root, const store::SubmitReport&) {
      return save_steps(env, run_dir, bg_step, root);
    };
    t0 = Clock::now();
    if (Status st = saver.submit(borrowed(s), std::move(job)); !st.is_ok()) {
      std::fprintf(stderr, "async_save_bench: %s\n", st.to_string().c_str());
      return 1;
    }
    const double stall = seconds_since(t0);
    if (Status st = saver.wait(); !st.is_ok()) {
      std::fprintf(stderr, "async_save_bench: %s\n", st.to_string().c_str());
      return 1;
    }
    const double total = seconds_since(t0);
    if (r == 0) {
      first_stall = stall;  // includes allocating (and faulting in) the arena
    } else {
      t_stall.push_back(stall);
      t_total.push_back(total);
    }
  }
  if (t_stall.empty()) {
    t_stall.push_back(first_stall);
    t_total.push_back(0);
  }
  const double raw = median(t_raw), block = median(t_block), stall = median(t_stall),
               total = median(t_total);
  const RowPrinter out{40, "raw", s.bytes};
  out.row("raw pwrite + fdatasync", raw);
  out.row("blocking save (write_rank+commit)", block, mb_per_s(s.bytes, raw));
  std::printf("  %-40s %8.3f s (first save, arena allocated: %.3f s)\n",
              "non-blocking stall (arena reused)", stall, first_stall);
  std::printf("  %-40s %8.3f s\n", "non-blocking total (submit to committed)", total);
  std::printf("  stall vs blocking save: %.1fx shorter; vs raw write: %.1fx shorter\n",
              block / stall, raw / stall);
  const store::BackgroundSaverStats st = saver.stats();
  std::printf("  arena: %.1f MB, allocated %llu time(s) over %llu saves\n", st.arena_capacity / 1e6,
              static_cast<unsigned long long>(st.arena_allocations),
              static_cast<unsigned long long>(st.submitted));
  if (a.dir.empty()) (void)env->remove_tree(base);
  return 0;
}

}  // namespace
}  // namespace ckpt::bench

int main(int argc, char** argv) {
  namespace b = ckpt::bench;
  b::BenchFlags a;
  b::FlagParser flags;
  flags.bench_flags(&a, false);
  return b::parse_or_usage(flags, argc, argv, b::kUsage) ? b::run(a) : 64;
}
