// S3Env: the Env over an S3-compatible object store (docs/format.md §9, docs/object-storage.md).
// Paths are URLs, s3://bucket/key; path_join, path_dirname and path_basename work on them.
//
//   new_writable / write_atomic   an ObjectWriter (upload.h): streamed multipart upload; the
//                                 object appears whole at close(). open_for_update, open_append,
//                                 open_for_direct_update, rename and exchange are kUnsupported
//                                 (store/ uses ObjectStore's calls instead).
//   open_random                   HEAD once (size, ETag = version()), then ranged GETs; a read
//                                 that spans many bytes is split into concurrency parallel GETs.
//   list_dir / is_dir / exists    ListObjectsV2 with delimiter "/" ("directories" are prefixes);
//                                 make_dirs, sync, sync_dir are no-ops (nothing to make durable).
//   remove_file / remove_tree     DeleteObjects.
//   lock_file                     a lease object (see S3Lease below), not flock.
// Construction probes the store: a probe object is written with If-None-Match: * twice, and a
// store that accepts the second write (it ignores conditional headers, so it could not keep one
// commit per step) is refused: kUnsupported "http://127.0.0.1:9000 ignores If-None-Match ...".
#pragma once

#include <memory>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "ckpt/io/s3/client.h"

namespace ckpt::s3 {

// The lease that stands in for flock on a store (RUN/LOCK as an object): JSON with the holder
// ("pid P host H"), a random token and the time it was last renewed. Taken with If-None-Match:
// *, renewed with If-Match every ttl/3 by a background thread, released (deleted) by the
// destructor. A holder that died stops renewing: after ttl (CKPT_S3_LEASE_SECONDS, default 30)
// another writer takes it over with If-Match on the dead one's version. While it is live, a second
// writer gets kLocked "s3://b/run/LOCK: locked by pid P host H (renewed 4 s ago; a dead holder's
// lease runs out in 26 s)".
struct LeaseOptions {
  double ttl_seconds = 30;
};

// Makes an S3Env from `config`, probing the store (see above). `scratch_dir` defaults to
// $TMPDIR/ckpt-s3-<pid>.
Result<std::unique_ptr<Env>> make_s3_env(S3Config config, std::string scratch_dir = "",
                                         LeaseOptions lease = {});

// The client under an Env made by make_s3_env (stats, tests), or nullptr for any other Env.
S3Client* s3_client_of(Env* env);

}  // namespace ckpt::s3
