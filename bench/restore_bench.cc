// restore_bench: the library's restore (resume::restore_rank called as Checkpointer::restore_latest
// calls it: in place into pre-touched destination memory, tensor hashes and the commit record's
// whole-file hash checked first, then the copy) against raw pread of the same tensors with 1 and
// N threads, warm (page cache) and cold (page cache dropped before every run). Two other ways to
// be all or nothing are measured beside it: the snapshot-and-roll-back restore_latest used
// before, and one hashed read with no rollback at all (the lower bound of any verified restore).
// So is restore_latest after a restart: the optimizer's tensors freshly allocated in the call as
// the C++ Checkpointer allocates them (ckpt::HostMemory for the large ones; their page faults in
// the clock), filled by the checking read (HostSpan::fresh) or, as before that flag, read twice
// like live memory. The peers that bound a restore from the page cache are measured in the same
// run: a plain sequential read(2) of the whole file into one reused 8 MiB buffer (what `cat` or
// `dd` does, and what issue 26's goals are against) and `ckpt load-bench`'s load into fresh memory
// (resume::load_all_host). bench/restore_bench.py runs it and adds torch.load + copy_ and
// safetensors peers. --shape picks the state (bench/bench_shapes.h); --list-tensors prints its
// tensors ("TENSOR <path> <bytes>" lines) and exits, so the peers build the same ones.
//
// Usage: restore_bench [--shape readme|adamw344|gpt2|llama] [--mb 512] [--tensor-mb 8]
//                      [--small 256] [--reps 5] [--cold-reps 3] [--threads N] [--dir DIR]
//                      [--only NAME] [--list-tensors]
// --only NAME[,NAME...] runs just the methods whose name contains one of them (to profile one
// path, or to leave out the slow snapshot rows).
// Every result is one line "RESULT <warm|cold> <name> <seconds> <MB/s>" (medians), so a driver
// can parse it, followed by "RATIO <warm|cold> <name> <x>x the raw sequential read" lines; the
// prose around them is for people.

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_shapes.h"
#include "bench/bench_state.h"
#include "ckpt/io/host_memory.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/load_all.h"
#include "resume/pipeline.h"
#include "resume/restore.h"

namespace ckpt::bench {
namespace {

constexpr const char* kSequential = "raw sequential read of the file";

// "RESULT <warm|cold> <name> <seconds> <MB/s>" per method (bench/restore_bench.py parses it).
// Then "RATIO <warm|cold> <name> <x>": the raw sequential read's median over the method's (issue
// 26's bound; above 1 is faster than it), when that read was run.
void report(const char* kind, const std::vector<TimedMethod>& methods, uint64_t bytes,
            std::vector<double> TimedMethod::*runs) {
  double seq = 0;
  for (const TimedMethod& mt : methods) {
    const double s = median(mt.*runs);
    if (mt.name == kSequential) seq = s;
    std::printf("RESULT %s %-48s %8.4f s %9.0f MB/s\n", kind, mt.name.c_str(), s,
                mb_per_s(bytes, s));
  }
  if (seq <= 0) return;
  for (const TimedMethod& mt : methods) {
    const double s = median(mt.*runs);
    if (mt.name == kSequential || mt.name[0] == ' ' || s <= 0) continue;  // not the "apart" rows
    std::printf("RATIO %s %-48s %6.2fx the raw sequential read\n", kind, mt.name.c_str(), seq / s);
  }
}

constexpr const char* kLoadBench = "load-bench's load, verified (as ckpt load-bench)";

struct Args : BenchFlags {
  std::string shape = "readme";
  std::string only;  // comma-separated: run only the methods whose name contains one of them
  bool list_tensors = false;
};

// read(2) of the whole file, front to back, into one reused buffer; -1 on an error.
double sequential_read(const std::string& file) {
  const auto t0 = Clock::now();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  static std::vector<unsigned char> buf(8u << 20);
  ssize_t r;
  while ((r = ::read(fd, buf.data(), buf.size())) > 0) {
  }
  ::close(fd);
  return r < 0 ? -1 : seconds_since(t0);
}

int run(const Args& a) {
  std::vector<ShapeTensor> shape;
  if (!shape_tensors(a.shape, a.mb, a.tensor_mb, a.small, &shape)) {
    std::fprintf(stderr, "restore_bench: --shape %s: expected one of %s\n", a.shape.c_str(),
                 shape_names());
    return 64;
  }
  if (a.list_tensors) {
    for (const ShapeTensor& t : shape) {
      std::printf("TENSOR %s %llu\n", t.path.c_str(), static_cast<unsigned long long>(t.nbytes));
    }
    return 0;
  }
  Env* env = Env::posix();
  const std::string base = work_dir(a.dir, "ckpt-restore-bench");
  if (base.empty()) return 1;
  const unsigned threads = a.threads ? a.threads : resume::default_io_threads();
  State s;
  build_state(shape, &s);
  const std::string run_dir = path_join(base, "run");
  const std::string step_dir = path_join(run_dir, step_dir_name(1));
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  };
  // Where the save goes: the step's directory, or beside it when --dir holds a committed one
  // from an earlier run (a re-save, committed over it).
  auto saving = store::save_dir(env, run_dir, 1);
  if (!saving.is_ok()) return fail(saving.status());
  if (Status st = env->make_dirs(*saving); !st.is_ok()) return fail(st);
  if (auto m = store::write_rank(env, *saving, 0, 1, 1, &s.root); !m.is_ok()) {
    return fail(m.status());
  }
  if (Status st = store::commit(env, run_dir, 1, 1, {"model", "optimizer", "train"}); !st.is_ok()) {
    return fail(st);
  }
  auto m = store::read_manifest(env, step_dir, 0);
  auto rec = store::read_commit(env, step_dir);
  if (!m.is_ok() || !rec.is_ok()) return fail(m.is_ok() ? rec.status() : m.status());
  const std::string file = path_join(step_dir, m->file);
  const CommitFile* listed = nullptr;
  for (const auto& f : rec->files) {
    if (f.name == m->file) listed = &f;
  }
  if (listed == nullptr) return 1;
  std::printf(
      "restore_bench: shape %s, %zu tensors, %.1f MB of tensor bytes in a %.1f MB file, "
      "%u I/O threads, %llu reps (median), load average %s (%u cores)\n",
      a.shape.c_str(), m->tensors.size(), s.bytes / 1e6, m->file_bytes / 1e6, threads,
      static_cast<unsigned long long>(a.reps), load_average().c_str(),
      std::thread::hardware_concurrency());

  // Pre-touched destinations, as a live model's and optimizer's tensors are.
  HostDestinations host(*m);
  const std::vector<unsigned char*>& dst = host.ptrs;
  resume::RestoreOptions lib;
  lib.io_threads = threads;
  for (size_t i = 0; i < m->tensors.size(); ++i) {
    lib.destinations[m->tensors[i].path] = {dst[i], m->tensors[i].nbytes};
  }
  lib.check_file_hash = true;
  lib.file_bytes = listed->bytes;
  lib.file_xxh3 = listed->xxh3;
  lib.file_regions_xxh3 = listed->regions_xxh3;
  resume::RestoreOptions one_read = lib;  // hashed while copying: fast, but nothing to roll back
  lib.check_first = true;
  resume::Undo undo;
  resume::RestoreOptions snapshot = one_read;  // before check_first: one read, old bytes saved
  snapshot.undo = &undo;
  resume::RestoreOptions unverified = one_read;
  unverified.verify_hashes = false;
  auto restore = [&](const resume::RestoreOptions& o) {
    auto r = resume::restore_rank(env, step_dir, 0, o);
    if (!r.is_ok()) std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
    return r.is_ok();
  };
  // After a restart the optimizer's moments do not exist yet: the restore allocates them (fresh
  // pages, faulted in by the read) and, marked fresh, fills them in its checking read. Allocated
  // as the C++ Checkpointer allocates them in a fresh process: a moment of 2 MiB or more in its
  // own ckpt::HostMemory (huge pages where they fault in faster), the small ones in one
  // anonymous mapping; new memory every call, so that no call reuses pages an earlier one
  // faulted in.
  auto restore_fresh_optimizer = [&](bool mark_fresh) {
    resume::RestoreOptions o = lib;
    uint64_t small = 0;
    for (const auto& e : m->tensors) {
      if (e.path.rfind("/optimizer/", 0) == 0 && e.nbytes < (2u << 20)) {
        small += (e.nbytes + 63) / 64 * 64;
      }
    }
    auto arena = HostMemory::allocate(small, false, "the small moments");
    if (!arena.is_ok()) return false;
    std::vector<HostMemory> large;
    uint64_t at = 0;
    for (const auto& e : m->tensors) {
      if (e.path.rfind("/optimizer/", 0) != 0) continue;
      unsigned char* dst = arena->data() + at;
      if (e.nbytes >= (2u << 20)) {
        auto mem = HostMemory::allocate(e.nbytes, false, "a moment");
        if (!mem.is_ok()) return false;
        dst = mem->data();
        large.push_back(std::move(mem).value());
      } else {
        at += (e.nbytes + 63) / 64 * 64;
      }
      o.destinations[e.path] = {dst, e.nbytes, mark_fresh};
    }
    return restore(o);
  };
  resume::LoadAllOptions load_bench;
  load_bench.io_threads = threads;
  std::vector<std::pair<double, double>> load_runs;  // load-bench's own (seconds, alloc_seconds)
  std::vector<TimedMethod> methods = {
      {kSequential, [&] { return sequential_read(file) >= 0; }, {}, {}},
      {"raw pread, 1 thread", [&] { return raw_read(file, *m, dst, 1) >= 0; }, {}, {}},
      {"raw pread, N threads", [&] { return raw_read(file, *m, dst, threads) >= 0; }, {}, {}},
      {"library restore, verified (as restore_latest)", [&] { return restore(lib); }, {}, {}},
      {"library restore, verified, optimizer fresh (after a restart)",
       [&] { return restore_fresh_optimizer(true); },
       {},
       {}},
      {"library restore, verified, optimizer fresh, read twice",
       [&] { return restore_fresh_optimizer(false); },
       {},
       {}},
      {"library restore, verified, snapshot + rollback", [&] { return restore(snapshot); }, {}, {}},
      {"library restore, verified once, no rollback", [&] { return restore(one_read); }, {}, {}},
      {"library restore, unverified", [&] { return restore(unverified); }, {}, {}},
      {kLoadBench,
       [&] {
         auto r = resume::load_all_host(env, step_dir, load_bench);
         if (!r.is_ok()) std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
         if (r.is_ok()) load_runs.push_back({r->seconds, r->alloc_seconds});
         return r.is_ok();
       },
       {},
       {}},
  };
  if (!a.only.empty()) {
    std::vector<TimedMethod> kept;
    for (TimedMethod& mt : methods) {
      for (size_t at = 0; at <= a.only.size();) {
        const size_t comma = std::min(a.only.find(',', at), a.only.size());
        const std::string part = a.only.substr(at, comma - at);
        at = comma + 1;
        if (!part.empty() && mt.name.find(part) != std::string::npos) {
          kept.push_back(std::move(mt));
          break;
        }
      }
    }
    methods = std::move(kept);
  }
  make_warm({file});
  // load-bench's row is its own clock, as `ckpt load-bench` reports it, the allocation apart.
  auto report_runs = [&](const char* kind, std::vector<double> TimedMethod::*runs) {
    TimedMethod alloc{"  its arena: allocate + fault in + free (apart)", {}, {}, {}};
    for (TimedMethod& mt : methods) {
      if (mt.name != kLoadBench) continue;
      (mt.*runs).clear();
      for (const auto& [load, allocate] : load_runs) {
        (mt.*runs).push_back(load);
        (alloc.*runs).push_back(allocate);
      }
    }
    load_runs.clear();
    methods.push_back(alloc);
    report(kind, methods, s.bytes, runs);
    methods.pop_back();
  };
  if (!run_rotated(methods, a.reps, &TimedMethod::warm)) return 1;
  report_runs("warm", &TimedMethod::warm);
  // Where one more warm restore_latest-style restore, and an unverified one, spend their time.
  for (const auto* o : {&lib, &unverified}) {
    resume::RestoreStats st;
    if (!resume::restore_rank(env, step_dir, 0, *o, &st).is_ok()) return 1;
    std::printf("phases (%s): metadata %.4f s, check read %.4f s, copy read %.4f s\n",
                o == &lib ? "as restore_latest" : "unverified", st.metadata_seconds,
                st.check_seconds, st.data_seconds - st.check_seconds);
  }
  if (auto l = resume::load_all_host(env, step_dir, load_bench); l.is_ok()) {
    std::printf(
        "phases (as load-bench): load %.4f s; allocating and faulting in its memory "
        "%.4f s more (not in its time)\n",
        l->seconds, l->alloc_seconds);
  }
  ColdCache cold;
  const std::vector<std::string> files = {file, path_join(step_dir, rank_manifest_name(0))};
  if (!run_rotated(methods, a.cold_reps, &TimedMethod::cold, [&] { cold.drop(files); })) return 1;
  if (a.cold_reps > 0) {
    std::printf("cold: page cache dropped with %s before every run (at most %.1f%% resident)\n",
                cold.how.c_str(), 100 * cold.resident_max);
    report_runs("cold", &TimedMethod::cold);
  }
  std::printf("load average at end: %s\n", load_average().c_str());
  if (a.dir.empty()) (void)env->remove_tree(base);
  return 0;
}

}  // namespace
}  // namespace ckpt::bench

int main(int argc, char** argv) {
  ckpt::bench::Args a;
  ckpt::bench::FlagParser p;
  p.bench_flags(&a, /*restores=*/true)
      .text("--shape", &a.shape)
      .text("--only", &a.only)
      .flag("--list-tensors", &a.list_tensors);
  if (!ckpt::bench::parse_or_usage(
          p, argc, argv,
          "usage: restore_bench [--shape readme|adamw344|gpt2|llama] [--mb 512] [--tensor-mb 8] "
          "[--small 256] [--reps 5] [--cold-reps 3] [--threads N] [--dir DIR] "
          "[--only NAME] [--list-tensors]")) {
    return 64;
  }
  return ckpt::bench::run(a);
}
