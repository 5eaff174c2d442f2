// ckpt/io/mapped_file.h and PosixEnv's mapped reads: cached bytes read through a mapping equal
// pread's, uncached bytes are left to pread, and a file that shrinks underneath a mapped read is
// an error, not the death of the process.
#include "ckpt/io/mapped_file.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/io/env.h"
#include "tests/common/test_util.h"

namespace ckpt::mapped_file_test {
namespace {

using ckpt::testing::byte_sum;
using ckpt::testing::ByteSum;
using ckpt::testing::kAddressSanitizer;
using ckpt::testing::TempDir;

constexpr size_t kMiB = 1u << 20;

std::string write_bytes(const std::string& path, size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), n) == static_cast<ssize_t>(n));
  ::close(fd);
  return bytes;
}

// Forces mapped reads on or off for one test, back to the probe's choice after it.
struct MappedReads {
  explicit MappedReads(bool on) { override_mapped_reads(on ? 1 : 0); }
  ~MappedReads() { override_mapped_reads(-1); }
};

struct Shrink {  // a visitor that truncates the file, then reads the bytes it just removed
  int fd;
  uint64_t sum = 0;
  static void run(const unsigned char* bytes, size_t n, void* arg) {
    auto* s = static_cast<Shrink*>(arg);
    REQUIRE(::ftruncate(s->fd, 0) == 0);
    for (size_t i = 0; i < n; i += 4096) s->sum += bytes[i];
  }
};

TEST_CASE("cached bytes read through the mapping equal the file's, pread or not", "[mapped]") {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  const std::string bytes = write_bytes(path, 3 * kMiB + 123);
  for (bool on : {false, true}) {
    MappedReads forced(on);
    auto f = Env::posix()->open_random(path);
    REQUIRE(f.is_ok());
    std::vector<char> got(2 * kMiB + 7);
    REQUIRE((*f)->read_at(kMiB - 5, got.data(), got.size()).is_ok());
    CHECK(std::memcmp(got.data(), bytes.data() + kMiB - 5, got.size()) == 0);
    std::vector<char> a(100 * 1024), b(900 * 1024);
    const ReadSpan spans[] = {{a.data(), a.size()}, {b.data(), b.size()}};
    REQUIRE((*f)->read_scatter_at(77, spans, 2).is_ok());
    CHECK(std::memcmp(a.data(), bytes.data() + 77, a.size()) == 0);
    CHECK(std::memcmp(b.data(), bytes.data() + 77 + a.size(), b.size()) == 0);
    CHECK((*f)->read_at(3 * kMiB, got.data(), kMiB).code() == Code::kCorrupt);

    ByteSum sum;
    auto visited = (*f)->visit_at(5, 2 * kMiB, &ByteSum::run, &sum);
    REQUIRE(visited.is_ok());
    CHECK(*visited == on);  // off: the caller reads instead
    if (on) CHECK(sum.sum == byte_sum(bytes, 5, 2 * kMiB));
    auto outside = (*f)->visit_at(3 * kMiB, kMiB, &ByteSum::run, &sum);
    REQUIRE(outside.is_ok());
    CHECK_FALSE(*outside);  // read_at reports the range

    // read_visiting: into dst, each part shown once it is there, in order, small enough to be
    // hashed in cache.
    struct Parts {
      const char* next;
      size_t count = 0, largest = 0;
      bool in_order = true;
      static void run(const unsigned char* b, size_t n, void* arg) {
        auto* p = static_cast<Parts*>(arg);
        p->in_order = p->in_order && reinterpret_cast<const char*>(b) == p->next;
        p->next += n;
        ++p->count;
        p->largest = std::max(p->largest, n);
      }
    };
    std::fill(got.begin(), got.end(), 0);
    Parts parts{got.data()};
    REQUIRE((*f)->read_visiting(kMiB - 5, got.data(), got.size(), &Parts::run, &parts).is_ok());
    CHECK(std::memcmp(got.data(), bytes.data() + kMiB - 5, got.size()) == 0);
    CHECK(parts.in_order);
    CHECK(parts.next == got.data() + got.size());
    CHECK(parts.count == 9);  // 2 MiB + 7 bytes in parts of 256 KiB
    CHECK(parts.largest == 256 * 1024);
    CHECK((*f)->read_visiting(3 * kMiB, got.data(), kMiB, &Parts::run, &parts).code() ==
          Code::kCorrupt);
  }
}

TEST_CASE("bytes not in the page cache are left to pread", "[mapped]") {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  write_bytes(path, 4 * kMiB);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::fdatasync(fd) == 0);
  // Clean pages leave the cache on this advice (a file system that keeps them fails the
  // precondition, not the test).
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  MappedReads forced(true);
  auto m = FileMapping::open(fd, 4 * kMiB);
  REQUIRE(m != nullptr);
  if (m->resident(0, 4 * kMiB)) {
    ::close(fd);
    SUCCEED("the file system kept the pages cached: nothing to check");
    return;
  }
  auto f = Env::posix()->open_random(path);
  REQUIRE(f.is_ok());
  ByteSum sum;
  auto visited = (*f)->visit_at(0, 4 * kMiB, &ByteSum::run, &sum);
  REQUIRE(visited.is_ok());
  CHECK_FALSE(*visited);
  std::vector<char> all(4 * kMiB);
  REQUIRE((*f)->read_at(0, all.data(), all.size()).is_ok());  // pread brings them in
  CHECK(m->resident(0, 4 * kMiB));
  ::close(fd);
}

TEST_CASE("a file that shrinks during a mapped read is an error, not a SIGBUS", "[mapped]") {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  write_bytes(path, 2 * kMiB);
  MappedReads forced(true);
  auto f = Env::posix()->open_random(path);
  REQUIRE(f.is_ok());
  std::vector<char> warm(2 * kMiB);
  REQUIRE((*f)->read_at(0, warm.data(), warm.size()).is_ok());  // cached and mapped
  Shrink shrink{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
  REQUIRE(shrink.fd >= 0);
  auto visited = (*f)->visit_at(0, 2 * kMiB, &Shrink::run, &shrink);
  ::close(shrink.fd);
  REQUIRE_FALSE(visited.is_ok());
  CHECK(visited.status().code() == Code::kCorrupt);
  CHECK(visited.status().message().find(path + ": truncated: the file shrank") == 0);
  // The guard is still armed afterwards, and reads past the new end are refused.
  write_bytes(path, kMiB);
  ByteSum sum;
  CHECK(guard_sigbus([](void* s) { static_cast<ByteSum*>(s)->sum = 1; }, &sum));
  CHECK(sum.sum == 1);
  CHECK_FALSE((*f)->read_at(kMiB, warm.data(), kMiB).is_ok());
}

TEST_CASE("a SIGBUS outside a guard still ends the process", "[mapped]") {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  write_bytes(path, kMiB);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGABRT, SIG_DFL);  // not Catch's: a sanitizer's abort ends the child quietly
    override_mapped_reads(1);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    auto m = FileMapping::open(fd, kMiB);  // installs the handler
    if (m == nullptr || ::ftruncate(fd, 0) != 0) ::_exit(3);
    volatile unsigned char c = m->data()[4096];  // SIGBUS, outside any guard
    ::_exit(c == 0 ? 4 : 5);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // It did not go on past the access (exit 4 or 5), nor fail before it (exit 3).
  if (WIFEXITED(status)) CHECK((WEXITSTATUS(status) != 3 && WEXITSTATUS(status) < 4));
  if (kAddressSanitizer) {
    // The handler before ckpt's is AddressSanitizer's: it reports and ends the process (exit 1,
    // or SIGABRT where it is told to abort).
    CHECK((WIFSIGNALED(status) || WEXITSTATUS(status) == 1));
    return;
  }
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);  // the default action
}

}  // namespace
}  // namespace ckpt::mapped_file_test
