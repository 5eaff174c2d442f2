#include "profile/history/layout.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

namespace ckpt::profile {

namespace fs = std::filesystem;

namespace {

const std::pair<const char*, uint64_t> kBuckets[] = {
    {"<4KiB", 4ull << 10},    {"4KiB-64KiB", 64ull << 10}, {"64KiB-1MiB", 1ull << 20},
    {"1-16MiB", 16ull << 20}, {"16-256MiB", 256ull << 20}, {"256MiB-4GiB", 4ull << 30},
    {">=4GiB", UINT64_MAX}};

bool is_codec(const std::string& f) {
  return f == "gzip" || f == "zstd" || f == "bzip2" || f == "xz" || f == "lz4";
}

std::string human(uint64_t b) {
  char buf[32];
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  std::snprintf(buf, sizeof buf, "%.1f %s", v, u[i]);
  return buf;
}

}  // namespace

std::string sniff_format(const unsigned char* h, size_t n) {
  auto at = [&](size_t off, const char* magic, size_t len) {
    return n >= off + len && std::memcmp(h + off, magic, len) == 0;
  };
  if (at(0, "\x1f\x8b", 2)) return "gzip";
  if (at(0, "\x28\xb5\x2f\xfd", 4)) return "zstd";
  if (at(0, "BZh", 3)) return "bzip2";
  static constexpr char kXzMagic[] = {'\xfd', '7', 'z', 'X', 'Z', '\0'};
  if (at(0, kXzMagic, sizeof kXzMagic)) return "xz";
  if (at(0, "\x04\x22\x4d\x18", 4)) return "lz4";
  if (at(257, "ustar", 5)) return "tar";
  if (at(0, "PK\x03\x04", 4)) return "zip";
  if (at(0, "PAR1", 4)) return "parquet";
  if (at(0, "ARROW1", 6)) return "arrow";
  if (at(0, "\x89HDF\r\n\x1a\n", 8)) return "hdf5";
  if (at(0, "\x93NUMPY", 6)) return "npy";
  if (at(0, "\xff\xd8\xff", 3)) return "jpeg";
  if (at(0, "\x89PNG", 4)) return "png";
  if (at(0, "RIFF", 4) && at(8, "WEBP", 4)) return "webp";
  if (at(0, "GIF8", 4)) return "gif";
  if (n > 0 && (h[0] == '{' || h[0] == '[')) return "json";
  return "";
}

// One directory open per level of the walk, at most kMaxLayoutDepth + 1 of them.
struct OpenDir {
  DIR* d = nullptr;
  int depth = 0;
};

Result<LayoutScan> scan_layout(const std::string& dir) {
  struct stat root_st {};
  if (::stat(dir.c_str(), &root_st) != 0) {
    if (errno == ENOENT) return not_found(dir + ": no such directory");
    return io_error(dir + ": cannot stat (" + std::strerror(errno) + ")");
  }
  if (!S_ISDIR(root_st.st_mode)) return io_error(dir + ": not a directory");
  LayoutScan s;
  s.root = dir;
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> hist(std::size(kBuckets), 0);
  // Iterative depth-first walk through directory descriptors (openat), so memory holds the open
  // directories of one path (bounded by the depth cap), never a stack of path strings, and no
  // path is ever longer than one name.
  std::vector<OpenDir> stack;
  DIR* top = ::opendir(dir.c_str());
  if (top == nullptr) return io_error(dir + ": cannot list (" + std::strerror(errno) + ")");
  stack.push_back({top, 0});
  while (!stack.empty()) {
    OpenDir& cur = stack.back();
    errno = 0;
    dirent* e = ::readdir(cur.d);
    if (e == nullptr) {
      ::closedir(cur.d);
      stack.pop_back();
      continue;
    }
    const char* name = e->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    int dfd = ::dirfd(cur.d);
    struct stat st {};
    if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (cur.depth >= kMaxLayoutDepth) {
        ++s.skipped_deep_dirs;  // not entered: deeper than the cap
        continue;
      }
      int fd = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) continue;  // permission denied: skipped, like the files it holds
      DIR* sub = ::fdopendir(fd);
      if (sub == nullptr) {
        ::close(fd);
        continue;
      }
      int depth = cur.depth + 1;
      stack.push_back({sub, depth});  // `cur` is not used past this point
      continue;
    }
    // Symbolic links to files count as the file (directories behind links are not followed).
    if (S_ISLNK(st.st_mode) && ::fstatat(dfd, name, &st, 0) != 0) continue;
    if (!S_ISREG(st.st_mode)) continue;
    uint64_t size = uint64_t(st.st_size);
    ++s.files;
    s.bytes += size;
    sizes.push_back(size);
    for (size_t b = 0; b < hist.size(); ++b) {
      if (size < kBuckets[b].second) {
        ++hist[b];
        break;
      }
    }
    std::string ext = fs::path(name).extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ++s.extensions[ext.empty() ? "(none)" : ext];
    if (s.sniffed < kSniffLimit) {
      unsigned char head[512];
      ssize_t n = 0;
      int fd = ::openat(dfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        n = ::read(fd, head, sizeof head);
        ::close(fd);
      }
      std::string f = sniff_format(head, n > 0 ? static_cast<size_t>(n) : 0);
      if (f.empty() && (ext == ".tfrecord" || ext == ".tfrecords")) f = "tfrecord";
      if (f.empty() && (ext == ".txt" || ext == ".csv" || ext == ".jsonl")) f = "text";
      ++s.formats[f.empty() ? "unknown" : f];
      ++s.sniffed;
    }
  }
  for (size_t b = 0; b < hist.size(); ++b) s.size_histogram.push_back({kBuckets[b].first, hist[b]});
  if (!sizes.empty()) {
    std::nth_element(sizes.begin(), sizes.begin() + sizes.size() / 2, sizes.end());
    s.median_size = sizes[sizes.size() / 2];
  }
  for (const auto& [f, n] : s.formats) {
    if (is_codec(f)) s.compression.push_back(f);
  }
  if (s.files == 0) {
    s.layout = "empty";
  } else if (s.median_size >= (16ull << 20)) {
    s.layout = "shards";
  } else if (s.median_size < (1ull << 20) && s.files >= 1000) {
    s.layout = "loose files";
  } else {
    s.layout = "mixed";
  }
  return s;
}

nlohmann::json layout_json(const LayoutScan& s) {
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [label, n] : s.size_histogram) hist[label] = n;
  return {{"root", s.root},
          {"files", s.files},
          {"bytes", s.bytes},
          {"median_size", s.median_size},
          {"size_histogram", hist},
          {"extensions", s.extensions},
          {"formats", s.formats},
          {"compression", s.compression},
          {"sniffed", s.sniffed},
          {"layout", s.layout},
          {"skipped_deep_dirs", s.skipped_deep_dirs}};
}

Result<LayoutScan> layout_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    LayoutScan s;
    s.root = j.at("root").get<std::string>();
    s.files = j.at("files").get<uint64_t>();
    s.bytes = j.at("bytes").get<uint64_t>();
    s.median_size = j.at("median_size").get<uint64_t>();
    for (const auto& [k, v] : j.at("size_histogram").items()) {
      s.size_histogram.push_back({k, v.get<uint64_t>()});
    }
    s.extensions = j.at("extensions").get<std::map<std::string, uint64_t>>();
    s.formats = j.at("formats").get<std::map<std::string, uint64_t>>();
    s.compression = j.at("compression").get<std::vector<std::string>>();
    s.sniffed = j.value("sniffed", uint64_t{0});
    s.skipped_deep_dirs = j.value("skipped_deep_dirs", uint64_t{0});
    s.layout = j.at("layout").get<std::string>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    return corrupt(source + ": not a `ckpt profile layout --json` document (" + e.what() + ")");
  }
}

std::string layout_text(const LayoutScan& s) {
  std::string o = "Dataset layout of " + s.root + "\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %llu files, %s total, median file %s: %s\n",
                static_cast<unsigned long long>(s.files), human(s.bytes).c_str(),
                human(s.median_size).c_str(), s.layout.c_str());
  o += buf;
  o += "  size histogram:";
  for (const auto& [label, n] : s.size_histogram) {
    if (n) o += " " + label + "=" + std::to_string(n);
  }
  o += "\n  extensions:";
  for (const auto& [e, n] : s.extensions) o += " " + e + "=" + std::to_string(n);
  o += "\n  formats (first " + std::to_string(s.sniffed) + " files):";
  for (const auto& [f, n] : s.formats) o += " " + f + "=" + std::to_string(n);
  o += "\n  compression: ";
  if (s.compression.empty()) o += "none detected";
  for (size_t i = 0; i < s.compression.size(); ++i) o += (i ? ", " : "") + s.compression[i];
  o += "\n";
  if (s.skipped_deep_dirs > 0) {
    o += "  " + std::to_string(s.skipped_deep_dirs) + " director" +
         (s.skipped_deep_dirs == 1 ? "y" : "ies") + " deeper than " +
         std::to_string(kMaxLayoutDepth) + " levels not scanned\n";
  }
  return o;
}

std::vector<std::string> diff_layouts(const LayoutScan& a, const LayoutScan& b) {
  std::vector<std::string> out;
  char buf[300];
  if (a.layout != b.layout) {
    std::string why = b.layout == "loose files"
                          ? " (many small files: the bottleneck moves to storage metadata)"
                          : "";
    out.push_back("layout: " + a.layout + " -> " + b.layout + why);
  }
  if (a.files != b.files) {
    std::snprintf(buf, sizeof buf, "file count: %llu -> %llu (x%.2f)",
                  static_cast<unsigned long long>(a.files),
                  static_cast<unsigned long long>(b.files),
                  a.files ? double(b.files) / double(a.files) : 0.0);
    out.push_back(buf);
  }
  if (a.median_size != b.median_size) {
    out.push_back("median file size: " + human(a.median_size) + " -> " + human(b.median_size));
  }
  if (a.bytes != b.bytes) out.push_back("total size: " + human(a.bytes) + " -> " + human(b.bytes));
  std::set<std::string> ca(a.compression.begin(), a.compression.end()),
      cb(b.compression.begin(), b.compression.end());
  if (ca != cb) {
    std::string x, y;
    for (const auto& c : ca) x += (x.empty() ? "" : ",") + c;
    for (const auto& c : cb) y += (y.empty() ? "" : ",") + c;
    out.push_back("compression: " + (x.empty() ? "none" : x) + " -> " + (y.empty() ? "none" : y) +
                  " (a costlier codec makes the loader CPU-bound)");
  }
  auto diff_counts = [&](const char* what, const std::map<std::string, uint64_t>& ma,
                         const std::map<std::string, uint64_t>& mb) {
    std::set<std::string> keys;
    for (const auto& [k, v] : ma) keys.insert(k);
    for (const auto& [k, v] : mb) keys.insert(k);
    for (const auto& k : keys) {
      uint64_t x = ma.count(k) ? ma.at(k) : 0, y = mb.count(k) ? mb.at(k) : 0;
      if ((x == 0) != (y == 0)) {
        out.push_back(std::string(what) + " " + k + ": " + std::to_string(x) + " -> " +
                      std::to_string(y) + (y == 0 ? " (gone)" : " (new)"));
      }
    }
  };
  diff_counts("format", a.formats, b.formats);
  diff_counts("extension", a.extensions, b.extensions);
  return out;
}

}  // namespace ckpt::profile
