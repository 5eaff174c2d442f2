// The lease that stands in for flock on an object store (s3_env.h, S3Lease).
#pragma once

#include <memory>
#include <string>

#include "ckpt/io/env.h"
#include "ckpt/io/s3/client.h"
#include "ckpt/io/s3/config.h"
#include "ckpt/io/s3/s3_env.h"

namespace ckpt::s3 {

// Takes the lease object at `u` for `owner` ("pid P host H"), or kLocked naming its live holder.
Result<std::unique_ptr<FileLock>> take_lease(S3Client* client, const S3Url& u,
                                             const std::string& path, const std::string& owner,
                                             const LeaseOptions& options);

}  // namespace ckpt::s3
