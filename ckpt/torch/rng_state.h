// Capture and restore of every random generator a libtorch training run draws from, as the /rng
// component: libtorch's default CPU generator, the default CUDA generator of every device, and
// std::mt19937 / std::mt19937_64 engines the program registers by name (shuffles, augmentation).
//
// Layout of /rng (the on-disk schema):
//   attrs     cuda_available (bool), cuda_device_count (int64) — of the saving process
//   cpu       tensor state: uint8 [5056], at::detail::getDefaultCPUGenerator().get_state()
//   cuda      only when CUDA was available: tensor "<i>" per device i = "0", "1", ..., the
//             default CUDA generator's get_state() (816 bytes on 1.13, 16 on recent 2.x)
//   user/<name>  one child per registered engine; attrs engine ("mt19937" | "mt19937_64") and
//             state (string: the engine written with operator<<, read back with operator>>)
//
// Ownership: GeneratorRegistry holds non-owning pointers; the engines must outlive it and every
// capture/restore that uses it. Capture copies generator states (each under its generator's
// mutex), so the tree owns its bytes. Not thread-safe: do not draw from the generators while a
// capture or restore runs.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <variant>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"

namespace ckpt::torch_adapter {

class GeneratorRegistry {
 public:
  using Engine = std::variant<std::mt19937*, std::mt19937_64*>;

  // Registers an engine under `name`; a second add with the same name replaces the first.
  void add(const std::string& name, std::mt19937* g) { engines_[name] = g; }
  void add(const std::string& name, std::mt19937_64* g) { engines_[name] = g; }
  const std::map<std::string, Engine>& engines() const { return engines_; }
  bool empty() const { return engines_.empty(); }

 private:
  std::map<std::string, Engine> engines_;
};

struct RngRestoreOptions {
  // A checkpoint written on a machine with more CUDA devices than this one (or any, when this
  // one has none) is refused unless this is set; then the missing devices' states are ignored.
  bool skip_missing_cuda = false;
};

// Fills `out` (normally root.child("rng")) with the CPU, CUDA and user generator states.
Status capture_rng(const GeneratorRegistry& user, Node* out);

// Restores the CPU generator, the CUDA generator of each device present in both checkpoint and
// machine, and every engine registered in `user` (each must be in the checkpoint, with the same
// engine kind; checkpoint engines not registered here are an error too — a silently unrestored
// generator is exactly what ckpt exists to prevent). All states are validated before any is set.
Status restore_rng(const Node& in, GeneratorRegistry& user, const RngRestoreOptions& options = {});

}  // namespace ckpt::torch_adapter
