// ResumableSampler: which sample ids each rank trains on at each step, from a spec and one global
// cursor, so a checkpoint can record the data position exactly and a restart (at the same or a
// different world size) neither replays the head of the epoch nor skips its tail.
//
// Order. Epoch e visits positions 0, 1, 2, ... of EpochPermutation(N, seed, e) (the identity when
// shuffle is false). Position g goes to rank g mod W. The cursor {epoch, position} counts global
// positions consumed in the epoch, so it is the same on every rank and does not depend on W.
//
// Steps. A global step consumes G = batch_size * world_size consecutive positions starting at the
// cursor: rank r takes, in increasing order, the positions g in [position, position + G) with
// g mod W == r, i.e. exactly batch_size of them.
// Epoch end:
//   - drop_last = false: the epoch has ceil(N / G) steps from position 0. The last one is short:
//     positions >= N do not exist, so rank r takes only the remaining g < N with g mod W == r
//     (some ranks may get fewer ids than others, or none). Every sample is visited once.
//   - drop_last = true: a step is taken only while a full global batch remains
//     (position + G <= N); the epoch has floor(N / G) steps from position 0 and the last
//     N mod G positions of the order are not visited that epoch.
//   After the step that ends an epoch the cursor is {epoch + 1, 0}. A cursor that already sits at
//   an epoch end (position == N, or too few positions left under drop_last) is treated as
//   {epoch + 1, 0} by next_batch().
// Resharding keeps the cursor and changes W (and so G): the remaining positions of the epoch are
// dealt out to the new ranks, each visited exactly once (under drop_last the tail that no longer
// fills a global batch of the new size is dropped, as always).
//
// A sampler is a small value; its const methods are safe to call from several threads, next_batch
// and set_cursor are not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/loader/epoch_permutation.h"

namespace ckpt::loader {

// What the loader component of a checkpoint records about the sampler.
struct SamplerSpec {
  uint64_t dataset_size = 0;        // N
  std::string dataset_fingerprint;  // free text or a digest naming the dataset
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  uint32_t world_size = 1;  // W
  uint32_t batch_size = 1;  // per rank, per micro-step

  // G = batch_size * world_size: positions one global step consumes.
  uint64_t global_batch() const { return uint64_t{batch_size} * world_size; }
  bool operator==(const SamplerSpec& o) const;
  bool operator!=(const SamplerSpec& o) const { return !(*this == o); }
};

// The data position: epoch, and global samples consumed in that epoch.
struct LoaderCursor {
  uint64_t epoch = 0;
  uint64_t position = 0;
  bool operator==(const LoaderCursor& o) const {
    return epoch == o.epoch && position == o.position;
  }
  bool operator!=(const LoaderCursor& o) const { return !(*this == o); }
};

// Largest dataset accepted: keeps position + G arithmetic far from overflow.
inline constexpr uint64_t kMaxDatasetSize = uint64_t{1} << 62;

// Ok when the spec can drive a sampler: N in [1, 2^62], W >= 1, batch_size >= 1, and under
// drop_last at least one full global batch per epoch (G <= N).
Status validate_spec(const SamplerSpec& spec);
// Ok when `c` is a valid cursor for `spec`: position <= N.
Status validate_cursor(const SamplerSpec& spec, const LoaderCursor& c);

// The order of epoch `epoch` under `spec` (identity when !spec.shuffle). spec.dataset_size >= 1.
EpochPermutation epoch_order(const SamplerSpec& spec, uint64_t epoch);

class ResumableSampler {
 public:
  // Throws std::invalid_argument when validate_spec fails or rank >= world_size; use create()
  // for specs that come from files or users.
  ResumableSampler(SamplerSpec spec, uint32_t rank);
  static Result<ResumableSampler> create(SamplerSpec spec, uint32_t rank, LoaderCursor cursor = {});

  // The ids this rank trains on in the next global step; advances the cursor by one global batch
  // (to {epoch + 1, 0} after an epoch's last step).
  std::vector<uint64_t> next_batch();
  // The ids `rank` gets in the global step that starts at cursor `c`, without advancing. Empty
  // when `c` is at an epoch end. Throws std::invalid_argument when rank >= world_size or
  // c.position > N.
  std::vector<uint64_t> batch_at(LoaderCursor c, uint32_t rank) const;
  // The global positions (not ids) that batch_at(c, rank) maps through the epoch's order.
  std::vector<uint64_t> positions_at(LoaderCursor c, uint32_t rank) const;

  LoaderCursor cursor() const { return cursor_; }
  // Throws std::invalid_argument when c.position > N (see validate_cursor).
  void set_cursor(LoaderCursor c);

  // Steps of a whole epoch from position 0: ceil(N / G), or floor(N / G) under drop_last.
  uint64_t steps_per_epoch() const;
  // Steps left in the cursor's epoch from its position (0 at an epoch end).
  uint64_t remaining_steps(LoaderCursor c) const;
  // Whether no step can start at `c` in its epoch.
  bool at_epoch_end(LoaderCursor c) const;

  const SamplerSpec& spec() const { return spec_; }
  uint32_t rank() const { return rank_; }
  // The order of `epoch` (a copy of the cached one when it is the cursor's epoch).
  EpochPermutation order(uint64_t epoch) const;

  // Same spec and cursor with a new world size and rank. Throws std::invalid_argument when the new
  // spec is invalid (e.g. drop_last with G > N) or new_rank >= new_world_size.
  static ResumableSampler reshard(const ResumableSampler& old, uint32_t new_world_size,
                                  uint32_t new_rank);

 private:
  ResumableSampler(SamplerSpec spec, uint32_t rank, LoaderCursor cursor);

  SamplerSpec spec_;
  uint32_t rank_ = 0;
  LoaderCursor cursor_;
  // The order of order_epoch_ (the cursor's epoch, updated only by the non-const methods, so the
  // const ones stay thread-safe): saves re-deriving the key on every step.
  EpochPermutation order_;
  uint64_t order_epoch_ = 0;
};

}  // namespace ckpt::loader
