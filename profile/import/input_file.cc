#include "profile/import/input_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ckpt::profile {

namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string cap_text(uint64_t bytes) {
  return bytes >= (uint64_t(1) << 30) ? std::to_string(bytes >> 30) + " GiB"
                                      : std::to_string(bytes >> 20) + " MiB";
}

// Every buffer handed to the JSON parser keeps this many spare bytes after the text (simdjson
// reads up to 64 bytes past the end), so the parser works on it in place instead of on a copy.
constexpr size_t kSlack = 64;

Status read_all(int fd, const std::string& path, uint64_t size, std::string* out) {
  out->reserve(size + kSlack);
  out->resize(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, out->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(path + ": read failed (" + std::strerror(errno) + ")");
    if (n == 0) break;  // shrank while reading: keep what is there
    done += uint64_t(n);
  }
  out->resize(done);
  return Status::ok();
}

// One streaming pass over gzip input (one or more members). With `out` null it only counts the
// inflated bytes; otherwise it appends them to *out, which the caller reserved. Either way it stops
// as soon as the output passes the cap.
Status inflate_pass(const std::string& in, const std::string& path, uint64_t max_bytes,
                    uint64_t* produced_total, std::string* out) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return internal_error(path + ": inflateInit2");
  size_t fed = 0;
  uint64_t total = 0;
  char buf[1 << 16];
  Status st = Status::ok();
  for (;;) {
    if (z.avail_in == 0 && fed < in.size()) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      z.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - fed, 1u << 30));
      fed += z.avail_in;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    int rc = inflate(&z, Z_NO_FLUSH);
    size_t produced = sizeof buf - z.avail_out;
    total += produced;
    if (total > max_bytes) {
      st = corrupt(path + ": inflates to more than " + cap_text(max_bytes) + " (the cap)");
      break;
    }
    if (out != nullptr) out->append(buf, produced);  // within the reservation: never reallocates
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0 && fed >= in.size()) break;
      if (inflateReset(&z) != Z_OK) break;  // another member follows
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && produced == 0 && z.avail_in == 0 && fed >= in.size()) {
      st = corrupt(path + ": damaged gzip data (truncated)");
      break;
    }
    if (rc != Z_BUF_ERROR) {
      st =
          corrupt(path + ": damaged gzip data (" + std::string(z.msg ? z.msg : "bad stream") + ")");
      break;
    }
  }
  inflateEnd(&z);
  *produced_total = total;
  return st;
}

// Inflates gzip in two passes: the first counts the output without keeping it (a bomb is refused
// there, having cost 64 KiB), the second inflates into a buffer reserved to the exact size. The
// memory is the inflated text and nothing more: no doubling growth, no second copy.
Result<std::string> inflate_gzip(const std::string& in, const std::string& path,
                                 uint64_t max_bytes) {
  uint64_t size = 0;
  CKPT_RETURN_IF_ERROR(inflate_pass(in, path, max_bytes, &size, nullptr));
  std::string out;
  out.reserve(size + kSlack);
  uint64_t again = 0;
  CKPT_RETURN_IF_ERROR(inflate_pass(in, path, size, &again, &out));
  return out;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

Result<std::string> read_bounded_file(const std::string& path, uint64_t max_bytes, bool inflate) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) {
    if (errno == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    return io_error(path + ": cannot stat (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) return io_error(path + ": is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) return corrupt(path + ": not a regular file");
  if (uint64_t(st.st_size) > max_bytes) {
    return corrupt(path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                   cap_text(max_bytes) + " cap");
  }
  std::string raw;
  CKPT_RETURN_IF_ERROR(read_all(f.fd, path, uint64_t(st.st_size), &raw));
  if (inflate && raw.size() >= 2 && uint8_t(raw[0]) == 0x1f && uint8_t(raw[1]) == 0x8b) {
    return inflate_gzip(raw, path, max_bytes);
  }
  return raw;
}

Result<std::vector<std::string>> list_trace_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return io_error(dir + ": cannot list (" + std::strerror(errno) + ")");
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (!ends_with(name, ".json") && !ends_with(name, ".json.gz") && !ends_with(name, ".jsonl")) {
      continue;
    }
    std::string path = dir + (ends_with(dir, "/") ? "" : "/") + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(path);
  }
  ::closedir(d);
  if (out.empty()) {
    return corrupt(dir + ": no trace files (*.json, *.json.gz, *.jsonl) in the directory");
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<std::string>> expand_trace_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      CKPT_ASSIGN_OR_RETURN(std::vector<std::string> files, list_trace_dir(p));
      out.insert(out.end(), files.begin(), files.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace ckpt::profile
