// Text utilities every layer shares (private to the project: no public API promises them):
// escaping for HTML / SVG / XML, escaping untrusted bytes for a message, and walking the lines
// of a text held in memory. One copy each, so an escaping rule changes in one place; the
// UTF-8-aware diagnostics escaper and the JSON writer are ckpt/format/printable.h's.
//
// Pure functions and a cursor over caller-owned text; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ckpt {

// Which quote characters html_escape() writes as entities, besides & < and >.
enum class Quotes {
  kBoth,        // " as &quot; and ' as &#39; (text and attributes in either quotes)
  kDoubleOnly,  // " as &quot;, ' kept (attributes always in double quotes)
};

// `s` safe inside HTML, SVG or XML text and attribute values.
std::string html_escape(std::string_view s, Quotes quotes = Quotes::kBoth);

// Whether a backslash passes through escape_bytes() as itself or as \x5c (so the output reads
// back unambiguously: every backslash in it starts an escape).
enum class Backslash { kEscape, kKeep };

// Untrusted bytes (names, tags, lines from a file) made safe to echo: printable ASCII is kept,
// every other byte becomes \xNN (lower-case hex). Only the first `max_bytes` bytes are shown,
// then "..." when there were more.
std::string escape_bytes(std::string_view bytes, size_t max_bytes = std::string_view::npos,
                         Backslash backslash = Backslash::kEscape);

// The lines of a text, in order, each without its '\n' ('\r' is kept: callers that accept CRLF
// treat it as blank space). A text that does not end with '\n' has a last, unterminated line; an
// empty text has none, and a final '\n' starts no empty line.
//
//   LineCursor lines(text);
//   for (std::string_view line; lines.next(&line);) use(line, lines.number());
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}

  // Sets *line to the next line; false (and *line untouched) when none is left.
  bool next(std::string_view* line);
  // 1-based number of the line next() returned last.
  int64_t number() const { return number_; }
  // Whether that line ended with '\n' (a line torn by a crash mid-append did not).
  bool terminated() const { return terminated_; }
  // Whether nothing follows that line.
  bool last() const { return pos_ >= text_.size(); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t number_ = 0;
  bool terminated_ = false;
};

// `s` between double quotes, as error messages name a tensor or a key: tensor "model/w".
std::string in_quotes(std::string_view s);

// Whether `line` holds nothing but spaces, tabs and carriage returns.
bool is_blank(std::string_view line);

// The current UTC time formatted by strftime (`"%Y-%m-%dT%H:%M:%SZ"`: ISO 8601, as the commit
// record writes it; `"%Y%m%dT%H%M%SZ"`: SigV4's x-amz-date).
std::string utc_now(const char* strftime_format);

// `digits` lowercase hex digits (at most 64) from std::random_device: names and tokens that must
// not collide between processes (a probe object, a lease token), not secrets.
std::string random_hex(size_t digits);

}  // namespace ckpt
