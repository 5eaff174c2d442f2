// ckpt/base/text.h: the shared escapers and the line cursor, byte for byte as the copies they
// replaced wrote (the SVG charts, the audit table, `ckpt scan`, LATEST's note, messages).
#include "ckpt/base/text.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace ckpt::text_test {
namespace {

TEST_CASE("html_escape: & < > \" always, ' unless only double quotes are asked for", "[base]") {
  CHECK(html_escape("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  CHECK(html_escape("a<b>&\"c\"'d'", Quotes::kDoubleOnly) == "a&lt;b&gt;&amp;&quot;c&quot;'d'");
  CHECK(html_escape("plain é") == "plain é");
  CHECK(html_escape("") == "");
}

TEST_CASE("escape_bytes: printable ASCII kept, every other byte as hex, cut with ...", "[base]") {
  const std::string bytes = std::string("a\\b\n\x7f") + char(0xc3) + char(0xa9) + '\0';
  CHECK(escape_bytes(bytes) == "a\\x5cb\\x0a\\x7f\\xc3\\xa9\\x00");
  CHECK(escape_bytes(bytes, std::string::npos, Backslash::kKeep) ==
        "a\\b\\x0a\\x7f\\xc3\\xa9\\x00");
  CHECK(escape_bytes("abcdef", 3) == "abc...");
  CHECK(escape_bytes("abc", 3) == "abc");
  CHECK(escape_bytes("", 0) == "");
}

TEST_CASE("LineCursor: numbered lines, a torn last line, no empty line after the last newline",
          "[base]") {
  struct Seen {
    std::string text;
    int64_t number;
    bool terminated, last;
  };
  auto walk = [](std::string_view text) {
    std::vector<Seen> out;
    LineCursor lines(text);
    for (std::string_view line; lines.next(&line);) {
      out.push_back({std::string(line), lines.number(), lines.terminated(), lines.last()});
    }
    return out;
  };
  CHECK(walk("").empty());
  auto a = walk("x\r\n\ny");
  REQUIRE(a.size() == 3);
  CHECK((a[0].text == "x\r" && a[0].number == 1 && a[0].terminated && !a[0].last));
  CHECK((a[1].text.empty() && a[1].number == 2 && a[1].terminated && !a[1].last));
  CHECK((a[2].text == "y" && a[2].number == 3 && !a[2].terminated && a[2].last));
  auto b = walk("x\n");
  REQUIRE(b.size() == 1);
  CHECK((b[0].terminated && b[0].last));
  CHECK(is_blank(" \t\r"));
  CHECK(is_blank(""));
  CHECK_FALSE(is_blank(" x"));
}

TEST_CASE("in_quotes: the name between double quotes, as messages name a tensor", "[base]") {
  CHECK(in_quotes("model/w") == "\"model/w\"");
  CHECK(in_quotes("") == "\"\"");
}

}  // namespace
}  // namespace ckpt::text_test
