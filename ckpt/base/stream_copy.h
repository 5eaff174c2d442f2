// stream_copy: memcpy for bytes nobody reads again soon — a restore's unhashed copy into the
// live tensors (RandomAccessFile::read_scatter_streaming).
//
// A plain copy into memory that is not in the CPU caches first reads every destination line
// ("read for ownership"), then writes it back: three bytes of memory traffic per byte copied.
// Non-temporal stores write around the caches: two. glibc's memcpy switches to them only above
// three quarters of the shared cache (225 MB on the development VM), far above a restore's 8 MiB
// reads. On the development VM (2026-12-06), 1 GB from a mapping of cached file pages into
// faulted-in memory: 0.067–0.073 s with memcpy, 0.049–0.052 s streamed, 2 threads (0.13 against
// 0.10 s on one). The destination ends up out of the caches, so callers stream only what they
// do not read next (never a buffer about to be hashed).
#pragma once

#include <cstddef>

namespace ckpt {

// Copies n bytes from src to dst (not overlapping) like memcpy (for n == 0 either may be null);
// copies of at least kStreamCopyMin bytes on x86-64 with non-temporal stores, fenced before
// returning.
void stream_copy(void* dst, const void* src, size_t n);

constexpr size_t kStreamCopyMin = 64u << 10;

}  // namespace ckpt
