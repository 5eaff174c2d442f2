#include "ckpt/base/status.h"

#include <catch2/catch.hpp>

namespace ckpt::status_test {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("expected a positive number, got " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  CKPT_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check(int v) {
  CKPT_RETURN_IF_ERROR(doubled(v).status());
  return Status::ok();
}

TEST_CASE("Result carries a value or the status that explains its absence", "[base]") {
  REQUIRE(doubled(4).is_ok());
  REQUIRE(*doubled(4) == 8);
  auto bad = doubled(-1);
  REQUIRE_FALSE(bad.is_ok());
  REQUIRE(bad.status().code() == Code::kInvalidArgument);
  REQUIRE(bad.status().to_string() == "invalid argument: expected a positive number, got -1");
  REQUIRE(check(3).is_ok());
  REQUIRE(check(0).with_context("a.h5").message() == "a.h5: expected a positive number, got 0");
}

}  // namespace
}  // namespace ckpt::status_test
