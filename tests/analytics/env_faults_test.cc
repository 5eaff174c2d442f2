// The analytics readers read through the Env they are given: an Env that fails reads of one file
// (EIO, or a file that ends before its size, a short read) reaches `ckpt lr` and `ckpt coverage`,
// and each gives the documented one-line error naming the file and exit code (docs/cli.md: 65
// unreadable input, 66 cannot open or read the input).
#include <catch2/catch.hpp>
#include <memory>
#include <sstream>
#include <string>

#include "analytics/input/json_text.h"
#include "analytics/lr/lr_input.h"
#include "ckpt/io/env_wrapper.h"
#include "cli/commands.h"
#include "test_support.h"

namespace ckpt::analytics::env_faults_test {
namespace {

using testing::fixture;

enum class ReadFault { kEio, kShortRead };

// A file whose reads fail as a failing disk's would (kEio), or which claims 16 bytes more than
// it holds, so a whole-file read comes up short (kShortRead).
class FaultyFile final : public RandomAccessFile {
 public:
  FaultyFile(std::unique_ptr<RandomAccessFile> base, ReadFault fault)
      : base_(std::move(base)), fault_(fault) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (fault_ == ReadFault::kEio) return io_error(path() + ": read failed: Input/output error");
    return base_->read_at(offset, dst, n);  // past the real end: the base's "truncated"
  }
  uint64_t size() const override {
    return base_->size() + (fault_ == ReadFault::kShortRead ? 16 : 0);
  }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  ReadFault fault_;
};

// Env::posix() with one file's reads failing, from its (skip_opens + 1)-th opening on (a reader
// may sniff a file's first bytes before it reads the whole).
class ReadFaultEnv final : public EnvWrapper {
 public:
  ReadFaultEnv(std::string victim, ReadFault fault, int skip_opens = 0)
      : EnvWrapper(Env::posix()), victim_(std::move(victim)), fault_(fault), skip_(skip_opens) {}
  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& path) override {
    CKPT_ASSIGN_OR_RETURN(auto file, EnvWrapper::open_random(path));
    if (path != victim_ || opens_++ < skip_) return file;
    ++faulted_;
    return std::unique_ptr<RandomAccessFile>(new FaultyFile(std::move(file), fault_));
  }
  int faulted() const { return faulted_; }

 private:
  std::string victim_;
  ReadFault fault_;
  int skip_;
  int opens_ = 0;
  int faulted_ = 0;
};

TEST_CASE("analytics readers: a read fault injected through the Env is the reader's error",
          "[analytics]") {
  const std::string csv = fixture("lr_restart_warmup.csv");
  ReadFaultEnv eio(csv, ReadFault::kEio);
  auto text = read_text_file(&eio, csv);
  REQUIRE_FALSE(text.is_ok());
  CHECK(text.status().code() == Code::kIoError);
  CHECK(text.status().message() == csv + ": read failed: Input/output error");

  ReadFaultEnv short_read(csv, ReadFault::kShortRead);
  auto series = load_lr_series(&short_read, csv, "auto");
  REQUIRE_FALSE(series.is_ok());
  CHECK(series.status().code() == Code::kCorrupt);
  CHECK(series.status().message().rfind(csv + ": truncated", 0) == 0);
  CHECK(short_read.faulted() == 1);

  // The same file through Env::posix() reads whole.
  CHECK(load_lr_series(Env::posix(), csv, "auto").is_ok());
}

TEST_CASE("ckpt lr and ckpt coverage: EIO is exit 66, a short read exit 65, naming the file",
          "[analytics][cli]") {
  std::ostringstream out, err;
  cli::LrCommandOptions lr;
  lr.input = fixture("lr_restart_warmup.csv");
  {
    ReadFaultEnv env(lr.input, ReadFault::kEio);
    CHECK(cli::run_lr_command(lr, &env, out, err) == 66);
    CHECK(err.str() == "ckpt lr: " + lr.input + ": read failed: Input/output error\n");
  }
  {
    // An event file found by walking a TensorBoard folder: the walk, the header sniff and the
    // read all go through the Env (the fault spares the sniff, the file's first opening).
    lr.input = fixture("logs/tb_sched_lost");
    std::string victim;
    struct Finder final : EnvWrapper {
      explicit Finder(std::string* first) : EnvWrapper(Env::posix()), first_(first) {}
      Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& p) override {
        if (first_->empty()) *first_ = p;
        return EnvWrapper::open_random(p);
      }
      std::string* first_;
    } finder(&victim);
    REQUIRE(cli::run_lr_command(lr, &finder, out, err) == 2);  // the fixture's two restarts
    REQUIRE_FALSE(victim.empty());
    ReadFaultEnv env(victim, ReadFault::kEio, 1);
    err.str("");
    CHECK(cli::run_lr_command(lr, &env, out, err) == 66);
    CHECK(err.str().find(victim + ": read failed") != std::string::npos);
  }
  cli::CoverageCommandOptions cov;
  cov.run_spec = fixture("cov_sequential.json");
  {
    ReadFaultEnv env(cov.run_spec, ReadFault::kShortRead);
    err.str("");
    CHECK(cli::run_coverage_command(cov, &env, out, err) == 65);
    CHECK(err.str().rfind("ckpt coverage: " + cov.run_spec + ": truncated", 0) == 0);
  }
  {
    ReadFaultEnv env(cov.run_spec, ReadFault::kEio);
    err.str("");
    CHECK(cli::run_coverage_command(cov, &env, out, err) == 66);
    CHECK(err.str() == "ckpt coverage: " + cov.run_spec + ": read failed: Input/output error\n");
  }
  err.str("");
  CHECK(cli::run_coverage_command(cov, Env::posix(), out, err) == 0);
}

}  // namespace
}  // namespace ckpt::analytics::env_faults_test
