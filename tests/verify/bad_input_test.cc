// Bad input never crashes: every fixture under fixtures/malicious/ and every fuzz regression
// input under fixtures/fuzz/ goes through the pickle, zip and safetensors readers and the whole
// audit; each either parses or fails with a one-line error naming the file.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/io/env.h"
#include "tests/common/test_readers.h"
#include "verify/audit/audit.h"
#include "verify/formats/safetensors.h"
#include "verify/pickle/pickle_reader.h"
#include "verify/zip/zip_reader.h"

using namespace ckpt;
using namespace ckpt::verify;
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void replay_dir(const fs::path& dir, size_t* count) {
  if (!fs::exists(dir)) return;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() == ".md" || e.path().extension() == ".py")
      continue;
    ++*count;
    const std::string bytes = slurp(e.path());
    INFO(e.path().string());
    auto pk = read_pickle(bytes, e.path().filename().string());
    if (!pk.is_ok())
      CHECK(pk.status().message().find(e.path().filename().string()) != std::string::npos);
    auto f = memory_file(e.path().filename().string(), bytes);
    auto z = ZipReader::open(*f);
    if (z.is_ok()) {
      for (const auto& ent : z->entries()) {
        auto rec = z->read_record(ent);
        if (rec.is_ok()) CHECK(rec->size() == ent.size);
      }
    }
    auto st = parse_safetensors(*f);
    if (!st.is_ok())
      CHECK(st.status().message().find(e.path().filename().string()) != std::string::npos);
    auto r = audit_path(test::foreign_readers(), Env::posix(), e.path().string(),
                        AuditOptions{true, false, {}});
    if (!r.is_ok()) {
      CHECK(r.status().message().find('\n') == std::string::npos);
      CHECK(r.status().message().find(e.path().filename().string()) != std::string::npos);
    }
  }
}
}  // namespace

TEST_CASE("fixtures/malicious and fixtures/fuzz regression inputs are handled", "[verify]") {
  size_t count = 0;
  replay_dir(fs::path(CKPT_SOURCE_DIR) / "fixtures" / "malicious", &count);
  replay_dir(fs::path(CKPT_SOURCE_DIR) / "fixtures" / "fuzz", &count);
  CHECK(count >= 5);
  // fixtures/malicious/make_malicious.py's pickles would create this file if anything ran them.
  CHECK_FALSE(fs::exists("/tmp/ckpt_verify_malicious_marker"));
}

TEST_CASE("damaged foreign fixtures fail with the documented error kinds", "[verify]") {
  const fs::path d = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign" / "damaged";
  auto r = audit_path(test::foreign_readers(), Env::posix(), (d / "truncated.pt").string(), {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ckpt::Code::kCorrupt);
  r = audit_path(test::foreign_readers(), Env::posix(), (d / "zip_slip.pt").string(), {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("../evil") != std::string::npos);
  r = audit_path(test::foreign_readers(), Env::posix(), (d / "does_not_exist.pt").string(), {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ckpt::Code::kNotFound);
  r = audit_path(
      test::foreign_readers(), Env::posix(),
      (fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign" / "torch" / "legacy_tutorial.pt")
          .string(),
      {});
  // Legacy (pre-1.6) streams are audited like zip files (issue 15).
  REQUIRE(r.is_ok());
  CHECK_FALSE(r->complete);
}

TEST_CASE("audit --require rejects unknown component names", "[verify]") {
  CHECK(parse_component_list("model, optimizer").is_ok());
  auto bad = parse_component_list("model,rng");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ckpt::Code::kInvalidArgument);
}
