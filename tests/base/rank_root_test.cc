#include "ckpt/format/rank_root.h"

#include <catch2/catch.hpp>

namespace ckpt::rank_root_test {
namespace {

Node stamped() {
  Node root;
  set_root_attrs({"ckpt 0.1.0", "", 7, 1, 2, {"model", "rng"}}, &root);
  return root;
}

TEST_CASE("root attributes: what a build stamps, it reads back", "[format]") {
  Node root = stamped();
  CHECK(std::get<std::string>(root.attrs.at("format")) == "ckpt");
  CHECK(std::get<int64_t>(root.attrs.at("format_version")) == kFormatVersion);
  CHECK(std::get<std::string>(root.attrs.at("producer")) == "ckpt 0.1.0");
  CHECK(std::get<int64_t>(root.attrs.at("step")) == 7);
  CHECK(std::get<std::vector<std::string>>(root.attrs.at("components")) ==
        std::vector<std::string>{"model", "rng"});
  CHECK(check_root_format(root, "f.h5").is_ok());
}

TEST_CASE("root attributes: a newer version or another format is refused, absent attributes pass",
          "[format]") {
  Node newer = stamped();
  newer.attrs["format_version"] = kMaxFormatVersion + 1;
  Status s = check_root_format(newer, "f.h5");
  CHECK(s.code() == Code::kUnsupported);
  CHECK(s.message().find("f.h5: format version " + std::to_string(kMaxFormatVersion + 1) +
                         ", this build reads versions 1.." + std::to_string(kMaxFormatVersion)) !=
        std::string::npos);

  Node other = stamped();
  other.attrs["format"] = std::string("safetensors");
  s = check_root_format(other, "g.h5");
  CHECK(s.code() == Code::kCorrupt);
  CHECK(s.message().find("\"safetensors\"") != std::string::npos);

  Node bare;  // written through the store API without root attributes
  CHECK(check_root_format(bare, "h.h5").is_ok());
  Node typed = stamped();
  typed.attrs["format_version"] = std::string("1");
  CHECK(check_root_format(typed, "h.h5").code() == Code::kCorrupt);
  Node zero = stamped();
  zero.attrs["format_version"] = int64_t{0};
  CHECK(check_root_format(zero, "h.h5").code() == Code::kUnsupported);
}

TEST_CASE("the release number is the one CMake's project() declares", "[format]") {
  CHECK(std::string(kVersion) == CKPT_PROJECT_VERSION);
}

}  // namespace
}  // namespace ckpt::rank_root_test
