// Pathological inputs to `ckpt profile` finish, are refused with the documented code, and stay
// within the documented memory bound (docs/cli.md "Input caps"), measured on the real executable
// as the child's peak RSS (getrusage through wait4) — a bound, not a timing:
//   a 2.5 MB gzip bomb (40 gzip members of 64 MiB of spaces: 2.5 GiB inflated) → 65, refused while
//   counting, before anything is kept;
//   a "token bomb" that inflates under the text cap but is nothing but JSON tokens (`[0,0,0,…`)
//   → 65 before parsing (the parser's index would be 4 bytes per token);
//   `ckpt profile layout` of 5,000 nested empty folders → 0 in a few MB (bounded depth).
// Also the trace-level check: the same flows through load_traces give Corrupt.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "profile/history/layout.h"
#include "profile/import/input_file.h"
#include "profile/import/trace_import.h"

namespace ckpt::profile::pathological_test {
namespace {

namespace fs = std::filesystem;

// ASan's shadow memory, quarantine and allocator add a fixed amount to every process's peak RSS
// (about 150 MiB for the gzip bomb's refusal). The bounds below are about the input, which costs
// GiB when it is not bounded, so the sanitized build gets a fixed allowance on each.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kAsanAllowanceKib = 512 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr long kAsanAllowanceKib = 512 * 1024;
#else
constexpr long kAsanAllowanceKib = 0;
#endif
#else
constexpr long kAsanAllowanceKib = 0;
#endif

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("ckpt_patho_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One gzip member holding `text`.
std::string gzip_member(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct Child {
  int exit_code = -1;
  long max_rss_kib = 0;
  std::string out, err;
};

// Runs the ckpt executable with `args`, stdout and stderr to files, and reports its peak RSS.
Child run_ckpt(const std::vector<std::string>& args, const fs::path& dir) {
  std::string bin = std::string(CKPT_BINARY_DIR) + "/cli/ckpt";
  fs::path out = dir / "stdout", err = dir / "stderr";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  Child c;
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  c.max_rss_kib = ru.ru_maxrss;
  std::ifstream so(out), se(err);
  std::stringstream a, b;
  a << so.rdbuf();
  b << se.rdbuf();
  c.out = a.str();
  c.err = b.str();
  return c;
}

TEST_CASE("a 2.5 MB gzip bomb is refused (65) having cost almost nothing", "[profile][cli]") {
  TempDir d;
  std::string member = gzip_member(std::string(64u << 20, ' '));
  fs::path bomb = d.path / "bomb.pt.trace.json.gz";
  {
    std::ofstream f(bomb, std::ios::binary);
    for (int i = 0; i < 40; ++i) f << member;  // 2.5 GiB of spaces when inflated
  }
  REQUIRE(fs::file_size(bomb) < (3u << 20));
  Child c = run_ckpt({"profile", "analyze", bomb.string()}, d.path);
  INFO(c.err << " rss " << c.max_rss_kib << " KiB");
  REQUIRE(c.exit_code == 65);
  REQUIRE(c.err.find("inflates to more than 1 GiB (the cap)") != std::string::npos);
  REQUIRE(c.err.find("bad_alloc") == std::string::npos);
  REQUIRE(c.max_rss_kib <
          128 * 1024 + kAsanAllowanceKib);  // counted, never kept: far below the 1 GiB text cap
  auto direct = read_bounded_file(bomb.string(), kMaxTraceBytes);
  REQUIRE(direct.status().code() == Code::kCorrupt);
}

TEST_CASE("a token bomb under the text cap is refused before parsing (65)", "[profile][cli]") {
  TempDir d;
  std::string zeros;
  zeros.reserve(64u << 20);
  while (zeros.size() < (64u << 20)) zeros += "0,";
  std::string block = gzip_member(zeros);
  fs::path bomb = d.path / "tokens_rank0.json.gz";
  {
    std::ofstream f(bomb, std::ios::binary);
    f << gzip_member("[");
    for (int i = 0; i < 12; ++i) f << block;  // 768 MiB of "0,": 400 M tokens
    f << gzip_member("0]");
  }
  Child c = run_ckpt({"profile", "analyze", bomb.string()}, d.path);
  INFO(c.err << " rss " << c.max_rss_kib << " KiB");
  REQUIRE(c.exit_code == 65);
  REQUIRE(c.err.find("more than the 2 GiB bound") != std::string::npos);
  // The text (768 MiB) and nothing else: the parser's 1.5 GiB index is never built.
  REQUIRE(c.max_rss_kib < 900 * 1024 + kAsanAllowanceKib);
}

TEST_CASE("layout of 5,000 nested empty folders finishes in a few MB (bounded depth)",
          "[profile][cli]") {
  TempDir d;
  fs::path root = d.path / "nest";
  fs::create_directory(root);
  // mkdir/openat one level at a time: the path itself would pass PATH_MAX.
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  for (int i = 0; i < 5000; ++i) {
    REQUIRE(::mkdirat(fd, "d", 0755) == 0);
    int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY);
    REQUIRE(next >= 0);
    ::close(fd);
    fd = next;
  }
  ::close(fd);
  Child c = run_ckpt({"profile", "layout", root.string(), "--json"}, d.path);
  INFO(c.err << " rss " << c.max_rss_kib << " KiB");
  REQUIRE(c.exit_code == 0);
  REQUIRE(c.out.find("\"skipped_deep_dirs\": 1") != std::string::npos);
  REQUIRE(c.out.find("\"files\": 0") != std::string::npos);
  REQUIRE(c.max_rss_kib < 32 * 1024 + kAsanAllowanceKib);
  auto s = scan_layout(root.string());
  REQUIRE(s.is_ok());
  REQUIRE(s->skipped_deep_dirs == 1);
  // Take the nest apart from the top, one level at a time (remove_all would walk 5,000 levels):
  // move the level below up, remove the emptied one.
  int top = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(top >= 0);
  while (::renameat(top, "d/d", top, "x") == 0) {
    REQUIRE(::unlinkat(top, "d", AT_REMOVEDIR) == 0);
    REQUIRE(::renameat(top, "x", top, "d") == 0);
  }
  ::unlinkat(top, "d", AT_REMOVEDIR);
  ::close(top);
}

TEST_CASE("input layouts through the executable: repeat cycles, a warning, --one-rank",
          "[profile][cli]") {
  TempDir d;
  std::string fx = std::string(CKPT_SOURCE_DIR) + "/fixtures/profile/";
  // schedule(repeat=2) with distributedInfo: was exit 64 "rank 0 also given by".
  Child cycles = run_ckpt({"profile", "analyze", fx + "ddp_repeat2", "--json"}, d.path);
  INFO(cycles.err);
  REQUIRE(cycles.exit_code == 0);
  REQUIRE(cycles.out.find("\"ranks\": 4") != std::string::npos);
  REQUIRE(cycles.err.find("ckpt profile: warning: rank 0: 2 files") != std::string::npos);
  // Two captures that name no rank: analysed as two ranks, but never silently.
  Child two = run_ckpt({"profile", "analyze", fx + "two_captures", "--json"}, d.path);
  REQUIRE(two.exit_code == 0);
  REQUIRE(two.err.find("ckpt profile: warning:") != std::string::npos);
  REQUIRE(two.err.find("pass --one-rank") != std::string::npos);
  Child one = run_ckpt({"profile", "analyze", fx + "two_captures", "--one-rank", "--json"}, d.path);
  REQUIRE(one.exit_code == 0);
  REQUIRE(one.out.find("\"ranks\": 1") != std::string::npos);
  REQUIRE(one.out.find("\"steps\": 16") != std::string::npos);
  // One file alone needs no rank and gets no warning.
  Child single = run_ckpt({"profile", "analyze", fx + "compute_bound.json"}, d.path);
  REQUIRE(single.exit_code == 0);
  REQUIRE(single.err.empty());
  Child twice = run_ckpt(
      {"profile", "analyze", fx + "compute_bound.json", fx + "compute_bound.json"}, d.path);
  REQUIRE(twice.exit_code == 64);
}

TEST_CASE("files of a layout deeper than the cap are not counted, shallower ones are",
          "[profile]") {
  TempDir d;
  fs::path p = d.path / "tree";
  fs::create_directories(p);
  std::ofstream(p / "top.bin") << "x";
  fs::path deep = p;
  for (int i = 0; i < kMaxLayoutDepth + 2; ++i) deep /= "d";
  fs::create_directories(deep);
  std::ofstream(deep / "deep.bin") << "x";
  fs::path ok = p;
  for (int i = 0; i < kMaxLayoutDepth; ++i) ok /= "e";
  fs::create_directories(ok);
  std::ofstream(ok / "ok.bin") << "x";
  auto s = scan_layout(p.string());
  REQUIRE(s.is_ok());
  REQUIRE(s->files == 2);  // top.bin and ok.bin (depth 64); deep.bin is below a skipped folder
  REQUIRE(s->skipped_deep_dirs == 1);
  REQUIRE(layout_text(*s).find("deeper than 64 levels not scanned") != std::string::npos);
  auto back = layout_from_json(layout_json(*s), "x.json");
  REQUIRE(back.is_ok());
  REQUIRE(back->skipped_deep_dirs == 1);
}

}  // namespace
}  // namespace ckpt::profile::pathological_test
