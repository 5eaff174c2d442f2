// ObjectWriter: one object written as a stream of appends, uploaded while it is written.
//
// Bytes are gathered into part buffers of config.part_bytes (5 MiB minimum; the part size doubles
// when `size_hint` says the object would need more than 10,000 parts); each full part is uploaded
// by one of config.concurrency threads while the caller fills the next (at most concurrency + 1
// buffers are held, so memory stays bounded whatever the object's size). finish() uploads the
// last part and completes the upload, with the condition given; an object that fits in one part
// is one PutObject. Any failure — a part that fails after its retries, a lost condition, the
// destructor without finish() — aborts the multipart upload (AbortMultipartUpload), so nothing
// is left open on the store. Not thread-safe: one caller thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ckpt/io/s3/client.h"

namespace ckpt::s3 {

class ObjectWriter {
 public:
  static std::unique_ptr<ObjectWriter> create(S3Client* client, std::string bucket, std::string key,
                                              uint64_t size_hint = 0);
  virtual ~ObjectWriter() = default;  // aborts when finish() was not called or failed
  virtual Status append(const void* data, size_t n) = 0;
  // The object appears (whole) when this returns ok with precondition_failed false.
  virtual Result<PutResult> finish(const Condition& cond = {}) = 0;
  virtual uint64_t bytes() const = 0;  // appended so far
};

}  // namespace ckpt::s3
