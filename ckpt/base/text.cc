#include "ckpt/base/text.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>

namespace ckpt {

std::string html_escape(std::string_view s, Quotes quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        if (quotes == Quotes::kBoth) {
          out += "&#39;";
        } else {
          out.push_back(c);
        }
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string escape_bytes(std::string_view bytes, size_t max_bytes, Backslash backslash) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == max_bytes) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && (c != '\\' || backslash == Backslash::kKeep)) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

bool LineCursor::next(std::string_view* line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  terminated_ = end != std::string_view::npos;
  if (!terminated_) end = text_.size();
  *line = text_.substr(pos_, end - pos_);
  pos_ = end + 1;
  ++number_;
  return true;
}

std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

std::string utc_now(const char* strftime_format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, strftime_format, &tm);
  return std::string(buf, n);
}

std::string random_hex(size_t digits) {
  std::random_device rd;
  std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd());
  std::string out;
  while (out.size() < std::min<size_t>(digits, 64)) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(g()));
    out += buf;
  }
  out.resize(std::min<size_t>(digits, 64));
  return out;
}

}  // namespace ckpt
