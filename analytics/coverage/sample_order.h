// The sampler geometry and sample orders that `ckpt coverage` replays: which sample id sits at
// each position of an epoch, for our keyed order (loader::EpochPermutation), plain sequential
// order, and PyTorch's RandomSampler / DistributedSampler (torch.randperm, materialised).
//
// Positions. An epoch is a run of L positions; a step consumes S = batch_size × world_size ×
// grad_accum consecutive positions (the last step of an epoch may be short), so steps per epoch
// = ceil(L / S). Position p holds sample order.id_at(p mod N): only DistributedSampler's padding
// makes L exceed N (its padded list repeats the order from the start); rank r of a
// DistributedSampler takes every W-th padded index, so global step k covers padded positions
// [kS, (k+1)S) exactly as our global cursor does.
//   ckpt, sequential, torch_random: L = N, or floor(N / (B·W)) · B·W under drop_last.
//   torch_distributed: num_samples = ceil((N − W) / W) under drop_last with N mod W ≠ 0, else
//     ceil(N / W); each rank's DataLoader yields ceil (floor under drop_last — the same flag is
//     taken for the DataLoader) of num_samples / B batches; L = min(batches · B, num_samples) · W.
// Order keys. ckpt: the epoch (the order is keyed by (seed, epoch)); torch_distributed: the
// epoch (generator seeded seed + epoch); torch_random: how many permutations the process's
// generator (seeded once with seed) drew before this one — kRandomSamplerDrawsPerEpoch per
// finished epoch; sequential: unused.
//
// The shuffled torch kinds draw their permutation as torch.randperm does
// (analytics/coverage/torch_randperm.h, no libtorch). Orders are immutable once built and safe to
// share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/loader/epoch_permutation.h"

namespace ckpt::analytics {

// torch 1.13's RandomSampler.__iter__ draws randperm(n) for the epoch and, once the epoch's
// iterator is exhausted (every DataLoader epoch exhausts it, drop_last or not), a second randperm
// for the `num_samples % n` remainder, which it discards; so each finished epoch advances the
// generator by two permutations.
inline constexpr uint64_t kRandomSamplerDrawsPerEpoch = 2;

enum class SamplerKind { kSequential, kTorchRandom, kTorchDistributed, kCkpt };
const char* sampler_kind_name(SamplerKind k);
// invalid_argument naming the accepted kinds when `name` is none of them.
Result<SamplerKind> sampler_kind_from(const std::string& name);

struct SamplerConfig {
  SamplerKind kind = SamplerKind::kCkpt;
  uint64_t dataset_size = 0;  // N
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  uint32_t world_size = 1;  // W
  uint32_t batch_size = 1;  // B, per rank
  uint32_t grad_accum = 1;  // A

  uint64_t step_positions() const;   // S
  uint64_t epoch_length() const;     // L (see above)
  uint64_t steps_per_epoch() const;  // ceil(L / S)
};

// The most samples a shuffled torch kind may have: its order is materialised (8 bytes a sample,
// so at most 2 GiB). Over it, validate_sampler() refuses (unsupported, exit 65).
inline constexpr uint64_t kMaxTorchOrderSamples = uint64_t{1} << 28;

// Ok when the geometry is usable: N, B, W, A >= 1, N <= 2^62, L >= 1, torch_random with W == 1
// (RandomSampler is single-process; use torch_distributed), and at most kMaxTorchOrderSamples
// samples for the shuffled torch kinds. Messages name the field and the value.
Status validate_sampler(const SamplerConfig& c);

class SampleOrder {
 public:
  virtual ~SampleOrder() = default;
  virtual uint64_t size() const = 0;                    // N
  virtual uint64_t id_at(uint64_t position) const = 0;  // position < N
  virtual uint64_t position_of(uint64_t id) const = 0;  // id < N
  // Cost class for choosing how to list never-visited ids: true when id_at is a table lookup.
  virtual bool cheap() const = 0;
};

// The order of `order_key` (see above) for a validated config; for the shuffled torch kinds the
// permutation is drawn as torch.randperm draws it (4·N bytes, plus 4·N for the
// inverse).
Result<std::shared_ptr<const SampleOrder>> make_order(const SamplerConfig& c, uint64_t order_key);
// The order `perm` names (position p holds sample perm[p]); perm must be a permutation of
// [0, perm.size()), as torch.randperm returns.
std::shared_ptr<const SampleOrder> make_table_order(const std::vector<int64_t>& perm);
// The order key of epoch `epoch` for kinds whose key does not depend on restarts (all but
// torch_random, whose key the replay tracks).
uint64_t default_order_key(const SamplerConfig& c, uint64_t epoch);

}  // namespace ckpt::analytics
