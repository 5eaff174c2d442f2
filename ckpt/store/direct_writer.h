// DirectWriter: writes block-aligned pieces of one file with direct I/O (no copy into the page
// cache) through a small ring of aligned bounce buffers, so the disk works while the caller
// copies the next piece. Used by write_rank for the tensor extents.
//
// Protocol (one caller thread; kWriters writer threads owned by the object):
//   1. put(offset, src, n) — offset and n multiples of Env::kDirectIoAlignment, n ≤ kChunk —
//      waits for a free slot, copies src into it and hands it to the writer thread; it returns
//      the copy, valid until the next put, so the caller can hash bytes that are hot in cache.
//   2. Writer j writes the pieces put j, j + kWriters, ... (slot = piece % kSlots) and frees their
//      slots; the first error stops every writer, and every later put and finish() return it.
//   3. finish() waits until every slot is written, joins the thread and returns the first error.
//      Nothing is durable until the caller syncs the file.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::store {

class DirectWriter {
 public:
  static constexpr size_t kChunk = 4u << 20;
  static constexpr size_t kWriters = 2;  // requests in flight: one disk queue slot is not enough
  static constexpr size_t kSlots = 2 * kWriters;

  // One handle per writer thread (a WritableFile is used by one thread at a time): kWriters of
  // them, all opened on the same file.
  explicit DirectWriter(std::vector<std::unique_ptr<WritableFile>> files);
  ~DirectWriter();  // finishes (errors then are the caller's to have asked for)
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;

  Result<const unsigned char*> put(uint64_t offset, const void* src, size_t n);
  Status finish();

 private:
  struct Slot {
    unsigned char* buf = nullptr;
    uint64_t offset = 0;
    size_t n = 0;
    bool full = false;
  };
  void writer_loop(size_t first);

  std::vector<std::unique_ptr<WritableFile>> files_;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t next_put_ = 0;  // caller's side of the ring
  bool done_ = false;    // no more puts
  Status error_;         // the writer's first error
  std::vector<std::thread> writers_;
};

}  // namespace ckpt::store
