// Small helpers shared by the ckpt benchmarks: the flags they share and their parser, timing,
// medians, the result row they print, page-cache control and reproducible tensor bytes.
// Header-only; single-threaded use.
//
// Page-cache control: make_cold() first tries `echo 3 > /proc/sys/vm/drop_caches` (root, the
// whole cache), then falls back to posix_fadvise(POSIX_FADV_DONTNEED) on the given files (clean
// pages only: files are fsynced before). resident_fraction() checks the result with mincore(),
// so a "cold" number is only printed with the measured residency beside it.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ckpt::bench {

using Clock = std::chrono::steady_clock;

// The flags the state benchmarks share; each bench sets its own defaults before parsing.
struct BenchFlags {
  uint64_t mb = 512, tensor_mb = 8, small = 256, reps = 5, cold_reps = 3;
  unsigned threads = 0;  // 0: resume::default_io_threads()
  std::string dir;       // empty: a fresh directory under /tmp, removed at the end
};

// "--name VALUE" flags into numbers or strings, and "--name" switches. parse() is false on an
// unknown flag, a flag without its value, or a zero where a positive number is required.
class FlagParser {
 public:
  FlagParser& number(const std::string& name, uint64_t* v, bool positive = false) {
    values_[name] = [v](const char* s) { *v = std::strtoull(s, nullptr, 10); };
    if (positive) positive_.push_back(v);
    return *this;
  }
  FlagParser& count(const std::string& name, unsigned* v) {
    values_[name] = [v](const char* s) {
      *v = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
    };
    return *this;
  }
  FlagParser& text(const std::string& name, std::string* v) {
    values_[name] = [v](const char* s) { *v = s; };
    return *this;
  }
  FlagParser& flag(const std::string& name, bool* v) {
    switches_[name] = v;
    return *this;
  }
  // --mb, --tensor-mb, --small, --reps and --dir; with `restores` also --cold-reps and --threads.
  FlagParser& bench_flags(BenchFlags* f, bool restores) {
    number("--mb", &f->mb, true).number("--tensor-mb", &f->tensor_mb, true);
    number("--small", &f->small).number("--reps", &f->reps, true).text("--dir", &f->dir);
    if (restores) number("--cold-reps", &f->cold_reps).count("--threads", &f->threads);
    return *this;
  }
  bool parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      const std::string k = argv[i];
      if (auto s = switches_.find(k); s != switches_.end()) {
        *s->second = true;
        continue;
      }
      const auto v = values_.find(k);
      if (i + 1 >= argc || v == values_.end()) return false;
      v->second(argv[++i]);
    }
    for (const uint64_t* p : positive_) {
      if (*p == 0) return false;
    }
    return true;
  }

 private:
  std::map<std::string, std::function<void(const char*)>> values_;
  std::map<std::string, bool*> switches_;
  std::vector<const uint64_t*> positive_;
};

// Parses argv; on a usage error prints `usage` to stderr and returns false (the bench exits 64).
inline bool parse_or_usage(const FlagParser& p, int argc, char** argv, const char* usage) {
  if (p.parse(argc, argv)) return true;
  std::fprintf(stderr, "%s\n", usage);
  return false;
}

// The directory a bench works in: `given`, or a fresh one from mkdtemp("/tmp/PREFIX-XXXXXX");
// "" when that fails.
inline std::string work_dir(const std::string& given, const char* prefix) {
  if (!given.empty()) return given;
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline double mb_per_s(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0;
}

// One result row, "  NAME  SECONDS s  RATE MB/s", then "   RATIOx PEER" when the peer's rate is
// given (> 0). The name column is `name_width` wide; `bytes` is what every row moved.
struct RowPrinter {
  int name_width;
  const char* peer;  // what a ratio is against: "raw", "B"
  uint64_t bytes;

  void row(const std::string& name, double seconds, double peer_mbs = 0) const {
    const double mbs = mb_per_s(bytes, seconds);
    std::printf("  %-*s %8.3f s %9.0f MB/s", name_width, name.c_str(), seconds, mbs);
    if (peer_mbs > 0) std::printf("   %.2fx %s", mbs / peer_mbs, peer);
    std::printf("\n");
  }
  // The median of `runs`.
  void row(const std::string& name, const std::vector<double>& runs, double peer_mbs = 0) const {
    row(name, median(runs), peer_mbs);
  }
};

// Fraction of the file's pages resident in the page cache (0..1), or -1 when it cannot be told.
inline double resident_fraction(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    return -1;
  }
  const size_t len = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return -1;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((len + page - 1) / page);
  double frac = -1;
  if (::mincore(p, len, vec.data()) == 0) {
    size_t in = 0;
    for (unsigned char c : vec) in += c & 1;
    frac = static_cast<double>(in) / static_cast<double>(vec.size());
  }
  ::munmap(p, len);
  return frac;
}

// Evicts `files` from the page cache. Returns the method that worked: "drop_caches" or "fadvise".
inline std::string make_cold(const std::vector<std::string>& files) {
  ::sync();
  if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
    const bool ok = std::fputs("3\n", f) >= 0;
    if (std::fclose(f) == 0 && ok) return "drop_caches";
  }
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  return "fadvise";
}

// Reads the files once so they are in the page cache.
inline void make_warm(const std::vector<std::string>& files) {
  std::vector<char> buf(8 << 20);
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

inline std::string load_average() {
  double l[3] = {0, 0, 0};
  if (::getloadavg(l, 3) != 3) return "unknown";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", l[0], l[1], l[2]);
  return buf;
}

// Deterministic non-constant bytes (so nothing compresses or dedups behind our back).
inline void fill_bytes(unsigned char* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::copy_n(reinterpret_cast<const unsigned char*>(&x), 8, p + i);
  }
  for (; i < n; ++i) p[i] = static_cast<unsigned char>(x >> (8 * (i % 8)));
}

}  // namespace ckpt::bench
