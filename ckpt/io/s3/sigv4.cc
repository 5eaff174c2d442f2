// AWS Signature Version 4 (docs.aws.amazon.com, "Create a signed AWS API request"):
//   1. canonical request: method, path, sorted encoded query, sorted lower-case headers with
//      trimmed values, the signed header names, the payload hash;
//   2. string to sign: algorithm, date, scope, SHA-256 of (1);
//   3. signing key: HMAC chain over date, region, service, "aws4_request" from "AWS4" + secret;
//   4. signature: hex HMAC of (2) under (3), sent in the Authorization header.
#include "ckpt/io/s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include "ckpt/base/text.h"

namespace ckpt::s3 {
namespace {

constexpr const char* kAlgorithm = "AWS4-HMAC-SHA256";
constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";

std::string to_hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 0xf];
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Leading and trailing blanks removed, each inner run of blanks made one space.
std::string trim_value(const std::string& v) {
  std::string out;
  size_t b = 0, e = v.size();
  while (b < e && is_space(v[b])) ++b;
  while (e > b && is_space(v[e - 1])) --e;
  for (size_t i = b; i < e; ++i) {
    if (is_space(v[i])) {
      if (!out.empty() && out.back() == ' ') continue;
      out += ' ';
    } else {
      out += v[i];
    }
  }
  return out;
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<const char*>(md), len);
}

// (lower-case name, trimmed value) sorted by name, duplicates joined with ',' in given order.
std::vector<std::pair<std::string, std::string>> canonical_headers(const HttpRequest& req) {
  std::vector<std::pair<std::string, std::string>> hs;
  bool has_host = false;
  for (const auto& [name, value] : req.headers) {
    std::string n = lower(name);
    if (n == "host") has_host = true;
    hs.emplace_back(std::move(n), trim_value(value));
  }
  if (!has_host) hs.emplace_back("host", trim_value(req.host));
  std::stable_sort(hs.begin(), hs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, std::string>> merged;
  for (auto& h : hs) {
    if (!merged.empty() && merged.back().first == h.first) {
      merged.back().second += "," + h.second;
    } else {
      merged.push_back(std::move(h));
    }
  }
  return merged;
}

std::string signed_header_names(const std::vector<std::pair<std::string, std::string>>& hs) {
  std::string out;
  for (const auto& h : hs) {
    if (!out.empty()) out += ';';
    out += h.first;
  }
  return out;
}

std::string scope(const std::string& region, const std::string& service,
                  const std::string& amz_date) {
  return amz_date.substr(0, 8) + "/" + region + "/" + service + "/aws4_request";
}

void remove_header(HttpRequest* req, const std::string& name) {
  auto& hs = req->headers;
  hs.erase(
      std::remove_if(hs.begin(), hs.end(), [&](const auto& h) { return lower(h.first) == name; }),
      hs.end());
}

// Replaces every header named `name` (any case) by one with `value`.
void set_header(HttpRequest* req, const std::string& name, const std::string& value) {
  remove_header(req, name);
  req->headers.emplace_back(name, value);
}

}  // namespace

std::string uri_encode(const std::string& s, bool keep_slash) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out;
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  return to_hex(md, len);
}

std::string amz_date_now() { return utc_now("%Y%m%dT%H%M%SZ"); }

std::string canonical_request(const HttpRequest& req) {
  std::vector<std::pair<std::string, std::string>> q;
  q.reserve(req.query.size());
  for (const auto& [k, v] : req.query) q.emplace_back(uri_encode(k, false), uri_encode(v, false));
  std::sort(q.begin(), q.end());
  std::string query;
  for (const auto& [k, v] : q) {
    if (!query.empty()) query += '&';
    query += k + "=" + v;
  }
  auto hs = canonical_headers(req);
  std::string out = req.method + "\n" + (req.path.empty() ? "/" : req.path) + "\n" + query + "\n";
  for (const auto& [n, v] : hs) out += n + ":" + v + "\n";
  out += "\n" + signed_header_names(hs) + "\n";
  out += req.payload_sha256.empty() ? kUnsignedPayload : req.payload_sha256;
  return out;
}

std::string string_to_sign(const HttpRequest& req, const std::string& region,
                           const std::string& service, const std::string& amz_date) {
  std::string creq = canonical_request(req);
  return std::string(kAlgorithm) + "\n" + amz_date + "\n" + scope(region, service, amz_date) +
         "\n" + sha256_hex(creq.data(), creq.size());
}

std::string signature(const HttpRequest& req, const Credentials& creds, const std::string& region,
                      const std::string& service, const std::string& amz_date) {
  std::string key = hmac_sha256("AWS4" + creds.secret_access_key, amz_date.substr(0, 8));
  key = hmac_sha256(key, region);
  key = hmac_sha256(key, service);
  key = hmac_sha256(key, "aws4_request");
  std::string mac = hmac_sha256(key, string_to_sign(req, region, service, amz_date));
  return to_hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());
}

std::string authorization(const HttpRequest& req, const Credentials& creds,
                          const std::string& region, const std::string& service,
                          const std::string& amz_date) {
  return std::string(kAlgorithm) + " Credential=" + creds.access_key_id + "/" +
         scope(region, service, amz_date) +
         ", SignedHeaders=" + signed_header_names(canonical_headers(req)) +
         ", Signature=" + signature(req, creds, region, service, amz_date);
}

void sign_v4(HttpRequest* req, const Credentials& creds, const std::string& region,
             const std::string& service, const std::string& amz_date) {
  remove_header(req, "authorization");
  set_header(req, "x-amz-date", amz_date);
  set_header(req, "x-amz-content-sha256",
             req->payload_sha256.empty() ? kUnsignedPayload : req->payload_sha256);
  if (!creds.session_token.empty()) set_header(req, "x-amz-security-token", creds.session_token);
  std::string auth = authorization(*req, creds, region, service, amz_date);
  req->headers.emplace_back("Authorization", std::move(auth));
}

}  // namespace ckpt::s3
