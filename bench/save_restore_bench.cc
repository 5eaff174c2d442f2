// Save/restore benchmark: ckpt against the raw peer that bounds it, measured in the same process
// on the same bytes. Prints MB/s (tensor bytes / second, median of the repetitions) and ratios;
// no assertions.
//   (a) save: store::write_rank + store::commit vs pwrite of the same bytes into one file + fsync,
//       and (--torch-peer "/usr/bin/python3 bench/torch_save_peer.py") vs torch.save + fsync of
//       the same state, timed inside Python, interleaved with ours; --save-only stops after it;
//   (b) restore from the page cache (WARM): resume::restore_rank and store::read_rank, both in
//       place into the same pre-touched memory, vs pread of every tensor into that memory;
//   (c) the same restore COLD: the page cache is dropped before every run, residency is printed;
//   (d) hash verification: XXH3 over the state in memory vs the raw warm read.
// Usage: save_restore_bench [--mb 512] [--tensor-mb 8] [--small 256] [--reps 5] [--cold-reps 3]
//                           [--threads N] [--chunk-kb 1024] [--dir /tmp/...]
//                           [--torch-peer CMD] [--save-only]
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>

#include "bench/bench_state.h"
#include "bench/bench_util.h"
#include "bench/peer_process.h"
#include "ckpt/base/hash.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/pipeline.h"
#include "resume/restore.h"

namespace ckpt::bench {
namespace {

constexpr char kUsage[] =
    "usage: save_restore_bench [--mb 512] [--tensor-mb 8] [--small 256] [--reps 5] "
    "[--cold-reps 3] [--threads N] [--chunk-kb 1024] [--dir DIR] [--torch-peer CMD] "
    "[--save-only]";

struct Args : BenchFlags {
  uint64_t chunk_kb = 1024;
  std::string torch_peer;  // command of the torch.save peer (bench/torch_save_peer.py)
  bool save_only = false;
};

double hash_all(const State& s, unsigned threads, uint64_t* sink) {
  const auto t0 = Clock::now();
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> acc{0};
  auto work = [&] {
    uint64_t x = 0;
    for (size_t i; (i = next.fetch_add(1)) < s.spans.size();)
      x += xxh3_64(s.spans[i].first, s.spans[i].second);
    acc += x;
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  *sink += acc.load();
  return seconds_since(t0);
}

// One blocking save through the library (write_rank + commit) of step *step + 1, replacing the
// previous one; its times go to `t_write`, `t_commit` and `phases`.
bool ckpt_save(Env* env, State& s, const std::string& run_dir, int64_t* step,
               std::vector<double>* t_write, std::vector<double>* t_commit,
               std::map<std::string, std::vector<double>>* phases) {
  if (*step > 0) (void)env->remove_tree(path_join(run_dir, step_dir_name(*step)));
  ++*step;
  const std::string sd = path_join(run_dir, step_dir_name(*step));
  const auto t0 = Clock::now();
  if (!env->make_dirs(sd).is_ok()) return false;
  store::RankWriteStats ws;
  auto m = store::write_rank(env, sd, 0, *step, 1, &s.root, &ws);
  if (!m.is_ok()) {
    std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
    return false;
  }
  t_write->push_back(seconds_since(t0));
  (*phases)["1 tensor hashes"].push_back(ws.hash_seconds);
  (*phases)["2 HDF5 structure"].push_back(ws.structure_seconds);
  (*phases)["3 pwrite + whole-file hash"].push_back(ws.write_seconds);
  (*phases)["4 fdatasync"].push_back(ws.sync_seconds);
  (*phases)["5 rename + manifest"].push_back(ws.manifest_seconds);
  const auto t1 = Clock::now();
  Status c = store::commit(env, run_dir, *step, 1, {"model", "optimizer", "train"});
  if (!c.is_ok()) {
    std::fprintf(stderr, "%s\n", c.to_string().c_str());
    return false;
  }
  t_commit->push_back(seconds_since(t0));
  (*phases)["6 commit (COMMIT.json, LATEST)"].push_back(seconds_since(t1));
  return true;
}

// (a) save: raw pwrite + fdatasync, the library's blocking save (through Env::posix(), and
// through Env::posix_direct_io()) and (with --torch-peer)
// torch.save + fsync in the peer process, in a rotating order within each repetition so that
// all three see the same load. Leaves the last checkpoint as run/step-<*step>.
bool save_section(const Args& a, Env* env, State& s, const std::string& base, int64_t* step) {
  const std::string run_dir = path_join(base, "run");
  const std::string raw_file = path_join(base, "raw.bin");
  PeerProcess torch;
  std::string torch_version;
  if (!a.torch_peer.empty()) {
    std::string ready;
    const std::string cmd = a.torch_peer + " --mb " + std::to_string(a.mb) + " --tensor-mb " +
                            std::to_string(a.tensor_mb) + " --small " + std::to_string(a.small);
    if (!torch.start(cmd) || !torch.read_line(&ready) || ready.rfind("ready ", 0) != 0) {
      std::fprintf(stderr, "--torch-peer: \"%s\" did not start (said \"%s\")\n", cmd.c_str(),
                   ready.c_str());
      return false;
    }
    torch_version = ready.substr(ready.find(' ', 6) + 1);
  }
  std::vector<double> t_raw, t_write, t_commit, t_torch, t_bwrite, t_bcommit;
  std::map<std::string, std::vector<double>> phases, bphases;  // write_rank's own split
  for (uint64_t r = 0; r < a.reps; ++r) {
    for (uint64_t k = 0; k < 4; ++k) {
      switch ((k + r) % 4) {
        case 0:
          t_raw.push_back(raw_save(raw_file, s));
          break;
        case 1:
          if (!ckpt_save(env, s, run_dir, step, &t_write, &t_commit, &phases)) return false;
          break;
        case 2:
          if (!ckpt_save(Env::posix_direct_io(), s, run_dir, step, &t_bwrite, &t_bcommit, &bphases))
            return false;
          break;
        default:
          if (torch_version.empty()) break;
          std::string reply;
          if (!torch.request("save " + path_join(base, "torch.pt"), &reply)) return false;
          t_torch.push_back(std::strtod(reply.c_str(), nullptr));
      }
    }
  }
  ::unlink(raw_file.c_str());
  std::printf("\n(a) save, %0.f MB (page cache + fsync to the disk)\n", s.bytes / 1e6);
  const RowPrinter out{44, "raw", s.bytes};
  const double raw_mbs = mb_per_s(s.bytes, median(t_raw));
  out.row("raw pwrite + fdatasync", t_raw);
  out.row("store::write_rank (hash, HDF5, pwrite, fsync)", t_write, raw_mbs);
  out.row("blocking save, buffered (Env::posix)", t_commit, raw_mbs);
  std::printf("  where write_rank + commit spend it (medians):");
  for (const auto& [name, v] : phases)
    std::printf("  %s %.1f ms;", name.c_str() + 2, 1e3 * median(v));
  std::printf("\n");
  out.row("blocking save, direct I/O (the default)", t_bcommit, raw_mbs);
  std::printf("  where it spends it (medians):");
  for (const auto& [name, v] : bphases)
    std::printf("  %s %.1f ms;", name.c_str() + 2, 1e3 * median(v));
  std::printf("\n");
  // The goals are the Checkpointer's default save: direct I/O where the filesystem allows it.
  const double save_s = median(t_bcommit), raw_s = median(t_raw);
  std::printf("  goal blocking save >= 0.80x raw pwrite+fdatasync: %.2fx (%s)\n", raw_s / save_s,
              raw_s / save_s >= 0.8 ? "met" : "missed");
  if (!t_torch.empty()) {
    out.row("torch.save + fsync (torch " + torch_version + ", in Python)", t_torch, raw_mbs);
    const double torch_s = median(t_torch);
    std::printf("  goal blocking save faster than torch.save+fsync: %.2fx torch's speed (%s)\n",
                torch_s / save_s, save_s < torch_s ? "met" : "missed");
  }
  return true;
}

int run(const Args& a) {
  Env* env = Env::posix();
  const std::string base = work_dir(a.dir, "ckpt-bench");
  if (base.empty()) return 1;
  const unsigned threads = a.threads ? a.threads : resume::default_io_threads();
  State s;
  build_state(a.mb, a.tensor_mb, a.small, &s);
  std::printf(
      "save_restore_bench: %zu tensors, %.1f MB of tensor bytes, %u I/O threads, %llu KiB chunks, "
      "%llu reps (median), dir %s\n",
      s.spans.size(), s.bytes / 1e6, threads, static_cast<unsigned long long>(a.chunk_kb),
      static_cast<unsigned long long>(a.reps), base.c_str());
  std::printf("load average at start: %s (%u cores)\n", load_average().c_str(),
              std::thread::hardware_concurrency());

  // (a) save
  const std::string run_dir = path_join(base, "run");
  int64_t step = 0;
  if (!save_section(a, env, s, base, &step)) return 1;
  if (a.save_only) {
    if (a.dir.empty()) (void)env->remove_tree(base);
    return 0;
  }

  // (b)/(c) restore into the same pre-touched destination memory
  const std::string step_dir = path_join(run_dir, step_dir_name(step));
  auto m = store::read_manifest(env, step_dir, 0);
  if (!m.is_ok()) return 1;
  const std::string file = path_join(step_dir, m->file);
  const HostDestinations host(*m);
  const std::vector<unsigned char*>& dst = host.ptrs;
  resume::RestoreOptions ro;
  ro.io_threads = threads;
  ro.chunk_bytes = a.chunk_kb << 10;
  std::map<std::string, void*> by_path;
  for (size_t i = 0; i < m->tensors.size(); ++i) {
    ro.destinations[m->tensors[i].path] = {dst[i], m->tensors[i].nbytes};
    by_path[m->tensors[i].path] = dst[i];
  }
  resume::RestoreOptions ro_noverify = ro;
  ro_noverify.verify_hashes = false;
  store::ReadOptions so;
  so.place = [&](const std::string& path, const Tensor&) -> Result<void*> {
    return by_path.at(path);
  };

  auto check = [](const Status& st) {
    if (!st.is_ok()) std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return st.is_ok();
  };
  std::vector<TimedMethod> methods = {
      {"raw pread, 1 thread", [&] { return raw_read(file, *m, dst, 1) >= 0; }, {}, {}},
      {"raw pread, I/O threads", [&] { return raw_read(file, *m, dst, threads) >= 0; }, {}, {}},
      {"resume::restore_rank (verify)",
       [&] { return check(resume::restore_rank(env, step_dir, 0, ro).status()); },
       {},
       {}},
      {"resume::restore_rank (no verify)",
       [&] { return check(resume::restore_rank(env, step_dir, 0, ro_noverify).status()); },
       {},
       {}},
      {"store::read_rank (verify)",
       [&] { return check(store::read_rank(env, step_dir, 0, so).status()); },
       {},
       {}},
  };
  make_warm({file});
  if (!run_rotated(methods, a.reps, &TimedMethod::warm)) return 1;
  const uint64_t tb = s.bytes;
  const RowPrinter out{44, "raw", tb};
  std::printf("\n(b) restore WARM (file in the page cache), in place into pre-touched memory\n");
  const double raw_warm = mb_per_s(tb, median(methods[1].warm));
  for (auto& mt : methods) out.row(mt.name, mt.warm, &mt == &methods[1] ? 0 : raw_warm);
  resume::RestoreStats rs;
  if (!check(resume::restore_rank(env, step_dir, 0, ro, &rs).status())) return 1;
  std::printf(
      "  restore_rank split (one warm run): metadata %.1f ms (manifest, HDF5 structure, "
      "checks, plan), data %.1f ms = %.0f MB/s; %llu reads for %zu tensors\n",
      1e3 * rs.metadata_seconds, 1e3 * rs.data_seconds, mb_per_s(tb, rs.data_seconds),
      static_cast<unsigned long long>(rs.chunks), rs.tensors);

  ColdCache cold;
  if (!run_rotated(methods, a.cold_reps, &TimedMethod::cold, [&] {
        cold.drop({file, path_join(step_dir, rank_manifest_name(0))});
      })) {
    return 1;
  }
  if (a.cold_reps > 0) {
    std::printf(
        "\n(c) restore COLD (page cache dropped with %s before every run; at most %.1f%% "
        "of the file resident at start)\n",
        cold.how.c_str(), 100 * cold.resident_max);
    const double raw_cold = mb_per_s(tb, median(methods[1].cold));
    for (auto& mt : methods) out.row(mt.name, mt.cold, &mt == &methods[1] ? 0 : raw_cold);
  }

  // (d) hash throughput
  std::vector<double> h1, ht;
  uint64_t sink = 0;
  for (uint64_t r = 0; r < a.reps; ++r) {
    h1.push_back(hash_all(s, 1, &sink));
    ht.push_back(hash_all(s, threads, &sink));
  }
  std::printf("\n(d) hash verification: XXH3-64 over the state in memory vs the raw WARM read\n");
  out.row("xxh3, 1 thread", h1, raw_warm);
  out.row("xxh3, I/O threads", ht, raw_warm);
  const double v = median(methods[2].warm), nv = median(methods[3].warm);
  std::printf("  verification cost inside restore_rank (warm): %+.1f%% time (%.3f s vs %.3f s)\n",
              100 * (v - nv) / nv, v, nv);
  std::printf("\nload average at end: %s   [checksum %016llx]\n", load_average().c_str(),
              static_cast<unsigned long long>(sink));
  if (a.dir.empty()) (void)env->remove_tree(base);
  return 0;
}

}  // namespace
}  // namespace ckpt::bench

int main(int argc, char** argv) {
  namespace b = ckpt::bench;
  b::Args a;
  b::FlagParser flags;
  flags.bench_flags(&a, true).number("--chunk-kb", &a.chunk_kb, true);
  flags.text("--torch-peer", &a.torch_peer).flag("--save-only", &a.save_only);
  return b::parse_or_usage(flags, argc, argv, b::kUsage) ? b::run(a) : 64;
}
