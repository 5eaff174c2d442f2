#include "analytics/input/json_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ckpt/format/python_json.h"

namespace ckpt::analytics {

Result<nlohmann::json> parse_python_json(std::string_view text, const std::string& where) {
  return ckpt::parse_python_json(text, where);
}

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found(path + ": cannot open: no such file");
    return io_error(path + ": cannot open: " + std::strerror(err));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return io_error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return corrupt(path + ": not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return corrupt(path + ": " + std::to_string(size) + " bytes, over the " +
                   std::to_string(max_bytes) + "-byte limit for this input");
  }
  std::string out;
  out.resize(static_cast<size_t>(size));
  size_t have = 0;
  // A file that grows while it is read is read up to the limit and no further.
  while (true) {
    if (have == out.size()) {
      if (out.size() >= max_bytes) break;
      out.resize(std::min<uint64_t>(max_bytes, out.size() + 65536));
    }
    const ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(path + ": read failed: " + std::strerror(errno));
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return out;
}

std::string escape_bytes(std::string_view bytes, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == max_chars) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

bool json_number(const nlohmann::json& v, double* out) {
  if (!v.is_number()) return false;
  *out = v.get<double>();
  return true;
}

bool json_count(const nlohmann::json& v, int64_t* out) {
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < 0) return false;
    *out = x;
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= 0) || d > 9.0e18 || std::floor(d) != d) return false;
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

}  // namespace ckpt::analytics
