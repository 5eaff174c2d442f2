// Where a run directory lives, from the text a user wrote: a local path or an `s3://` URL.
//
// Any other `scheme://` — gs://, az://, file://, hdfs://, a typo like s3:/ or s4:// — is refused
// with one line naming it: a URL is never taken for a local path (a folder named "gs:" in the
// working directory would lose the checkpoint with the node).
#pragma once

#include <string>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt {

// True when `text` starts like a URL ("letters://" or "s3:/"): what env_for_location refuses
// unless it knows the scheme.
bool looks_like_url(const std::string& text);

// The Env that reads and writes `location`:
//   - a path without a scheme: Env::posix() (or `local` when given: posix_direct_io, a test's);
//   - s3://bucket[/prefix]: the process-wide S3 Env for that endpoint and those credentials
//     (ckpt/io/s3/s3_env.h; made at the first use, then shared), configured from AWS_* variables
//     and ~/.aws files (docs/object-storage.md). Its first use also probes that the store honours
//     conditional writes, and refuses one that does not;
//   - anything else that looks like a URL: kInvalidArgument "gs://b/run: unsupported URL scheme
//     'gs'; ckpt reads and writes local paths and s3://bucket/prefix".
// The returned Env lives for the process.
Result<Env*> env_for_location(const std::string& location, Env* local = nullptr);

// One Env for every location: each call goes to env_for_location(its path, local)'s Env, so code
// handed a run directory as text (the CLI's commands, the Python package) reads and writes local
// paths and s3:// alike; a refused URL fails that call with env_for_location's error (exists()
// and is_dir() say false). Process-wide, one per `local` Env.
Env* routing_env(Env* local = nullptr);

// What this process asked of the object store so far (s3:// locations; zeros when none was
// used): requests by kind, retries, and bytes sent and received (HTTP bodies). For tests and
// benchmarks that count the requests and bytes a restore costs.
struct StoreTraffic {
  uint64_t gets = 0, puts = 0, heads = 0, lists = 0, deletes = 0, multipart = 0, retries = 0;
  uint64_t bytes_up = 0, bytes_down = 0;
};
StoreTraffic store_traffic();

// `location` without a trailing '/' (s3://b/run/ and run/ are the same run directory as s3://b/run
// and run); a bare "s3://bucket" stays as it is.
std::string normalize_location(const std::string& location);

}  // namespace ckpt
