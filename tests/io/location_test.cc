// ckpt/io/location.h: which storage a run directory's text names, and that a URL is never taken
// for a local folder.
#include "ckpt/io/location.h"

#include <catch2/catch.hpp>

#include "ckpt/io/mem_env.h"

namespace ckpt::location_test {
namespace {

TEST_CASE("looks_like_url tells URLs from local paths", "[location]") {
  for (const char* url : {"s3://b/run", "gs://b", "file:///tmp/x", "s3:/b/run", "S3://B",
                          "hdfs+ha://nn/x", "a.b-c:/x"}) {
    CHECK(looks_like_url(url));
  }
  for (const char* path :
       {"run", "/tmp/run", "./s3/run", "runs/s3:x", "weird:name", ":/x", "1s3://x", "", "s3:"}) {
    CHECK_FALSE(looks_like_url(path));
  }
}

TEST_CASE("normalize_location drops trailing slashes only", "[location]") {
  CHECK(normalize_location("run/") == "run");
  CHECK(normalize_location("/tmp/run//") == "/tmp/run");
  CHECK(normalize_location("/") == "/");
  CHECK(normalize_location("s3://b/run/") == "s3://b/run");
  CHECK(normalize_location("s3://b/") == "s3://b");
  CHECK(normalize_location("s3://") == "s3://");
}

TEST_CASE("env_for_location refuses every scheme it does not serve with one line", "[location]") {
  for (const char* url : {"gs://b/run", "az://c/run", "file:///tmp/run", "s4://b/run"}) {
    auto env = env_for_location(url);
    REQUIRE_FALSE(env.is_ok());
    CHECK(env.status().code() == Code::kInvalidArgument);
    CHECK(env.status().message().find(url) == 0);
    CHECK(env.status().message().find("unsupported URL scheme") != std::string::npos);
    CHECK(env.status().message().find('\n') == std::string::npos);
  }
  auto typo = env_for_location("s3:/b/run");
  REQUIRE_FALSE(typo.is_ok());
  CHECK(typo.status().message() == "s3:/b/run: malformed s3 URL; write s3://bucket/prefix");
}

TEST_CASE("env_for_location gives local paths the local Env", "[location]") {
  MemEnv mem;
  auto env = env_for_location("/tmp/run", &mem);
  REQUIRE(env.is_ok());
  CHECK(*env == &mem);
  auto posix = env_for_location("run");
  REQUIRE(posix.is_ok());
  CHECK(*posix == Env::posix());
}

TEST_CASE("routing_env sends local paths to the local Env and fails refused URLs", "[location]") {
  MemEnv mem;
  Env* env = routing_env(&mem);
  CHECK(routing_env(&mem) == env);  // one per local Env
  REQUIRE(env->make_dirs("/run").is_ok());
  REQUIRE(env->write_atomic("/run/LATEST", "step-1").is_ok());
  CHECK(mem.exists("/run/LATEST"));
  CHECK(*env->read_all("/run/LATEST") == "step-1");
  CHECK(env->object_store("/run") == nullptr);

  const Status made = env->make_dirs("gs://b/run");
  CHECK(made.code() == Code::kInvalidArgument);
  CHECK_FALSE(env->is_dir("gs://b/run"));
  CHECK_FALSE(env->exists("gs://b/run/LATEST"));
  CHECK(env->write_atomic("gs://b/run/LATEST", "x").code() == Code::kInvalidArgument);
  CHECK(env->rename("/run/LATEST", "gs://b/LATEST").code() == Code::kInvalidArgument);
  CHECK(mem.exists("/run/LATEST"));
}

}  // namespace
}  // namespace ckpt::location_test
