#include "ckpt/loader/resumable_sampler.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace ckpt::loader {
namespace {

void throw_if_error(const Status& s) {
  if (!s.is_ok()) throw std::invalid_argument(s.to_string());
}

Status check_rank(const SamplerSpec& spec, uint32_t rank) {
  if (rank >= spec.world_size) {
    return invalid_argument("sampler: rank " + std::to_string(rank) + " outside [0, " +
                            std::to_string(spec.world_size) + ") (world_size)");
  }
  return Status::ok();
}

}  // namespace

bool SamplerSpec::operator==(const SamplerSpec& o) const {
  return dataset_size == o.dataset_size && dataset_fingerprint == o.dataset_fingerprint &&
         seed == o.seed && shuffle == o.shuffle && drop_last == o.drop_last &&
         world_size == o.world_size && batch_size == o.batch_size;
}

Status validate_spec(const SamplerSpec& spec) {
  if (spec.dataset_size == 0) return invalid_argument("sampler: dataset_size must be >= 1, got 0");
  if (spec.dataset_size > kMaxDatasetSize) {
    return invalid_argument("sampler: dataset_size " + std::to_string(spec.dataset_size) +
                            " exceeds the limit 2^62");
  }
  if (spec.world_size == 0) return invalid_argument("sampler: world_size must be >= 1, got 0");
  if (spec.batch_size == 0) return invalid_argument("sampler: batch_size must be >= 1, got 0");
  if (spec.drop_last && spec.global_batch() > spec.dataset_size) {
    return invalid_argument("sampler: drop_last with a global batch of " +
                            std::to_string(spec.global_batch()) + " (batch_size " +
                            std::to_string(spec.batch_size) + " x world_size " +
                            std::to_string(spec.world_size) + ") larger than dataset_size " +
                            std::to_string(spec.dataset_size) + " leaves no step in an epoch");
  }
  return Status::ok();
}

Status validate_cursor(const SamplerSpec& spec, const LoaderCursor& c) {
  if (c.position > spec.dataset_size) {
    return invalid_argument("sampler: cursor position " + std::to_string(c.position) +
                            " beyond dataset_size " + std::to_string(spec.dataset_size));
  }
  return Status::ok();
}

EpochPermutation epoch_order(const SamplerSpec& spec, uint64_t epoch) {
  return spec.shuffle ? EpochPermutation(spec.dataset_size, spec.seed, epoch)
                      : EpochPermutation::identity(spec.dataset_size);
}

ResumableSampler::ResumableSampler(SamplerSpec spec, uint32_t rank)
    : ResumableSampler(std::move(spec), rank, LoaderCursor{}) {}

ResumableSampler::ResumableSampler(SamplerSpec spec, uint32_t rank, LoaderCursor cursor)
    : spec_(std::move(spec)),
      rank_(rank),
      cursor_(cursor),
      // validate before epoch_order, which needs N >= 1
      order_((throw_if_error(validate_spec(spec_)), epoch_order(spec_, cursor.epoch))),
      order_epoch_(cursor.epoch) {
  throw_if_error(check_rank(spec_, rank_));
  throw_if_error(validate_cursor(spec_, cursor_));
}

Result<ResumableSampler> ResumableSampler::create(SamplerSpec spec, uint32_t rank,
                                                  LoaderCursor cursor) {
  CKPT_RETURN_IF_ERROR(validate_spec(spec));
  CKPT_RETURN_IF_ERROR(check_rank(spec, rank));
  CKPT_RETURN_IF_ERROR(validate_cursor(spec, cursor));
  return ResumableSampler(std::move(spec), rank, cursor);
}

bool ResumableSampler::at_epoch_end(LoaderCursor c) const {
  const uint64_t left = c.position >= spec_.dataset_size ? 0 : spec_.dataset_size - c.position;
  return left == 0 || (spec_.drop_last && left < spec_.global_batch());
}

uint64_t ResumableSampler::steps_per_epoch() const { return remaining_steps(LoaderCursor{}); }

uint64_t ResumableSampler::remaining_steps(LoaderCursor c) const {
  const uint64_t left = c.position >= spec_.dataset_size ? 0 : spec_.dataset_size - c.position;
  const uint64_t g = spec_.global_batch();
  return spec_.drop_last ? left / g : left / g + (left % g != 0 ? 1 : 0);
}

std::vector<uint64_t> ResumableSampler::positions_at(LoaderCursor c, uint32_t rank) const {
  throw_if_error(check_rank(spec_, rank));
  throw_if_error(validate_cursor(spec_, c));
  std::vector<uint64_t> out;
  if (at_epoch_end(c)) return out;
  const uint64_t w = spec_.world_size;
  // Written as a difference so that position + G never has to be formed near 2^64.
  const uint64_t end = c.position + std::min(spec_.global_batch(), spec_.dataset_size - c.position);
  // The first g >= position with g mod W == rank.
  uint64_t g = c.position + (rank + w - c.position % w) % w;
  out.reserve(spec_.batch_size);
  for (; g < end; g += w) out.push_back(g);
  return out;
}

std::vector<uint64_t> ResumableSampler::batch_at(LoaderCursor c, uint32_t rank) const {
  std::vector<uint64_t> ids = positions_at(c, rank);
  if (ids.empty()) return ids;
  order(c.epoch).at_many(ids.data(), ids.size(), ids.data());
  return ids;
}

EpochPermutation ResumableSampler::order(uint64_t epoch) const {
  return epoch == order_epoch_ ? order_ : epoch_order(spec_, epoch);
}

void ResumableSampler::set_cursor(LoaderCursor c) {
  throw_if_error(validate_cursor(spec_, c));
  cursor_ = c;
  if (order_epoch_ != c.epoch) {
    order_ = epoch_order(spec_, c.epoch);
    order_epoch_ = c.epoch;
  }
}

std::vector<uint64_t> ResumableSampler::next_batch() {
  if (at_epoch_end(cursor_)) set_cursor({cursor_.epoch + 1, 0});
  std::vector<uint64_t> ids = batch_at(cursor_, rank_);
  LoaderCursor next = cursor_;
  next.position += std::min(spec_.global_batch(), spec_.dataset_size - cursor_.position);
  if (at_epoch_end(next)) next = {cursor_.epoch + 1, 0};
  set_cursor(next);
  return ids;
}

ResumableSampler ResumableSampler::reshard(const ResumableSampler& old, uint32_t new_world_size,
                                           uint32_t new_rank) {
  SamplerSpec spec = old.spec_;
  spec.world_size = new_world_size;
  return ResumableSampler(std::move(spec), new_rank, old.cursor_);
}

}  // namespace ckpt::loader
