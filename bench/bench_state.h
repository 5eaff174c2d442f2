// The state the ckpt benchmarks save and restore, and the raw-read peer they compare against.
// Header-only; a State is built and used by one thread (raw_read starts its own readers).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// `big` tensors of tensor_mb in /model, `small` tensors of 4 B..64 KiB in /optimizer/state.
inline void build_state(uint64_t mb, uint64_t tensor_mb, uint64_t small, State* s) {
  Node& model = s->root.child("model");
  const uint64_t big = std::max<uint64_t>(1, mb / tensor_mb);
  for (uint64_t i = 0; i < big; ++i)
    add_tensor(s, model, "layer" + std::to_string(i) + ".weight", tensor_mb << 20);
  Node& state = s->root.child("optimizer").child("state");
  for (uint64_t i = 0; i < small; ++i) {
    add_tensor(s, state.child("p" + std::to_string(i)), "exp_avg",
               4 * (1 + (i * 2654435761u) % 16384));
  }
  s->root.child("train").attrs["global_step"] = int64_t{1};
}

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
