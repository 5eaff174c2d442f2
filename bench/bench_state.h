// The state the ckpt benchmarks save and restore, the raw peers they compare against (raw_save,
// raw_read), the host memory they restore into, and the rotating warm/cold timing loop.
// Header-only; a State is built and used by one thread (raw_read starts its own readers).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_shapes.h"
#include "bench/bench_util.h"
#include "ckpt/format/manifest.h"
#include "ckpt/format/tree.h"

namespace ckpt::bench {

struct State {
  std::vector<std::unique_ptr<unsigned char[]>> storage;
  std::vector<std::pair<const unsigned char*, size_t>> spans;  // every tensor's bytes
  Node root;
  uint64_t bytes = 0;
};

inline void add_tensor(State* s, Node& n, const std::string& name, size_t nbytes) {
  s->storage.emplace_back(new unsigned char[nbytes]);
  fill_bytes(s->storage.back().get(), nbytes, s->storage.size());
  n.tensors[name] = Tensor::borrow(DType::kFloat32, {static_cast<int64_t>(nbytes / 4)},
                                   s->storage.back().get(), nbytes);
  s->spans.emplace_back(s->storage.back().get(), nbytes);
  s->bytes += nbytes;
}

// The tensors of `shape` (bench_shapes.h), each at its path, plus /train's global_step.
inline void build_state(const std::vector<ShapeTensor>& shape, State* s) {
  for (const ShapeTensor& t : shape) {
    Node* n = &s->root;
    size_t start = 1;
    for (size_t slash; (slash = t.path.find('/', start)) != std::string::npos; start = slash + 1) {
      n = &n->child(t.path.substr(start, slash - start));
    }
    add_tensor(s, *n, t.path.substr(start), t.nbytes);
  }
  s->root.child("train").attrs["global_step"] = int64_t{1};
}

// The README's state: `big` tensors of tensor_mb in /model, `small` tensors of 4 B..64 KiB in
// /optimizer/state (shape "readme").
inline void build_state(uint64_t mb, uint64_t tensor_mb, uint64_t small, State* s) {
  std::vector<ShapeTensor> shape;
  shape_tensors("readme", mb, tensor_mb, small, &shape);
  build_state(shape, s);
}

// The raw peer of a save: every tensor at a 4 KiB-aligned offset of one file, then fdatasync.
// Returns the seconds it took, or -1 on an error.
inline double raw_save(const std::string& path, const State& s) {
  ::unlink(path.c_str());
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  uint64_t off = 0;
  for (const auto& [p, n] : s.spans) {
    for (size_t done = 0; done < n;) {
      const ssize_t w = ::pwrite(fd, p + done, n - done, static_cast<off_t>(off + done));
      if (w <= 0) return -1;
      done += static_cast<size_t>(w);
    }
    off += (n + 4095) / 4096 * 4096;
  }
  ::fdatasync(fd);
  ::close(fd);
  return seconds_since(t0);
}

// Zeroed (so pre-touched) host memory for every manifest tensor, in manifest order, as a live
// model's and optimizer's tensors are: 64-byte aligned, as torch's CPU allocator aligns them (a
// destination 16 bytes off, operator new's promise, makes the kernel's copy 2-3x slower here).
struct HostDestinations {
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<unsigned char[], Free>> mem;
  std::vector<unsigned char*> ptrs;

  explicit HostDestinations(const Manifest& m) {
    for (const auto& e : m.tensors) {
      const size_t n = static_cast<size_t>((std::max<uint64_t>(e.nbytes, 1) + 63) / 64 * 64);
      mem.emplace_back(static_cast<unsigned char*>(std::aligned_alloc(64, n)));
      std::memset(mem.back().get(), 0, n);
      ptrs.push_back(mem.back().get());
    }
  }
};

// One way to restore, and the seconds of its warm and cold runs.
struct TimedMethod {
  std::string name;
  std::function<bool()> fn;  // false on an error (it prints the error itself)
  std::vector<double> warm, cold;
};

// Runs every method `reps` times into `runs` (&TimedMethod::warm or ::cold), rotating the order
// between repetitions so that all see the same load; `before` runs before each timed call.
// False as soon as a method fails.
inline bool run_rotated(std::vector<TimedMethod>& methods, uint64_t reps,
                        std::vector<double> TimedMethod::*runs,
                        const std::function<void()>& before = {}) {
  for (uint64_t r = 0; r < reps; ++r) {
    for (size_t k = 0; k < methods.size(); ++k) {
      TimedMethod& mt = methods[(k + r) % methods.size()];
      if (before) before();
      const auto t0 = Clock::now();
      const bool ok = mt.fn();
      (mt.*runs).push_back(seconds_since(t0));
      if (!ok) return false;
    }
  }
  return true;
}

// Drops the page cache before a cold run and keeps what to print beside cold numbers: how it was
// dropped and the most of the first file found resident just after.
struct ColdCache {
  std::string how;
  double resident_max = 0;

  void drop(const std::vector<std::string>& files) {
    how = make_cold(files);
    resident_max = std::max(resident_max, resident_fraction(files.front()));
  }
};

// Reads every manifest tensor into its destination with `threads` readers, no hashing.
inline double raw_read(const std::string& file, const Manifest& m,
                       const std::vector<unsigned char*>& dst, unsigned threads) {
  const auto t0 = Clock::now();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < m.tensors.size();) {
      const ManifestEntry& e = m.tensors[i];
      for (uint64_t done = 0; done < e.nbytes;) {
        const ssize_t r =
            ::pread(fd, dst[i] + done, e.nbytes - done, static_cast<off_t>(e.offset + done));
        if (r <= 0) {
          failed = true;
          return;
        }
        done += static_cast<uint64_t>(r);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  ::close(fd);
  return failed ? -1 : seconds_since(t0);
}

}  // namespace ckpt::bench
