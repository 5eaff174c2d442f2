// Where an S3 request goes and who signs it, from the places the AWS CLI and SDKs read
// (docs/object-storage.md): the environment, then ~/.aws/credentials and ~/.aws/config.
//
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url; else
//                https://s3.<region>.amazonaws.com
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region; else us-east-1
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else the
//                profile's aws_access_key_id / aws_secret_access_key / aws_session_token in
//                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then AWS_CONFIG_FILE
//                (~/.aws/config, section "profile NAME"); profile = AWS_PROFILE, else "default"
//   addressing   CKPT_S3_ADDRESSING=path|virtual, the profile's `s3 = addressing_style = ...`;
//                else path-style for a custom endpoint (MinIO, SeaweedFS, Ceph), virtual-hosted
//                for AWS
// Secrets never appear in a message: describe() and every error name only the key id's last 4
// characters and where they came from.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "ckpt/base/status.h"

namespace ckpt::s3 {

// s3://bucket/key/with/slashes → {"bucket", "key/with/slashes"}; key may be empty.
struct S3Url {
  std::string bucket;
  std::string key;
};
// kInvalidArgument naming `url` for anything that is not s3://BUCKET[/KEY] with a valid bucket
// name (3–63 characters of [a-z0-9.-]).
Result<S3Url> parse_s3_url(const std::string& url);
std::string s3_url(const std::string& bucket, const std::string& key);  // inverse

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty when none
  std::string source;         // "environment", "/root/.aws/credentials [default]"
};

struct Endpoint {
  std::string scheme = "https";  // "http" or "https"
  std::string host;  // "127.0.0.1:8333" (port included when given), "s3.us-east-1.amazonaws.com"
  bool path_style = false;  // http://host/bucket/key rather than http://bucket.host/key
};

struct S3Config {
  Endpoint endpoint;
  std::string region = "us-east-1";
  Credentials credentials;
  // Transfer settings (CKPT_S3_* variables override them; see docs/object-storage.md).
  uint64_t part_bytes = 16u << 20;  // multipart part size (raised for objects near 10,000 parts)
  int concurrency = 8;              // parallel parts / ranged GETs per object
  int max_attempts = 6;             // per request, with exponential backoff and full jitter
  double connect_timeout_s = 10;
  double request_timeout_s = 300;  // a stalled transfer (no progress this long) is an error
  // "http://127.0.0.1:8333 (region us-east-1, key …ABCD from environment)": no secret.
  std::string describe() const;
};

// Looks a variable up (getenv by default; tests pass a map).
using Lookup = std::function<std::string(const std::string& name)>;
Lookup process_environment();
Lookup lookup_in(std::map<std::string, std::string> vars);

// kInvalidArgument with one line naming what is missing or malformed (no credentials found and
// where it looked, an endpoint that is not http(s)://host[:port], a profile that does not exist).
Result<S3Config> load_config(const Lookup& env = process_environment());

// Replaces every occurrence of the secret and session token in `text` with "***": the last
// defence for a server's echo in an error body.
std::string redact(const std::string& text, const Credentials& c);

}  // namespace ckpt::s3
