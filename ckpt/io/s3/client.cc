// S3Client over libcurl (client.h): signing, the handle pool, retries, S3's XML.
#include "ckpt/io/s3/client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "ckpt/base/text.h"
#include "ckpt/io/s3/sigv4.h"

namespace ckpt::s3 {
namespace {

// --- S3's XML, read with bounds checks (no XML library): the text of <tag>…</tag> ---------
std::string xml_unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    static const std::pair<const char*, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool done = false;
    for (const auto& [name, c] : kEntities) {
      const size_t n = std::strlen(name);
      if (s.compare(i, n, name) == 0) {
        out += c;
        i += n - 1;
        done = true;
        break;
      }
    }
    if (!done) out += '&';
  }
  return out;
}

// Every <tag>text</tag> in [from, to) of `xml`, in order.
std::vector<std::pair<size_t, size_t>> elements(const std::string& xml, const std::string& tag,
                                                size_t from = 0, size_t to = std::string::npos) {
  std::vector<std::pair<size_t, size_t>> out;
  to = std::min(to, xml.size());
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t at = from;
  while (at < to) {
    const size_t b = xml.find(open, at);
    if (b == std::string::npos || b >= to) break;
    const size_t e = xml.find(close, b + open.size());
    if (e == std::string::npos || e > to) break;
    out.emplace_back(b + open.size(), e);
    at = e + close.size();
  }
  return out;
}

std::string first_text(const std::string& xml, const std::string& tag, size_t from = 0,
                       size_t to = std::string::npos) {
  auto all = elements(xml, tag, from, to);
  if (all.empty()) return {};
  return xml_unescape(xml.substr(all[0].first, all[0].second - all[0].first));
}

std::string md5_base64(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  unsigned char b64[64];
  const int n = EVP_EncodeBlock(b64, md, static_cast<int>(len));
  return std::string(reinterpret_cast<char*>(b64), static_cast<size_t>(n));
}

// --- one HTTP exchange ----------------------------------------------------------------------
struct Request {
  Request(std::string m, std::string b, std::string k)
      : method(std::move(m)), bucket(std::move(b)), key(std::move(k)) {}
  std::string method;  // GET PUT POST HEAD DELETE
  std::string bucket, key;
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;
  const void* body = nullptr;
  size_t body_bytes = 0;
  // A ranged GET into caller memory: the object's bytes [dst_offset, dst_offset + dst_bytes)
  // into dst; else the body goes into `text`. `*placed` (the caller's, kept across attempts)
  // counts the bytes in place: a retry asks only for the rest. Each part is shown to `visit`
  // once it is in place.
  void* dst = nullptr;
  size_t dst_bytes = 0;
  uint64_t dst_offset = 0;
  size_t* placed = nullptr;
  RandomAccessFile::ByteVisitor visit = nullptr;
  void* visit_arg = nullptr;
  uint64_t max_text = 1u << 20;  // a larger response body is an error (kCorrupt)
};

struct Response {
  long status = 0;
  std::string text;  // body (error XML, listing, small object)
  size_t received = 0;
  std::string etag;
  uint64_t content_length = 0;
  bool too_large = false;
};

struct Transfer {
  const Request* req;
  Response* resp;
  size_t sent = 0;
};

size_t on_read(char* buf, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t left = t->req->body_bytes - t->sent;
  const size_t k = std::min(left, size * n);
  if (k > 0) std::memcpy(buf, static_cast<const char*>(t->req->body) + t->sent, k);
  t->sent += k;
  return k;
}

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t k = size * n;
  Response* r = t->resp;
  // A ranged GET writes into place only on success (206, or 200 to a first attempt: a server
  // that sends the whole object when the range covers it); an error body goes to text.
  const Request& q = *t->req;
  const bool into_dst =
      q.dst != nullptr && (r->status == 206 || (r->status == 200 && *q.placed == 0));
  if (into_dst) {
    const size_t at = *q.placed;
    if (at + k > q.dst_bytes) {
      r->too_large = true;
      return 0;  // more than asked for: stop (CURLE_WRITE_ERROR)
    }
    unsigned char* part = static_cast<unsigned char*>(q.dst) + at;
    std::memcpy(part, data, k);
    *q.placed = at + k;
    if (q.visit != nullptr) q.visit(part, k, q.visit_arg);  // still in cache
  } else {
    if (r->text.size() + k > t->req->max_text) {
      r->too_large = true;
      return 0;
    }
    r->text.append(data, k);
  }
  r->received += k;
  return k;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t k = size * n;
  std::string line(data, k);
  if (line.rfind("HTTP/", 0) == 0) {  // a new status line (after 100 Continue, a redirect)
    const size_t sp = line.find(' ');
    t->resp->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return k;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return k;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.pop_back();
  if (name == "etag") t->resp->etag = value;
  if (name == "content-length") t->resp->content_length = std::strtoull(value.c_str(), nullptr, 10);
  return k;
}

bool retryable(long status, const std::string& code) {
  if (status == 500 || status == 502 || status == 503 || status == 504) return true;
  if (status == 409 && code == "ConditionalRequestConflict") return true;
  return code == "SlowDown" || code == "InternalError" || code == "RequestTimeout";
}

class CurlClient final : public S3Client {
 public:
  explicit CurlClient(S3Config config) : S3Client(std::move(config)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }
  ~CurlClient() override {
    for (CURL* h : pool_) curl_easy_cleanup(h);
  }

  Result<PutResult> put_object(const std::string& bucket, const std::string& key, const void* data,
                               size_t n, const Condition& cond) override {
    Request r{"PUT", bucket, key};
    r.body = data;
    r.body_bytes = n;
    add_condition(cond, &r);
    ++stats_.puts;
    return conditional(r, "PUT");
  }

  Result<std::string> get_object(const std::string& bucket, const std::string& key,
                                 uint64_t max_bytes, std::string* etag) override {
    Request r{"GET", bucket, key};
    r.max_text = max_bytes;
    ++stats_.gets;
    Response resp;
    CKPT_RETURN_IF_ERROR(call(r, "GET", &resp));
    if (etag != nullptr) *etag = resp.etag;
    return std::move(resp.text);
  }

  Status get_range(const std::string& bucket, const std::string& key, uint64_t offset, void* dst,
                   size_t n, RandomAccessFile::ByteVisitor visit, void* visit_arg) override {
    if (n == 0) return Status::ok();
    Request r{"GET", bucket, key};
    size_t placed = 0;
    r.dst = dst;
    r.dst_bytes = n;
    r.dst_offset = offset;
    r.placed = &placed;
    r.visit = visit;
    r.visit_arg = visit_arg;
    ++stats_.gets;
    Response resp;
    CKPT_RETURN_IF_ERROR(call(r, "GET", &resp));
    if (placed != n) {
      return corrupt(s3_url(bucket, key) + ": truncated: a ranged GET of " + std::to_string(n) +
                     " bytes at " + std::to_string(offset) + " returned " + std::to_string(placed));
    }
    return Status::ok();
  }

  Result<ObjectInfo> head_object(const std::string& bucket, const std::string& key) override {
    Request r{"HEAD", bucket, key};
    ++stats_.heads;
    Response resp;
    CKPT_RETURN_IF_ERROR(call(r, "HEAD", &resp));
    return ObjectInfo{resp.content_length, resp.etag, ""};
  }

  Result<ListResult> list(const std::string& bucket, const std::string& prefix,
                          const std::string& delimiter) override {
    ListResult out;
    std::string token;
    for (int page = 0; page < 1000000; ++page) {
      Request r{"GET", bucket, ""};
      r.query = {{"list-type", "2"}, {"prefix", prefix}};
      if (!delimiter.empty()) r.query.push_back({"delimiter", delimiter});
      if (!token.empty()) r.query.push_back({"continuation-token", token});
      r.max_text = 64u << 20;
      ++stats_.lists;
      Response resp;
      CKPT_RETURN_IF_ERROR(call(r, "LIST", &resp));
      const std::string& x = resp.text;
      for (const auto& [b, e] : elements(x, "Contents")) {
        ListEntry le;
        le.key = first_text(x, "Key", b, e);
        le.size = std::strtoull(first_text(x, "Size", b, e).c_str(), nullptr, 10);
        le.etag = first_text(x, "ETag", b, e);
        out.objects.push_back(std::move(le));
      }
      for (const auto& [b, e] : elements(x, "CommonPrefixes")) {
        out.prefixes.push_back(first_text(x, "Prefix", b, e));
      }
      if (first_text(x, "IsTruncated") != "true") break;
      token = first_text(x, "NextContinuationToken");
      if (token.empty()) break;
    }
    std::sort(out.objects.begin(), out.objects.end(),
              [](const ListEntry& a, const ListEntry& b) { return a.key < b.key; });
    std::sort(out.prefixes.begin(), out.prefixes.end());
    return out;
  }

  Status delete_objects(const std::string& bucket, const std::vector<std::string>& keys) override {
    for (size_t at = 0; at < keys.size(); at += 1000) {
      std::string body = "<Delete><Quiet>true</Quiet>";
      for (size_t i = at; i < std::min(keys.size(), at + 1000); ++i) {
        body += "<Object><Key>" + html_escape(keys[i]) + "</Key></Object>";
      }
      body += "</Delete>";
      Request r{"POST", bucket, ""};
      r.query = {{"delete", ""}};
      r.headers.push_back({"Content-MD5", md5_base64(body)});
      r.headers.push_back({"Content-Type", "application/xml"});
      r.body = body.data();
      r.body_bytes = body.size();
      ++stats_.deletes;
      Response resp;
      CKPT_RETURN_IF_ERROR(call(r, "DELETE", &resp));
      if (resp.text.find("<Error>") != std::string::npos) {
        const std::string code = first_text(resp.text, "Code");
        if (!code.empty() && code != "NoSuchKey") {
          return io_error(s3_url(bucket, first_text(resp.text, "Key")) + ": DELETE failed: " +
                          code + " " + first_text(resp.text, "Message") + " (" + where() + ")");
        }
      }
    }
    return Status::ok();
  }

  Result<std::string> create_multipart(const std::string& bucket, const std::string& key) override {
    Request r{"POST", bucket, key};
    r.query = {{"uploads", ""}};
    ++stats_.multipart;
    Response resp;
    CKPT_RETURN_IF_ERROR(call(r, "CreateMultipartUpload", &resp));
    std::string id = first_text(resp.text, "UploadId");
    if (id.empty())
      return io_error(s3_url(bucket, key) + ": CreateMultipartUpload gave no UploadId");
    return id;
  }

  Result<std::string> upload_part(const std::string& bucket, const std::string& key,
                                  const std::string& upload_id, int part_number, const void* data,
                                  size_t n) override {
    Request r{"PUT", bucket, key};
    r.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
    r.body = data;
    r.body_bytes = n;
    ++stats_.multipart;
    Response resp;
    CKPT_RETURN_IF_ERROR(call(r, "UploadPart", &resp));
    return resp.etag;
  }

  Result<PutResult> complete_multipart(const std::string& bucket, const std::string& key,
                                       const std::string& upload_id,
                                       const std::vector<std::string>& part_etags,
                                       const Condition& cond) override {
    std::string body = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < part_etags.size(); ++i) {
      body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
              html_escape(part_etags[i]) + "</ETag></Part>";
    }
    body += "</CompleteMultipartUpload>";
    Request r{"POST", bucket, key};
    r.query = {{"uploadId", upload_id}};
    r.headers.push_back({"Content-Type", "application/xml"});
    r.body = body.data();
    r.body_bytes = body.size();
    add_condition(cond, &r);
    ++stats_.multipart;
    CKPT_ASSIGN_OR_RETURN(PutResult out, conditional(r, "CompleteMultipartUpload"));
    return out;
  }

  Status abort_multipart(const std::string& bucket, const std::string& key,
                         const std::string& upload_id) override {
    Request r{"DELETE", bucket, key};
    r.query = {{"uploadId", upload_id}};
    ++stats_.multipart;
    Response resp;
    const Status s = call(r, "AbortMultipartUpload", &resp);
    return s.code() == Code::kNotFound ? Status::ok() : s;
  }

  Result<std::vector<UploadRef>> list_multipart_uploads(const std::string& bucket,
                                                        const std::string& prefix) override {
    std::vector<UploadRef> out;
    std::string key_marker, id_marker;
    for (int page = 0; page < 100000; ++page) {
      Request r{"GET", bucket, ""};
      r.query = {{"uploads", ""}, {"prefix", prefix}};
      if (!key_marker.empty()) {
        r.query.push_back({"key-marker", key_marker});
        r.query.push_back({"upload-id-marker", id_marker});
      }
      r.max_text = 64u << 20;
      ++stats_.lists;
      Response resp;
      CKPT_RETURN_IF_ERROR(call(r, "ListMultipartUploads", &resp));
      const std::string& x = resp.text;
      for (const auto& [b, e] : elements(x, "Upload")) {
        out.push_back({first_text(x, "Key", b, e), first_text(x, "UploadId", b, e)});
      }
      if (first_text(x, "IsTruncated") != "true") break;
      key_marker = first_text(x, "NextKeyMarker");
      id_marker = first_text(x, "NextUploadIdMarker");
      if (key_marker.empty()) break;
    }
    return out;
  }

 private:
  std::string where() const { return config_.endpoint.scheme + "://" + config_.endpoint.host; }

  static void add_condition(const Condition& c, Request* r) {
    if (c.if_none_match) r->headers.push_back({"If-None-Match", "*"});
    if (!c.if_match.empty()) r->headers.push_back({"If-Match", c.if_match});
  }

  // A write whose 412 is an answer, not an error.
  Result<PutResult> conditional(const Request& r, const char* verb) {
    Response resp;
    const Status s = call(r, verb, &resp);
    if (resp.status == 412) return PutResult{true, ""};
    CKPT_RETURN_IF_ERROR(s);
    return PutResult{false, resp.etag.empty() ? first_text(resp.text, "ETag") : resp.etag};
  }

  CURL* take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        CURL* h = pool_.back();
        pool_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  void give(CURL* h) {
    std::lock_guard<std::mutex> lock(mu_);
    pool_.push_back(h);
  }

  // One exchange, retried (client.h). ok for 2xx; else the one-line error.
  Status call(const Request& r, const char* verb, Response* out) {
    const std::string url_text = s3_url(r.bucket, r.key);
    const int attempts = std::max(1, config_.max_attempts);
    std::string last;
    for (int attempt = 1; attempt <= attempts; ++attempt) {
      *out = Response{};
      CURLcode rc = CURLE_OK;
      Status once = exchange(r, out, &rc);
      if (!once.is_ok()) return once;
      std::string code, message;
      if (rc == CURLE_OK && out->status >= 200 && out->status < 300) return Status::ok();
      // Every byte of a ranged GET in place before the connection failed: nothing left to ask.
      if (r.placed != nullptr && *r.placed == r.dst_bytes && r.dst_bytes != 0) return Status::ok();
      if (rc == CURLE_OK) {
        code = first_text(out->text, "Code");
        message = first_text(out->text, "Message");
        if (out->status == 412) {
          return io_error(url_text + ": " + verb + ": 412 PreconditionFailed");
        }
        if (!retryable(out->status, code)) return http_error(url_text, verb, *out, code, message);
        last = std::to_string(out->status) + " " + (code.empty() ? "" : code);
      } else if (out->too_large) {
        return corrupt(url_text + ": " + verb + ": the response is larger than expected");
      } else {
        last = curl_easy_strerror(rc);
      }
      if (attempt == attempts) break;
      ++stats_.retries;
      // Exponential backoff with full jitter: uniform in [0, min(10 s, 100 ms · 2^attempt)).
      const double cap = std::min(10.0, 0.1 * static_cast<double>(1u << std::min(attempt, 10)));
      thread_local std::mt19937_64 rng{std::random_device{}()};
      std::uniform_real_distribution<double> wait(0, cap);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait(rng)));
    }
    return io_error(redact(url_text + ": " + verb + " failed after " + std::to_string(attempts) +
                               " attempts: " + last + " (" + where() + ")",
                           config_.credentials));
  }

  Status http_error(const std::string& url, const char* verb, const Response& resp,
                    const std::string& code, const std::string& message) const {
    std::string line = url + ": " + verb + " failed: " + std::to_string(resp.status) +
                       (code.empty() ? "" : " " + code) + (message.empty() ? "" : ": " + message) +
                       " (" + where() + ")";
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    line = redact(line, config_.credentials);
    if (resp.status == 404 || code == "NoSuchKey" || code == "NoSuchBucket" ||
        code == "NoSuchUpload") {
      return not_found(line);
    }
    if (resp.status == 403 || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
        code == "AccessDenied") {
      return invalid_argument(line + "; check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (" +
                              config_.credentials.source + ")");
    }
    return io_error(line);
  }

  // Builds, signs and performs the request on a pooled handle.
  Status exchange(const Request& r, Response* out, CURLcode* rc) {
    const Endpoint& ep = config_.endpoint;
    HttpRequest h;
    h.method = r.method;
    std::string path;
    if (ep.path_style) {
      h.host = ep.host;
      path =
          "/" + r.bucket + (r.key.empty() && r.query.empty() ? "" : "/") + uri_encode(r.key, true);
      if (r.key.empty()) path = "/" + r.bucket + "/";
    } else {
      h.host = r.bucket + "." + ep.host;
      path = "/" + uri_encode(r.key, true);
    }
    h.path = path;
    h.query = r.query;
    h.headers = r.headers;
    if (r.dst != nullptr) {  // what is not in place yet (all of it, but on a retry)
      h.headers.push_back({"Range", "bytes=" + std::to_string(r.dst_offset + *r.placed) + "-" +
                                        std::to_string(r.dst_offset + r.dst_bytes - 1)});
    }
    h.payload_sha256 = sha256_hex(r.body != nullptr ? r.body : "", r.body_bytes);
    sign_v4(&h, config_.credentials, config_.region, "s3", amz_date_now());

    std::vector<std::pair<std::string, std::string>> q = r.query;
    std::sort(q.begin(), q.end());
    std::string qs;
    for (const auto& [k, v] : q) {
      qs += (qs.empty() ? "" : "&") + uri_encode(k, false) + "=" + uri_encode(v, false);
    }
    const std::string url = ep.scheme + "://" + h.host + path + (qs.empty() ? "" : "?" + qs);

    CURL* c = take();
    if (c == nullptr) return internal_error("curl_easy_init failed");
    curl_easy_reset(c);
    curl_slist* hs = nullptr;
    for (const auto& [k, v] : h.headers) {
      if (k == "Host" || k == "host") continue;  // curl sends it from the URL
      hs = curl_slist_append(hs, (k + ": " + v).c_str());
    }
    hs = curl_slist_append(hs, "Expect:");  // no 100-continue round trip
    Transfer t{&r, out, 0};
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(config_.connect_timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config_.request_timeout_s));
    // Large socket reads and writes: libcurl's defaults (16 KiB down, 64 KiB up) cost a
    // callback and a syscall per few KiB, which a loaded machine feels (bench/s3_ranks_bench.py).
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 2L << 20);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    if (r.method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (r.method == "PUT") {
      curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
      curl_easy_setopt(c, CURLOPT_READDATA, &t);
      curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body_bytes));
    } else if (r.method == "POST") {
      curl_easy_setopt(c, CURLOPT_POST, 1L);
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, r.body_bytes ? r.body : "");
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body_bytes));
    } else if (r.method != "GET") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    *rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (*rc == CURLE_OK) out->status = status;
    curl_slist_free_all(hs);
    if (*rc == CURLE_OK) {
      give(c);  // keeps its connection for the next call
    } else {
      curl_easy_cleanup(c);
    }
    stats_.bytes_up += t.sent;
    stats_.bytes_down += out->received;
    return Status::ok();
  }

  std::mutex mu_;
  std::vector<CURL*> pool_;
};

}  // namespace

Result<std::unique_ptr<S3Client>> S3Client::create(S3Config config) {
  if (config.endpoint.host.empty()) return invalid_argument("S3: no endpoint host");
  return std::unique_ptr<S3Client>(new CurlClient(std::move(config)));
}

}  // namespace ckpt::s3
