#include "analytics/json_text.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ckpt::analytics {
namespace {

bool starts_with(std::string_view s, size_t at, std::string_view word) {
  return s.size() - at >= word.size() && s.compare(at, word.size(), word) == 0;
}

// Replaces NaN, Infinity and -Infinity outside strings by null. Infinity keeps its length (padded
// with spaces); NaN grows by one byte, so parser offsets past a NaN are off by the NaNs before
// them.
std::string strip_python_literals(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);  // the escaped character may be a quote
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.push_back(c);
    } else if (starts_with(text, i, "NaN")) {
      out += "null";
      i += 2;
    } else if (starts_with(text, i, "Infinity")) {
      out += "null    ";
      i += 7;
    } else if (starts_with(text, i, "-Infinity")) {
      out += "null     ";
      i += 8;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

Result<nlohmann::json> parse_python_json(std::string_view text, const std::string& where) {
  try {
    return nlohmann::json::parse(strip_python_literals(text));
  } catch (const nlohmann::json::exception& e) {
    return corrupt(where + ": malformed JSON: " + e.what());
  }
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return not_found(path + ": cannot open: no such file");
    return io_error(path + ": cannot open: " + std::strerror(err));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return io_error(path + ": read failed");
  return buf.str();
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
