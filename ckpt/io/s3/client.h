// S3Client: the S3 calls ckpt needs, over libcurl, signed with SigV4 (sigv4.h).
//
// Thread-safe: calls from many threads share a pool of curl handles (connections are reused,
// keep-alive). Every call retries, up to config.max_attempts, on a dropped connection, a timeout,
// 500, 502, 503, 504 and the S3 errors SlowDown, InternalError, RequestTimeout and
// ConditionalRequestConflict (409), with exponential backoff and full jitter (base 100 ms, cap
// 10 s); then it fails with one line: "s3://b/k: PUT failed after 6 attempts: 503 SlowDown
// (http://127.0.0.1:8333)". Other 4xx are not retried. Errors name the URL, the verb, the HTTP
// status and S3's error code and message, never a secret (config.h redact()).
// Status codes: kNotFound for 404/NoSuchKey/NoSuchBucket/NoSuchUpload, kInvalidArgument for
// 403/InvalidAccessKeyId/SignatureDoesNotMatch (bad credentials: "check AWS_ACCESS_KEY_ID ..."),
// kIoError for everything else. A conditional write that loses (412) is not an error: its result
// says so.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "ckpt/io/s3/config.h"

namespace ckpt::s3 {

// A conditional write: at most one of the two.
struct Condition {
  bool if_none_match = false;  // If-None-Match: *  (create only)
  std::string if_match;        // If-Match: <etag> (replace only that version)
};

struct PutResult {
  bool precondition_failed = false;  // 412: nothing was written
  std::string etag;                  // of the new object, quotes kept as S3 sends them
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;
  std::string last_modified;  // as S3 sends it
};

struct ListEntry {
  std::string key;
  uint64_t size = 0;
  std::string etag;
};
struct ListResult {
  std::vector<ListEntry> objects;     // sorted by key
  std::vector<std::string> prefixes;  // CommonPrefixes (with delimiter), sorted, ending '/'
};

struct UploadRef {
  std::string key;
  std::string upload_id;
};

// Requests and bytes, by kind: what the benchmarks and the "bytes each rank read" tests count.
struct RequestStats {
  std::atomic<uint64_t> puts{0}, gets{0}, heads{0}, lists{0}, deletes{0}, multipart{0};
  std::atomic<uint64_t> retries{0}, bytes_up{0}, bytes_down{0};
};

class S3Client {
 public:
  static Result<std::unique_ptr<S3Client>> create(S3Config config);
  virtual ~S3Client() = default;
  const S3Config& config() const { return config_; }
  RequestStats& stats() { return stats_; }

  // PutObject of n bytes at `data`.
  virtual Result<PutResult> put_object(const std::string& bucket, const std::string& key,
                                       const void* data, size_t n, const Condition& cond = {}) = 0;
  // GetObject, whole: kCorrupt when larger than max_bytes (nothing beyond is read).
  virtual Result<std::string> get_object(const std::string& bucket, const std::string& key,
                                         uint64_t max_bytes, std::string* etag = nullptr) = 0;
  // Ranged GET of exactly n bytes at offset into dst; fewer bytes is kCorrupt "truncated".
  // With `visit`, each part of dst is shown to it as it lands (RandomAccessFile::read_visiting);
  // a retry after a dropped connection asks only for the bytes not yet received.
  virtual Status get_range(const std::string& bucket, const std::string& key, uint64_t offset,
                           void* dst, size_t n, RandomAccessFile::ByteVisitor visit,
                           void* visit_arg) = 0;
  virtual Result<ObjectInfo> head_object(const std::string& bucket, const std::string& key) = 0;
  // ListObjectsV2, every page. With delimiter "/": objects directly under prefix and the
  // "subdirectories" as prefixes; with "": everything under prefix.
  virtual Result<ListResult> list(const std::string& bucket, const std::string& prefix,
                                  const std::string& delimiter) = 0;
  // DeleteObjects in batches of 1,000; a missing key is not an error.
  virtual Status delete_objects(const std::string& bucket,
                                const std::vector<std::string>& keys) = 0;

  // Multipart upload. Parts are numbered from 1; complete_multipart takes the parts' ETags in
  // order and may be conditional (S3 checks the condition at Complete).
  virtual Result<std::string> create_multipart(const std::string& bucket,
                                               const std::string& key) = 0;
  virtual Result<std::string> upload_part(const std::string& bucket, const std::string& key,
                                          const std::string& upload_id, int part_number,
                                          const void* data, size_t n) = 0;
  virtual Result<PutResult> complete_multipart(const std::string& bucket, const std::string& key,
                                               const std::string& upload_id,
                                               const std::vector<std::string>& part_etags,
                                               const Condition& cond = {}) = 0;
  virtual Status abort_multipart(const std::string& bucket, const std::string& key,
                                 const std::string& upload_id) = 0;
  virtual Result<std::vector<UploadRef>> list_multipart_uploads(const std::string& bucket,
                                                                const std::string& prefix) = 0;

 protected:
  explicit S3Client(S3Config config) : config_(std::move(config)) {}
  S3Config config_;
  RequestStats stats_;
};

}  // namespace ckpt::s3
