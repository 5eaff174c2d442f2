// `ckpt inspect`'s text form keeps one node per line and one meaning per path: a key holding a
// newline or other control character is escaped, a key holding '/' is quoted (not mistaken for
// nesting); the JSON form keeps every key as it is.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "verify/audit/audit.h"

using namespace ckpt::verify;

namespace {

InspectNode leaf(const std::string& name, const std::string& summary) {
  InspectNode n;
  n.name = name;
  n.kind = "int";
  n.summary = summary;
  return n;
}

}  // namespace

TEST_CASE("inspect text: odd keys are escaped or quoted, JSON keeps them raw", "[verify]") {
  InspectNode nested;
  nested.name = "key";
  nested.kind = "dict";
  nested.summary = "dict[1]";
  nested.children = {leaf("with", "dict[0]")};
  InspectNode extras;
  extras.name = "extras";
  extras.kind = "dict";
  extras.summary = "dict[6]";
  extras.children = {leaf("key/with/slash", "tensor float32 [2] 8 B"),
                     leaf("weird key \xc3\xbc\n", "1"),
                     leaf("key.with.dots", "2"),
                     leaf("q\"uote\\", "3"),
                     leaf("", "4"),
                     nested};
  InspectNode root;
  root.name = "odd";
  root.kind = "dir";
  root.children = {extras};

  const std::string text = inspect_to_text(root);
  INFO(text);
  CHECK(text.find("/extras/\"key/with/slash\" ") != std::string::npos);
  CHECK(text.find("/extras/\"weird key \xc3\xbc\\n\" ") != std::string::npos);
  CHECK(text.find("/extras/key.with.dots ") != std::string::npos);
  CHECK(text.find("/extras/\"q\\\"uote\\\\\" ") != std::string::npos);
  CHECK(text.find("/extras/\"\" ") != std::string::npos);
  CHECK(text.find("/extras/key/with ") != std::string::npos);  // real nesting stays unquoted
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  CHECK(lines == 9);  // the name, extras, six keys, key/with: one line each

  CHECK(inspect_key_text("plain_key-1.0 x") == "plain_key-1.0 x");
  CHECK(inspect_key_text("tab\there") == "\"tab\\there\"");

  const nlohmann::json j = inspect_to_json(root);
  CHECK(j["children"][0]["children"][0]["name"] == "key/with/slash");
  CHECK(j["children"][0]["children"][1]["name"] == "weird key \xc3\xbc\n");
  CHECK(nlohmann::json::parse(j.dump())["children"][0]["children"][1]["name"] ==
        "weird key \xc3\xbc\n");
}
