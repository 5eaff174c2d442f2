// safetensors header parsing and validation (huggingface/safetensors rules).
#include "verify/formats/safetensors.h"

#include <catch2/catch.hpp>

using namespace ckpt;
using namespace ckpt::verify;

namespace {
std::string file_with(const std::string& header, uint64_t data_bytes) {
  std::string f;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<char>(n >> (8 * i)));
  return f + header + std::string(data_bytes, '\0');
}
}  // namespace

TEST_CASE("safetensors: a valid header with metadata, padding and a 0-rank tensor", "[verify]") {
  std::string h =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[4,16]},)"
      R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  h += "   ";  // writers pad with spaces to a multiple of 8
  auto r = parse_safetensors(*memory_file("m.safetensors", file_with(h, 16)));
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  REQUIRE(r->tensors.size() == 2);
  CHECK(r->tensors[0].name == "a");
  CHECK(r->tensors[0].shape.empty());
  CHECK(r->tensors[1].dtype.name() == "bfloat16");
  CHECK(r->metadata.at("format") == "pt");
}

TEST_CASE("safetensors: every validation rule rejects", "[verify]") {
  auto check_bad = [](const std::string& h, uint64_t data, const std::string& why) {
    auto r = parse_safetensors(*memory_file("x.safetensors", file_with(h, data)));
    INFO(h);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find(why) != std::string::npos);
  };
  check_bad(R"([1,2])", 0, "does not start with '{'");
  check_bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "its shape needs 8");
  check_bad(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4, "unknown dtype");
  check_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "gap or overlap");
  check_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 9, "trailing");
  check_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2, "truncated");
  check_bad(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
            "non-integer dimension");
  check_bad(R"({"__metadata__":{"k":1}})", 0, "is not a string");
  check_bad(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4,
            "overflows");
  auto huge = memory_file("h.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
  auto r = parse_safetensors(*huge);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("100 MB") != std::string::npos);
}
