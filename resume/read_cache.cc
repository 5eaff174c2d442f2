#include "resume/read_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/base/stream_copy.h"

namespace ckpt::resume {
namespace {

// MemAvailable from /proc/meminfo (free memory plus what the kernel can reclaim), else sysconf's
// free pages.
uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib << 10;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

uint64_t default_cache_budget(uint64_t nbytes) { return std::min(nbytes, available_memory() / 2); }

Status ReadCache::read_at(uint64_t offset, void* dst, size_t n) const {
  if (!range_inside(offset, n, size())) return base_.read_at(offset, dst, n);  // its error
  CKPT_RETURN_IF_ERROR(serve(offset, static_cast<unsigned char*>(dst), n));
  count_read(n);
  return Status::ok();
}

Status ReadCache::read_scatter_at(uint64_t offset, const ReadSpan* spans, size_t count) const {
  return scatter(offset, spans, count, false);
}

Status ReadCache::read_scatter_streaming(uint64_t offset, const ReadSpan* spans,
                                         size_t count) const {
  return scatter(offset, spans, count, true);
}

// Each span served where it lands (no staging buffer).
Status ReadCache::scatter(uint64_t offset, const ReadSpan* spans, size_t count,
                          bool streaming) const {
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) total += spans[i].nbytes;
  if (!range_inside(offset, total, size())) return base_.read_scatter_at(offset, spans, count);
  bool held = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = covered(offset, offset + total);
  }
  if (held) {  // each span copied out where it lands, no staging buffer
    uint64_t at = offset;
    for (size_t i = 0; i < count; ++i) {
      if (spans[i].nbytes != 0) {
        CKPT_RETURN_IF_ERROR(
            serve(at, static_cast<unsigned char*>(spans[i].dst), spans[i].nbytes, streaming));
      }
      at += spans[i].nbytes;
    }
  } else {  // one read of what is missing (on a store, a request per span would be many)
    std::vector<unsigned char> buf(total);
    CKPT_RETURN_IF_ERROR(serve(offset, buf.data(), total));
    uint64_t at = 0;
    for (size_t i = 0; i < count; ++i) {
      if (spans[i].nbytes != 0) std::memcpy(spans[i].dst, buf.data() + at, spans[i].nbytes);
      at += spans[i].nbytes;
    }
  }
  count_read(total);
  return Status::ok();
}

Result<bool> ReadCache::visit_at(uint64_t offset, size_t n, ByteVisitor visit, void* arg) const {
  if (n == 0 || !range_inside(offset, n, size())) return false;
  const uint64_t end = offset + n;
  const unsigned char* held = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.upper_bound(offset);  // the block before it starts at or before offset
    if (it != blocks_.begin() && std::prev(it)->first + std::prev(it)->second.n >= end) {
      held = std::prev(it)->second.data() + (offset - std::prev(it)->first);
      hits_ += n;
    } else {
      if (overlaps(offset, end) || held_ + n > budget_ || !wanted(offset, end)) return false;
      held_ += n;  // reserved for the block below
    }
  }
  if (held != nullptr) {  // blocks stay until the cache goes
    visit(held, n, arg);
    count_read(n);
    return true;
  }
  Block b = new_block(n);
  Status s = base_.read_visiting(offset, b.data(), n, visit, arg);  // each part visited as it lands
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.is_ok() || overlaps(offset, end)) {
    held_ -= n;
    CKPT_RETURN_IF_ERROR(s);
  } else {
    blocks_.emplace(offset, std::move(b));
  }
  misses_ += n;
  count_read(n);
  return true;
}

Status ReadCache::serve(uint64_t offset, unsigned char* dst, uint64_t n, bool streaming) const {
  struct Piece {
    uint64_t at, n;
    const unsigned char* held;  // null: a hole, read from the file
  };
  std::vector<Piece> pieces;
  const uint64_t end = offset + n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t pos = offset;
    auto it = blocks_.upper_bound(pos);
    if (it != blocks_.begin() && std::prev(it)->first + std::prev(it)->second.n > pos) --it;
    while (pos < end) {
      if (it != blocks_.end() && it->first <= pos) {  // a block covers pos
        const uint64_t len = std::min(end, it->first + it->second.n) - pos;
        pieces.push_back({pos, len, it->second.data() + (pos - it->first)});
        pos += len;
        ++it;
      } else {
        const uint64_t to = it == blocks_.end() ? end : std::min(end, it->first);
        pieces.push_back({pos, to - pos, nullptr});
        pos = to;
      }
    }
  }
  uint64_t hit = 0, miss = 0;
  for (const Piece& p : pieces) {
    unsigned char* out = dst + (p.at - offset);
    if (p.held != nullptr) {
      if (streaming) {
        stream_copy(out, p.held, p.n);
      } else {
        std::memcpy(out, p.held, p.n);
      }
      hit += p.n;
      continue;
    }
    CKPT_RETURN_IF_ERROR(base_.read_at(p.at, out, p.n));
    keep(p.at, out, p.n);
    miss += p.n;
  }
  std::lock_guard<std::mutex> lock(mu_);
  hits_ += hit;
  misses_ += miss;
  return Status::ok();
}

void ReadCache::keep_only(std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& [a, b] : ranges) {
    if (a >= b) continue;
    if (!merged.empty() && a <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, b);
    } else {
      merged.emplace_back(a, b);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  only_ = std::move(merged);
}

void ReadCache::keep(uint64_t offset, const unsigned char* bytes, uint64_t n) const {
  // The parts to keep, their bytes reserved against the budget under the lock ...
  std::vector<std::pair<uint64_t, uint64_t>> parts;  // [from, to) of the file
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto take = [&](uint64_t from, uint64_t to) {
      if (to <= from || held_ + (to - from) > budget_ || overlaps(from, to)) return;
      held_ += to - from;
      parts.emplace_back(from, to);
    };
    const uint64_t end = offset + n;
    if (!only_) {
      take(offset, end);
    } else {
      auto it = std::partition_point(only_->begin(), only_->end(),
                                     [&](const auto& r) { return r.second <= offset; });
      for (; it != only_->end() && it->first < end; ++it) {
        take(std::max(offset, it->first), std::min(end, it->second));
      }
    }
  }
  // ... and copied outside it: a fresh block's page faults would hold up every other reader.
  for (const auto& [from, to] : parts) {
    Block b = new_block(to - from);
    std::memcpy(b.data(), bytes + (from - offset), b.n);
    std::lock_guard<std::mutex> lock(mu_);
    if (overlaps(from, to)) {  // another reader of the same bytes kept them first
      held_ -= b.n;
      continue;
    }
    blocks_.emplace(from, std::move(b));
  }
}

ReadCache::Block ReadCache::new_block(uint64_t n) {
  Block b;
  b.n = n;
  if (n >= (2u << 20)) {  // huge pages where they fault in faster (ckpt/io/host_memory.h)
    auto m = HostMemory::allocate(n, /*populate=*/false, "a restore's read cache");
    if (m.is_ok()) b.large = std::move(m).value();
  }
  if (b.large.data() == nullptr) b.small.reset(new unsigned char[n]);
  return b;
}

bool ReadCache::wanted(uint64_t from, uint64_t to) const {
  if (!only_) return true;
  auto it = std::partition_point(only_->begin(), only_->end(),
                                 [&](const auto& r) { return r.second <= from; });
  return it != only_->end() && it->first <= from && to <= it->second;
}

bool ReadCache::covered(uint64_t from, uint64_t to) const {
  auto it = blocks_.upper_bound(from);
  if (it == blocks_.begin()) return from >= to;
  --it;  // the block starting at or before `from`
  for (uint64_t at = from; at < to; ++it) {
    if (it == blocks_.end() || it->first > at || it->first + it->second.n <= at) return false;
    at = it->first + it->second.n;
  }
  return true;
}

bool ReadCache::overlaps(uint64_t from, uint64_t to) const {
  auto it = blocks_.lower_bound(from);
  if (it != blocks_.end() && it->first < to) return true;
  return it != blocks_.begin() && std::prev(it)->first + std::prev(it)->second.n > from;
}

uint64_t ReadCache::held_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}
uint64_t ReadCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t ReadCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace ckpt::resume
