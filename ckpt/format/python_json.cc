#include "ckpt/format/python_json.h"

#include "ckpt/format/printable.h"

namespace ckpt {
namespace {

bool starts_with(std::string_view s, size_t at, std::string_view word) {
  return s.size() - at >= word.size() && s.compare(at, word.size(), word) == 0;
}

}  // namespace

// Infinity keeps its length (padded with spaces); NaN grows by one byte, so parser offsets past a
// NaN are off by the NaNs before them.
std::string strip_python_literals(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
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
    } else if (c == 'N' && starts_with(text, i, "NaN")) {
      out += "null";
      i += 2;
    } else if (c == 'I' && starts_with(text, i, "Infinity")) {
      out += "null    ";
      i += 7;
    } else if (c == '-' && starts_with(text, i, "-Infinity")) {
      out += "null     ";
      i += 8;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Result<nlohmann::json> parse_python_json(std::string_view text, const std::string& where) {
  try {
    return nlohmann::json::parse(strip_python_literals(text));
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    return corrupt(where + ": malformed JSON: " + printable_line(what));
  }
}

}  // namespace ckpt
