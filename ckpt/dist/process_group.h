// ProcessGroupContext: this process's membership in a group of training processes, over
// torch.distributed's C++ layer (c10d): a TCPStore for the rendezvous, hosted by rank 0, and a Gloo
// process group on top of it for the collectives ckpt needs — a barrier, a deterministic gradient
// mean, and an all-gather of small integer records (step, loader cursor, digests).
//
// Setup. Rank 0 hosts the store on `port` (or, with port 0, on a free port it then publishes in
// `port_file`, written atomically, which the other ranks poll). Every rank then joins the Gloo
// group; construction fails, within `timeout`, when a rank does not show up.
//
// Failures. Every call is bounded by `timeout`. A peer that died is usually noticed at once (its
// sockets close); a peer that hangs makes the call fail when the timeout expires. c10d and Gloo
// exceptions never escape: they become an IoError Status naming the operation, this rank and the
// group size. After a failed collective the group is broken (ranks may disagree about how far they
// got), so every later call returns the first failure again without touching the network.
//
// Collectives must be called by every rank in the same order with same-shaped arguments, as with
// any process group. Ownership: the context owns the store and the group; the tensors passed to
// allreduce_mean stay the caller's. Not thread-safe: use from one thread (the training loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace at {
class Tensor;
}

namespace ckpt::dist {

struct ProcessGroupOptions {
  int rank = 0;
  int world_size = 1;
  // Where rank 0's store listens and the other ranks connect; Gloo binds to it too, so for a
  // multi-host group it must be an address of each host's own interface. Tests use loopback.
  std::string master_addr = "127.0.0.1";
  // 0: rank 0 picks a free port and writes it to port_file; the others read it from there.
  uint16_t port = 0;
  // With port 0: a path that does not exist yet when the group starts (a fresh one per launch),
  // e.g. on a file system every rank sees.
  std::string port_file;
  // Bound on the rendezvous and on every collective.
  std::chrono::milliseconds timeout{30000};
};

class ProcessGroupContext {
 public:
  // On success every rank has joined the group. On failure: InvalidArgument for bad options (rank
  // outside [0, world_size), port 0 without port_file), IoError when the store or the group could
  // not be set up in time (the message says which rank/port and why).
  static Result<std::unique_ptr<ProcessGroupContext>> create(ProcessGroupOptions options);
  ~ProcessGroupContext();
  ProcessGroupContext(const ProcessGroupContext&) = delete;
  ProcessGroupContext& operator=(const ProcessGroupContext&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  // The store's port (the one picked when options.port was 0).
  uint16_t port() const { return port_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // Returns when every rank has called barrier(), or an error after the timeout.
  Status barrier();

  // Replaces each tensor by the element-wise mean of that tensor over all ranks, bit-identical on
  // every rank and from run to run: the tensors are packed into one buffer in the order given,
  // summed by Gloo (fixed reduction order for a given world size), then divided by world_size.
  // Tensors must be defined, on the CPU, and all of one floating dtype.
  Status allreduce_mean(std::vector<at::Tensor>& tensors);

  // Every rank's `values`, indexed by rank. Ranks may pass different lengths.
  Result<std::vector<std::vector<int64_t>>> allgather(const std::vector<int64_t>& values);

 private:
  struct Impl;
  explicit ProcessGroupContext(ProcessGroupOptions options);
  Status run_collective(const std::string& what, const std::function<void()>& body);

  ProcessGroupOptions options_;
  uint16_t port_ = 0;
  Status broken_;  // the first failure; ok while the group is healthy
  std::unique_ptr<Impl> impl_;
};

}  // namespace ckpt::dist
