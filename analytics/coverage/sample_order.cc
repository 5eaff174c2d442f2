#include "analytics/coverage/sample_order.h"

#include <limits>

#include "analytics/coverage/torch_randperm.h"
#include "ckpt/loader/resumable_sampler.h"

namespace ckpt::analytics {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

class IdentityOrder final : public SampleOrder {
 public:
  explicit IdentityOrder(uint64_t n) : n_(n) {}
  uint64_t size() const override { return n_; }
  uint64_t id_at(uint64_t p) const override { return p; }
  uint64_t position_of(uint64_t id) const override { return id; }
  bool cheap() const override { return true; }

 private:
  uint64_t n_;
};

// Our keyed order: O(1) memory, a few Feistel rounds per lookup.
class KeyedOrder final : public SampleOrder {
 public:
  KeyedOrder(uint64_t n, uint64_t seed, uint64_t epoch) : perm_(n, seed, epoch) {}
  uint64_t size() const override { return perm_.size(); }
  uint64_t id_at(uint64_t p) const override { return perm_.at(p); }
  uint64_t position_of(uint64_t id) const override { return perm_.index_of(id); }
  bool cheap() const override { return false; }

 private:
  loader::EpochPermutation perm_;
};

// A permutation drawn as torch.randperm draws it, kept with its inverse: 8 bytes a sample (the
// sampler's cap keeps N below 2^32).
class TableOrder final : public SampleOrder {
 public:
  explicit TableOrder(std::vector<uint32_t> ids) : ids_(std::move(ids)), pos_(ids_.size()) {
    for (size_t p = 0; p < ids_.size(); ++p) pos_[ids_[p]] = static_cast<uint32_t>(p);
  }
  uint64_t size() const override { return ids_.size(); }
  uint64_t id_at(uint64_t p) const override { return ids_[p]; }
  uint64_t position_of(uint64_t id) const override { return pos_[id]; }
  bool cheap() const override { return true; }

 private:
  std::vector<uint32_t> ids_;
  std::vector<uint32_t> pos_;
};

}  // namespace

const char* sampler_kind_name(SamplerKind k) {
  switch (k) {
    case SamplerKind::kSequential:
      return "sequential";
    case SamplerKind::kTorchRandom:
      return "torch_random";
    case SamplerKind::kTorchDistributed:
      return "torch_distributed";
    case SamplerKind::kCkpt:
      return "ckpt";
  }
  return "?";
}

Result<SamplerKind> sampler_kind_from(const std::string& name) {
  for (SamplerKind k : {SamplerKind::kSequential, SamplerKind::kTorchRandom,
                        SamplerKind::kTorchDistributed, SamplerKind::kCkpt}) {
    if (name == sampler_kind_name(k)) return k;
  }
  return invalid_argument("unknown sampler kind \"" + name +
                          "\" (expected sequential, torch_random, torch_distributed or ckpt)");
}

uint64_t SamplerConfig::step_positions() const {
  return uint64_t{batch_size} * world_size * grad_accum;
}

uint64_t SamplerConfig::epoch_length() const {
  const uint64_t n = dataset_size, w = world_size, b = batch_size;
  if (kind == SamplerKind::kTorchDistributed) {
    const uint64_t num_samples =
        (drop_last && n % w != 0) ? (n >= w ? ceil_div(n - w, w) : 0) : ceil_div(n, w);
    const uint64_t batches = drop_last ? num_samples / b : ceil_div(num_samples, b);
    return std::min(batches * b, num_samples) * w;
  }
  const uint64_t g = b * w;
  return drop_last ? (n / g) * g : n;
}

uint64_t SamplerConfig::steps_per_epoch() const {
  const uint64_t s = step_positions();
  return s == 0 ? 0 : ceil_div(epoch_length(), s);
}

Status validate_sampler(const SamplerConfig& c) {
  const std::string kind = sampler_kind_name(c.kind);
  if (c.dataset_size == 0 || c.dataset_size > loader::kMaxDatasetSize) {
    return invalid_argument("dataset_size must be in [1, 2^62], got " +
                            std::to_string(c.dataset_size));
  }
  if (c.batch_size == 0) return invalid_argument("batch_size must be >= 1, got 0");
  if (c.world_size == 0) return invalid_argument("world_size must be >= 1, got 0");
  if (c.grad_accum == 0) return invalid_argument("grad_accum must be >= 1, got 0");
  if (c.kind == SamplerKind::kTorchRandom && c.world_size != 1) {
    return invalid_argument(
        "sampler torch_random is RandomSampler, a single-process sampler: "
        "world_size must be 1, got " +
        std::to_string(c.world_size) + " (use torch_distributed)");
  }
  if (c.epoch_length() == 0) {
    return invalid_argument("sampler " + kind + ": with drop_last, a dataset of " +
                            std::to_string(c.dataset_size) + " samples yields no full batch of " +
                            std::to_string(c.batch_size) + " x " + std::to_string(c.world_size) +
                            " ranks");
  }
  const bool needs_torch = c.shuffle && (c.kind == SamplerKind::kTorchRandom ||
                                         c.kind == SamplerKind::kTorchDistributed);
  // torch.randperm's order cannot be computed piecewise (the "inside-out" shuffle of large N
  // moves every position until its last step), so it is materialised with its inverse: 8 bytes a
  // sample, at most 2 GiB under this cap.
  if (needs_torch && c.dataset_size > kMaxTorchOrderSamples) {
    return unsupported("sampler " + kind + ": dataset_size " + std::to_string(c.dataset_size) +
                       " is over the " + std::to_string(kMaxTorchOrderSamples) +
                       "-sample limit for a replayed torch.randperm order (it is materialised, 8 "
                       "bytes a sample)");
  }
  return Status::ok();
}

std::shared_ptr<const SampleOrder> make_table_order(const std::vector<int64_t>& perm) {
  return std::make_shared<TableOrder>(std::vector<uint32_t>(perm.begin(), perm.end()));
}

uint64_t default_order_key(const SamplerConfig& c, uint64_t epoch) {
  return c.kind == SamplerKind::kSequential ? 0 : epoch;
}

Result<std::shared_ptr<const SampleOrder>> make_order(const SamplerConfig& c, uint64_t key) {
  const uint64_t n = c.dataset_size;
  if (!c.shuffle || c.kind == SamplerKind::kSequential) {
    return std::shared_ptr<const SampleOrder>(std::make_shared<IdentityOrder>(n));
  }
  if (c.kind == SamplerKind::kCkpt) {
    return std::shared_ptr<const SampleOrder>(std::make_shared<KeyedOrder>(n, c.seed, key));
  }
  std::vector<uint32_t> perm = c.kind == SamplerKind::kTorchDistributed
                                   ? torch_randperm_after_u32(n, c.seed + key, 0)
                                   : torch_randperm_after_u32(n, c.seed, key);
  return std::shared_ptr<const SampleOrder>(std::make_shared<TableOrder>(std::move(perm)));
}

}  // namespace ckpt::analytics
