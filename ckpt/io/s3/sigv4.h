// AWS Signature Version 4 for S3 requests (docs.aws.amazon.com "Signature Version 4 signing
// process"), tested against AWS's published test suite (tests/s3/sigv4_test.cc).
//
// The signer adds x-amz-date, x-amz-content-sha256 (the payload's SHA-256, or UNSIGNED-PAYLOAD),
// x-amz-security-token when there is a session token, and Authorization. Header names are matched
// case-insensitively; every header given is signed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ckpt/io/s3/config.h"

namespace ckpt::s3 {

struct HttpRequest {
  std::string method;  // "PUT"
  std::string host;    // the Host header's value
  // The path as sent, already URI-encoded per S3's rules (each segment encoded, '/' kept).
  std::string path;
  // Query parameters, not encoded; the signer encodes and sorts them.
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;  // Host may be omitted: added
  std::string payload_sha256;                                // hex; empty means "UNSIGNED-PAYLOAD"
};

// Signs `req` in place at `amz_date` ("20150830T123600Z") for `service` ("s3") in `region`.
void sign_v4(HttpRequest* req, const Credentials& creds, const std::string& region,
             const std::string& service, const std::string& amz_date);

// Pieces, exposed for the test vectors: the canonical request, the string to sign, and the
// signature (hex) of a request whose headers already carry x-amz-date.
std::string canonical_request(const HttpRequest& req);
std::string string_to_sign(const HttpRequest& req, const std::string& region,
                           const std::string& service, const std::string& amz_date);
std::string signature(const HttpRequest& req, const Credentials& creds, const std::string& region,
                      const std::string& service, const std::string& amz_date);
// "AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/s3/aws4_request, SignedHeaders=...,
// Signature=..." for `req` as it stands (sign_v4 adds this header after its own x-amz-*).
std::string authorization(const HttpRequest& req, const Credentials& creds,
                          const std::string& region, const std::string& service,
                          const std::string& amz_date);

// S3's URI encoding (RFC 3986 unreserved kept; '/' kept when `keep_slash`).
std::string uri_encode(const std::string& s, bool keep_slash);
std::string sha256_hex(const void* data, size_t n);
// "20150830T123600Z" for now (UTC).
std::string amz_date_now();

}  // namespace ckpt::s3
