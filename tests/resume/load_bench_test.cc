// `ckpt load-bench`, run as a process on a committed checkpoint of two ranks: the JSON contract,
// every tensor byte counted, a flipped byte refused naming the tensor, usage errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "resume/load_all.h"
#include "resume_test_util.h"

namespace ckpt::resume::load_bench_test {
namespace {

using resume_test::TempDir;

const std::string kCkpt = std::string(CKPT_BINARY_DIR) + "/cli/ckpt";

// A run directory with one committed two-rank checkpoint; returns the tensor bytes written.
uint64_t write_run(const std::string& run) {
  std::vector<std::vector<unsigned char>> storage;
  uint64_t bytes = 0;
  const std::string dir = path_join(run, step_dir_name(7));
  REQUIRE(Env::posix()->make_dirs(dir).is_ok());
  for (int64_t rank = 0; rank < 2; ++rank) {
    Node tree = resume_test::varied_tree(&storage);
    auto m = store::write_rank(Env::posix(), dir, rank, 7, 2, &tree);
    REQUIRE(m.is_ok());
    for (const auto& e : m->tensors) bytes += e.nbytes;
  }
  REQUIRE(store::commit(Env::posix(), run, 7, 2, {"model", "optimizer"}).is_ok());
  return bytes;
}

TEST_CASE("load-bench --json: exactly the contract's keys, every tensor byte", "[resume][cli]") {
  TempDir t;
  const uint64_t bytes = write_run(t.path());
  for (const char* flags : {"", " --no-verify --threads 1"}) {
    CAPTURE(flags);
    std::string out;
    REQUIRE(testing::run_command(kCkpt + " load-bench " + t.path() + " --json" + flags, &out) == 0);
    const auto j = nlohmann::json::parse(out);
    std::set<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
    CHECK(keys == std::set<std::string>{"bytes", "seconds", "gb_per_s", "alloc_seconds", "path",
                                        "threads", "verified"});
    CHECK(j["alloc_seconds"].get<double>() >= 0);
    CHECK(j["bytes"].get<uint64_t>() == bytes);
    CHECK(j["path"] == "cpu");
    CHECK(j["verified"].get<bool>() == (std::string(flags).empty()));
    CHECK(j["seconds"].get<double>() > 0);
    CHECK(j["gb_per_s"].get<double>() > 0);
  }
  // The step directory itself is accepted too, and load_all_host agrees with the process.
  auto dir = resolve_checkpoint(Env::posix(), t.path());
  REQUIRE(dir.is_ok());
  auto stats = load_all_host(Env::posix(), *dir, {});
  REQUIRE(stats.is_ok());
  CHECK(stats->bytes == bytes);
  CHECK(stats->ranks == 2);
}

TEST_CASE("load-bench refuses a flipped byte, names the tensor, usage and input errors",
          "[resume][cli]") {
  TempDir t;
  write_run(t.path());
  const std::string dir = path_join(t.path(), step_dir_name(7));
  auto m = store::read_manifest(Env::posix(), dir, 1);
  REQUIRE(m.is_ok());
  const ManifestEntry* big = nullptr;
  for (const auto& e : m->tensors) {
    if (big == nullptr || e.nbytes > big->nbytes) big = &e;
  }
  resume_test::flip_bit(path_join(dir, rank_file_name(1)), big->offset + big->nbytes / 2);
  std::string out;
  CHECK(testing::run_command(kCkpt + " load-bench " + dir + " 2>&1", &out) == 65);
  CHECK(out.find(big->path) != std::string::npos);
  CHECK(out.find("xxh3 mismatch") != std::string::npos);
  // Unverified, the same bytes load (that is what --no-verify means).
  CHECK(testing::run_command(kCkpt + " load-bench " + dir + " --no-verify", &out) == 0);
  CHECK(testing::run_command(kCkpt + " load-bench " + dir + " --device tpu 2>&1", &out) == 64);
  CHECK(testing::run_command(kCkpt + " load-bench " + t.path() + "/nope 2>&1", &out) == 66);
  CHECK(testing::run_command(kCkpt + " load-bench " + CKPT_SOURCE_DIR + " 2>&1", &out) == 66);
}

TEST_CASE("load-bench checks every byte of the file against the commit record", "[resume][cli]") {
  TempDir t;
  write_run(t.path());
  const std::string dir = path_join(t.path(), step_dir_name(7));
  auto m = store::read_manifest(Env::posix(), dir, 0);
  REQUIRE(m.is_ok());
  // Every tensor intact, one flipped bit in the HDF5 padding between two of them.
  const std::string file = path_join(dir, rank_file_name(0));
  resume_test::flip_bit(file, resume_test::padding_offset(*m));
  std::string out;
  CHECK(testing::run_command(kCkpt + " load-bench " + dir + " 2>&1", &out) == 65);
  CHECK(out.find(file + ": whole-file xxh3 mismatch") != std::string::npos);
  CHECK(testing::run_command(kCkpt + " load-bench " + dir + " --no-verify", &out) == 0);
}

}  // namespace
}  // namespace ckpt::resume::load_bench_test
