// load_config (ckpt/io/s3/config.h): the AWS variables and files, in the SDKs' order, and errors
// that never show a secret.
#include "ckpt/io/s3/config.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/common/test_util.h"

namespace ckpt::s3 {
namespace {

const char* kSecret = "s3cr3t-DO-NOT-PRINT-0123456789";

std::map<std::string, std::string> base(const testing::TempDir& tmp) {
  return {{"HOME", tmp.path()},
          {"AWS_SHARED_CREDENTIALS_FILE", tmp.path() + "/credentials"},
          {"AWS_CONFIG_FILE", tmp.path() + "/config"}};
}

TEST_CASE("environment credentials and a custom endpoint (path-style)", "[s3config]") {
  testing::TempDir tmp;
  auto vars = base(tmp);
  vars["AWS_ACCESS_KEY_ID"] = "AKIDTESTABCD";
  vars["AWS_SECRET_ACCESS_KEY"] = kSecret;
  vars["AWS_ENDPOINT_URL"] = "http://127.0.0.1:8333";
  vars["AWS_REGION"] = "eu-west-1";
  auto c = load_config(lookup_in(vars));
  REQUIRE(c.is_ok());
  CHECK(c->endpoint.scheme == "http");
  CHECK(c->endpoint.host == "127.0.0.1:8333");
  CHECK(c->endpoint.path_style);
  CHECK(c->region == "eu-west-1");
  CHECK(c->credentials.source == "environment");
  CHECK(c->describe().find(kSecret) == std::string::npos);
  vars["AWS_ENDPOINT_URL_S3"] = "https://s3.example.com";
  vars["CKPT_S3_ADDRESSING"] = "virtual";
  c = load_config(lookup_in(vars));
  REQUIRE(c.is_ok());
  CHECK(c->endpoint.host == "s3.example.com");
  CHECK_FALSE(c->endpoint.path_style);
}

TEST_CASE("AWS defaults: virtual-hosted, regional endpoint, us-east-1", "[s3config]") {
  testing::TempDir tmp;
  auto vars = base(tmp);
  vars["AWS_ACCESS_KEY_ID"] = "AKID";
  vars["AWS_SECRET_ACCESS_KEY"] = kSecret;
  auto c = load_config(lookup_in(vars));
  REQUIRE(c.is_ok());
  CHECK(c->region == "us-east-1");
  CHECK(c->endpoint.host == "s3.us-east-1.amazonaws.com");
  CHECK(c->endpoint.scheme == "https");
  CHECK_FALSE(c->endpoint.path_style);
}

TEST_CASE("profiles from ~/.aws/credentials and ~/.aws/config", "[s3config]") {
  testing::TempDir tmp;
  testing::write_file(tmp.path() + "/credentials",
                      "[default]\naws_access_key_id = AKIDDEF\naws_secret_access_key = def\n"
                      "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = " +
                          std::string(kSecret) + "\n");
  testing::write_file(tmp.path() + "/config",
                      "[profile work]\nregion = ap-south-1\nendpoint_url = http://10.0.0.1:9000\n");
  auto vars = base(tmp);
  auto c = load_config(lookup_in(vars));
  REQUIRE(c.is_ok());
  CHECK(c->credentials.access_key_id == "AKIDDEF");
  vars["AWS_PROFILE"] = "work";
  c = load_config(lookup_in(vars));
  REQUIRE(c.is_ok());
  CHECK(c->credentials.access_key_id == "AKIDWORK");
  CHECK(c->region == "ap-south-1");
  CHECK(c->endpoint.host == "10.0.0.1:9000");
  CHECK(c->credentials.source.find("[work]") != std::string::npos);
  // The environment wins over the files.
  vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  vars["AWS_SECRET_ACCESS_KEY"] = "env";
  CHECK(load_config(lookup_in(vars))->credentials.access_key_id == "AKIDENV");
  vars.erase("AWS_ACCESS_KEY_ID");
  vars.erase("AWS_SECRET_ACCESS_KEY");
  vars["AWS_PROFILE"] = "nope";
  auto missing = load_config(lookup_in(vars));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("\"nope\"") != std::string::npos);
}

TEST_CASE("bad settings are one line naming the variable, never the secret", "[s3config]") {
  testing::TempDir tmp;
  auto vars = base(tmp);
  auto none = load_config(lookup_in(vars));
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().message().find("no S3 credentials") != std::string::npos);
  vars["AWS_ACCESS_KEY_ID"] = "AKID";
  vars["AWS_SECRET_ACCESS_KEY"] = kSecret;
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"AWS_ENDPOINT_URL", "ftp://x"},
                                                        {"CKPT_S3_PART_BYTES", "12abc"},
                                                        {"CKPT_S3_CONCURRENCY", "0"},
                                                        {"CKPT_S3_ADDRESSING", "sideways"}}) {
    auto v = vars;
    v[name] = value;
    auto c = load_config(lookup_in(v));
    INFO(name);
    REQUIRE_FALSE(c.is_ok());
    CHECK(c.status().message().find(name) != std::string::npos);
    CHECK(c.status().message().find(kSecret) == std::string::npos);
    CHECK(c.status().message().find('\n') == std::string::npos);
  }
  Credentials cr{"AKID", kSecret, "tok3n-xyz", "environment"};
  CHECK(redact(std::string("echo ") + kSecret + " and tok3n-xyz", cr) == "echo *** and ***");
}

TEST_CASE("parse_s3_url", "[s3config]") {
  auto u = parse_s3_url("s3://bucket/a/b/");
  REQUIRE(u.is_ok());
  CHECK(u->bucket == "bucket");
  CHECK(u->key == "a/b/");
  CHECK(parse_s3_url("s3://bucket")->key.empty());
  CHECK(s3_url("bucket", "k/x") == "s3://bucket/k/x");
  for (const char* bad : {"s3://", "s3://B", "s3://ab", "s3:/x", "gs://bucket"}) {
    INFO(bad);
    CHECK_FALSE(parse_s3_url(bad).is_ok());
  }
}

}  // namespace
}  // namespace ckpt::s3
