// The region digest (ckpt/format/regions.h) of a rank file as its bytes are now: the bytes
// between the tensors hashed here, each tensor's region taken from the manifest's hash (which the
// caller checks against the tensor's bytes: read_rank, the restore pipeline). Shared by
// `ckpt verify` and the restore path.
#pragma once

#include <cstdint>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"

namespace ckpt::store {

// Reads the gaps, neighbours joined across small tensors (≤ 32 KiB) into reads of ≤ 1 MiB, so a
// file of many small tensors costs a few reads rather than one per tensor; errors name the file.
Result<uint64_t> regions_digest_of(const RandomAccessFile& file, const Manifest& m,
                                   uint64_t file_bytes);

}  // namespace ckpt::store
