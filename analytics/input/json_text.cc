#include "analytics/input/json_text.h"

#include <algorithm>
#include <cmath>

#include "ckpt/format/python_json.h"

namespace ckpt::analytics {

Result<nlohmann::json> parse_python_json(std::string_view text, const std::string& where) {
  return ckpt::parse_python_json(text, where);
}

Result<std::string> read_text_file(Env* env, const std::string& path, uint64_t max_bytes) {
  auto opened = env->open_random(path);
  if (!opened.is_ok()) {
    switch (opened.status().code()) {
      case Code::kNotFound:
        return not_found(path + ": cannot open: no such file");
      case Code::kInvalidArgument:  // a directory
      case Code::kCorrupt:          // a FIFO, socket or device: never opened for reading
        return corrupt(path + ": not a regular file");
      default:
        return opened.status();
    }
  }
  const std::unique_ptr<RandomAccessFile>& file = *opened;
  const uint64_t size = file->size();
  if (size > max_bytes) {
    return corrupt(path + ": " + std::to_string(size) + " bytes, over the " +
                   std::to_string(max_bytes) + "-byte limit for this input");
  }
  std::string out(static_cast<size_t>(size), '\0');
  CKPT_RETURN_IF_ERROR(file->read_at(0, out.data(), out.size()));
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
