// SigV4 against the examples AWS publishes in "Signature Calculations for the Authorization
// Header: Transferring Payload in a Single Chunk" (Amazon S3 API Reference, sig-v4-header-based-
// auth): examplebucket, AKIAIOSFODNN7EXAMPLE, 20130524T000000Z, us-east-1.
#include "ckpt/io/s3/sigv4.h"

#include <algorithm>
#include <catch2/catch.hpp>

namespace ckpt::s3 {
namespace {

Credentials example_creds() {
  Credentials c;
  c.access_key_id = "AKIAIOSFODNN7EXAMPLE";
  c.secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  return c;
}

const char* kEmptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string header(const HttpRequest& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return {};
}

TEST_CASE("SigV4: AWS's GET Object example", "[sigv4]") {
  HttpRequest r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.headers = {{"Range", "bytes=0-9"}};
  r.payload_sha256 = kEmptySha;
  sign_v4(&r, example_creds(), "us-east-1", "s3", "20130524T000000Z");
  HttpRequest before = r;  // as it was signed: every header but Authorization
  before.headers.erase(std::remove_if(before.headers.begin(), before.headers.end(),
                                      [](const auto& h) { return h.first == "Authorization"; }),
                       before.headers.end());
  CHECK(canonical_request(before) ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(header(r, "Authorization") ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("SigV4: AWS's GET Bucket lifecycle example (a subresource query)", "[sigv4]") {
  HttpRequest r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/";
  r.query = {{"lifecycle", ""}};
  r.payload_sha256 = kEmptySha;
  sign_v4(&r, example_creds(), "us-east-1", "s3", "20130524T000000Z");
  CHECK(header(r, "Authorization")
            .find("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543") !=
        std::string::npos);
}

TEST_CASE("SigV4: AWS's list objects example (sorted, encoded query)", "[sigv4]") {
  HttpRequest r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/";
  r.query = {{"prefix", "J"}, {"max-keys", "2"}};  // out of order: the signer sorts them
  r.payload_sha256 = kEmptySha;
  sign_v4(&r, example_creds(), "us-east-1", "s3", "20130524T000000Z");
  CHECK(canonical_request(r).find("\nmax-keys=2&prefix=J\n") != std::string::npos);
  CHECK(header(r, "Authorization")
            .find("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7") !=
        std::string::npos);
}

TEST_CASE("SigV4: a wrong secret or a changed header changes the signature", "[sigv4]") {
  auto sign = [](const Credentials& c, const std::string& range) {
    HttpRequest r;
    r.method = "GET";
    r.host = "examplebucket.s3.amazonaws.com";
    r.path = "/test.txt";
    r.headers = {{"Range", range}};
    r.payload_sha256 = kEmptySha;
    sign_v4(&r, c, "us-east-1", "s3", "20130524T000000Z");
    return header(r, "Authorization");
  };
  Credentials other = example_creds();
  other.secret_access_key.back() = 'X';
  CHECK(sign(example_creds(), "bytes=0-9") != sign(other, "bytes=0-9"));
  CHECK(sign(example_creds(), "bytes=0-9") != sign(example_creds(), "bytes=0-8"));
}

TEST_CASE("SigV4: a session token is sent and signed", "[sigv4]") {
  Credentials c = example_creds();
  c.session_token = "token-abc";
  HttpRequest r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.payload_sha256 = kEmptySha;
  sign_v4(&r, c, "us-east-1", "s3", "20130524T000000Z");
  CHECK(header(r, "x-amz-security-token") == "token-abc");
  CHECK(header(r, "Authorization").find("x-amz-security-token") != std::string::npos);
}

TEST_CASE("uri_encode keeps unreserved characters and slashes only where asked", "[sigv4]") {
  CHECK(uri_encode("a-b_c.d~e/f g", true) == "a-b_c.d~e/f%20g");
  CHECK(uri_encode("a/b", false) == "a%2Fb");
  CHECK(uri_encode("test$file.text", true) == "test%24file.text");
  CHECK(sha256_hex("", 0) == kEmptySha);
}

}  // namespace
}  // namespace ckpt::s3
