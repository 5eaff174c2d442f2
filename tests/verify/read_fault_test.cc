// The foreign readers behind the Env: a FaultInjectionEnv that cuts a torch.save zip or a
// safetensors file short, or answers EIO, at a chosen byte reaches every read the audit makes.
// Each fault is the documented error (docs/cli.md: IoError → exit 66, Corrupt → exit 65) with
// one line naming the file, never "not a checkpoint", a crash or a partial report.
#include <catch2/catch.hpp>
#include <string>

#include "ckpt/io/fault_injection_env.h"
#include "tests/common/test_readers.h"
#include "verify/audit/audit.h"

using namespace ckpt;
using namespace ckpt::verify;

namespace {

const std::string kFixtures = std::string(CKPT_SOURCE_DIR) + "/fixtures/foreign";

uint64_t size_of(const std::string& path) {
  auto n = Env::posix()->file_size(path);
  REQUIRE(n.is_ok());
  return *n;
}

// Audits `path` with reads failing as `fault` from byte `at` on.
Status audit_with_fault(const std::string& path, uint64_t at, ReadFault fault, bool deep) {
  FaultInjectionEnv env(Env::posix());
  env.fail_reads(path, at, fault);
  AuditOptions o;
  o.deep = deep;
  auto r = audit_path(test::foreign_readers(), &env, path, o);
  return r.status();
}

void check_fault(const std::string& path, const std::string& name, uint64_t at, bool deep) {
  INFO(name << " from byte " << at << (deep ? " --deep" : ""));
  const Status eio = audit_with_fault(path, at, ReadFault::kIoError, deep);
  CHECK(eio.code() == Code::kIoError);
  CHECK(eio.message().find(name) != std::string::npos);
  CHECK(eio.message().find("Input/output error") != std::string::npos);
  CHECK(eio.message().find('\n') == std::string::npos);
  const Status cut = audit_with_fault(path, at, ReadFault::kShortRead, deep);
  CHECK(cut.code() == Code::kCorrupt);
  CHECK(cut.message().find(name) != std::string::npos);
  CHECK(cut.message().find("truncated") != std::string::npos);
  CHECK(cut.message().find("not a checkpoint") == std::string::npos);
}

}  // namespace

TEST_CASE("a short read or EIO in a torch.save zip is the documented error", "[verify]") {
  const std::string pt = kFixtures + "/torch2/complete.pt";
  const uint64_t n = size_of(pt);
  // Without faults the file audits; the faults are what makes it fail.
  REQUIRE(audit_path(test::foreign_readers(), Env::posix(), pt, {}).is_ok());
  check_fault(pt, "complete.pt", 0, false);       // the magic bytes the probe reads
  check_fault(pt, "complete.pt", n - 10, false);  // the end-of-central-directory record
  check_fault(pt, "complete.pt", n / 2, true);    // tensor bytes: only --deep reads them
  // Without an extension only the magic bytes say what it is: EIO there is still not "not a
  // checkpoint".
  const std::string bare = std::string(CKPT_BINARY_DIR) + "/read_fault_test.blob";
  auto bytes = Env::posix()->read_all(pt);
  REQUIRE(bytes.is_ok());
  REQUIRE(Env::posix()->write_atomic(bare, *bytes).is_ok());
  check_fault(bare, "read_fault_test.blob", 0, false);
}

TEST_CASE("a short read or EIO in a safetensors file is the documented error", "[verify]") {
  const std::string st = kFixtures + "/safetensors/mlp.safetensors";
  const uint64_t n = size_of(st);
  REQUIRE(audit_path(test::foreign_readers(), Env::posix(), st, {}).is_ok());
  check_fault(st, "mlp.safetensors", 0, false);     // the header length
  check_fault(st, "mlp.safetensors", 12, false);    // inside the JSON header
  check_fault(st, "mlp.safetensors", n - 1, true);  // the last tensor's bytes (--deep)
}

TEST_CASE("a fault past what a metadata-only audit reads changes nothing", "[verify]") {
  const std::string st = kFixtures + "/safetensors/mlp.safetensors";
  FaultInjectionEnv env(Env::posix());
  env.fail_reads(st, size_of(st) - 1, ReadFault::kIoError);
  auto r = audit_path(test::foreign_readers(), &env, st, {});
  REQUIRE(r.is_ok());
  CHECK(r->format == CheckpointFormat::kSafetensors);
}
