// The manifest's fast reader (ckpt/format/manifest_scan.h) against nlohmann's DOM: the same
// manifests, the same errors. scan_manifest must take what encode_manifest writes (else the fast
// path is never used and these tests would prove nothing), hand anything else to the DOM, and
// decode_manifest must agree with decode_manifest_dom on every input, valid or not.
#include "ckpt/format/manifest_scan.h"

#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace ckpt::manifest_scan_test {
namespace {

// A manifest with every kind of entry: plain, empty, a box, chunk digests, both.
Manifest sample() {
  Manifest m;
  m.file = "rank-00001.h5";
  m.step = 1234567;
  m.rank = 1;
  m.world_size = 4;
  m.attrs_xxh3 = 0x0123456789abcdefull;
  m.file_xxh3 = 0xfedcba9876543210ull;
  m.regions_xxh3 = 0x1ull;
  uint64_t at = 4096;
  auto add = [&](const std::string& path, DType dt, std::vector<int64_t> shape, uint64_t nbytes) {
    ManifestEntry e{path, dt, std::move(shape), at, nbytes, at * 7919, std::nullopt, 0, {}};
    at += (nbytes + 4095) / 4096 * 4096;
    m.tensors.push_back(std::move(e));
    return &m.tensors.back();
  };
  add("/model/fc1.weight", DType::kFloat32, {64, 16}, 4096);
  add("/model/empty", DType::kFloat32, {0}, 0)->offset = 0;
  add("/optimizer/state/0/step", DType::kInt64, {}, 8);
  ManifestEntry* box = add("/model/layers.0.w", DType::kBFloat16, {3, 8192}, 3 * 8192 * 2);
  box->box = BoxOf{{12, 8192}, {3, 0}, "sharded", -1};
  box->chunk_bytes = 16384;
  box->chunk_xxh3 = {1, 2, 3};
  ManifestEntry* rep = add("/model/norm", DType::kFloat16, {10000}, 20000);
  rep->box = BoxOf{{10000}, {0}, "replicated", -1};
  ManifestEntry* chunks = add("/model/embed", DType::kUInt8, {9000}, 9000);
  chunks->chunk_bytes = 4096;
  chunks->chunk_xxh3 = {0xaaaaaaaaaaaaaaaaull, 0xbull, 0xcull};
  m.file_bytes = at + 4096;
  return m;
}

// Every field, through the canonical encoding (encode_manifest writes them all).
std::string canonical(const Result<Manifest>& m) {
  return m.is_ok() ? encode_manifest(*m) : "error: " + m.status().to_string();
}

// The same JSON with every object's keys in reverse order and another indentation.
std::string reordered(const std::string& text) {
  using ordered = nlohmann::ordered_json;
  std::function<ordered(const ordered&)> flip = [&](const ordered& j) -> ordered {
    if (j.is_object()) {
      ordered out = ordered::object();
      std::vector<std::string> keys;
      for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
      for (auto k = keys.rbegin(); k != keys.rend(); ++k) out[*k] = flip(j.at(*k));
      return out;
    }
    if (j.is_array()) {
      ordered out = ordered::array();
      for (const auto& v : j) out.push_back(flip(v));
      return out;
    }
    return j;
  };
  return flip(ordered::parse(text)).dump(3);
}

TEST_CASE("scan_manifest reads what encode_manifest writes, in any key order and layout",
          "[format]") {
  const std::string text = encode_manifest(sample());
  for (const std::string& t : {text, reordered(text), nlohmann::json::parse(text).dump()}) {
    INFO(t.substr(0, 200));
    REQUIRE(scan_manifest(t).has_value());  // the fast path, not the DOM
    const Result<Manifest> fast = decode_manifest(t, "m.json");
    REQUIRE(fast.is_ok());
    CHECK(canonical(fast) == text);
    CHECK(canonical(decode_manifest_dom(t, "m.json")) == text);
  }
  // Older manifests: no file_xxh3, regions_xxh3, boxes or chunks.
  Manifest old = sample();
  old.file_xxh3.reset();
  old.regions_xxh3.reset();
  for (auto& e : old.tensors) {
    e.box.reset();
    e.chunk_bytes = 0;
    e.chunk_xxh3.clear();
  }
  REQUIRE(scan_manifest(encode_manifest(old)).has_value());
  CHECK(canonical(decode_manifest(encode_manifest(old), "m.json")) == encode_manifest(old));
}

TEST_CASE("scan_manifest leaves every other JSON to nlohmann, which decodes it alike", "[format]") {
  const std::string text = encode_manifest(sample());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  const std::vector<std::string> others = {
      with("\"/model/fc1.weight\"", "\"/model/fc1.w\\u0065ight\""),      // an escape
      with("\"/model/fc1.weight\"", "\"/model/f\xc3\xa9\""),             // UTF-8
      with("\"rank\": 1", "\"rank\": 1, \"note\": [1, {\"a\": null}]"),  // a key it does not know
      with("\"rank\": 1", "\"rank\": 2, \"rank\": 1"),              // a key twice (the last wins)
      with("\"step\": 1234567", "\"step\": 1.234567e6"),            // a number that is a float
      with("\"step\": 1234567", "\"step\": 99999999999999999999"),  // beyond 64 bits
      with("\"rank\": 1", "\"rank\": 18446744073709551615"),        // above int64: nlohmann wraps
      "\xef\xbb\xbf" + text,                                        // a byte order mark
      with("\"format\": \"ckpt-manifest\"", "\"format\": \"other\""),
      with("\"version\": 1", "\"version\": 2"),
      with("\"offset\": 4096", "\"offset\": \"4096\""),
      text + "x",
  };
  for (const std::string& t : others) {
    INFO(t.substr(0, 300));
    CHECK_FALSE(scan_manifest(t).has_value());
    CHECK(canonical(decode_manifest(t, "m.json")) == canonical(decode_manifest_dom(t, "m.json")));
  }
  // The escaped path decodes to the same name, the duplicate key to its last value.
  auto escaped = decode_manifest(others[0], "m.json");
  REQUIRE(escaped.is_ok());
  CHECK(escaped->tensors[0].path == "/model/fc1.weight");
  auto twice = decode_manifest(others[3], "m.json");
  REQUIRE(twice.is_ok());
  CHECK(twice->rank == 1);
}

TEST_CASE("the fast and the DOM path agree on broken manifests: errors word for word", "[format]") {
  // Well-formed JSON with bad values: the fast path reads it, the checks refuse it.
  const std::string text = encode_manifest(sample());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    return t.replace(t.find(from), from.size(), to);
  };
  for (const std::string& t :
       {with("\"dtype\": \"float32\"", "\"dtype\": \"float33\""),
        with("\"nbytes\": 4096", "\"nbytes\": 4095"), with("\"offset\": 4096", "\"offset\": 4097"),
        with("\"placement\": \"sharded\"", "\"placement\": \"diagonal\""),
        with("\"bytes\": 16384", "\"bytes\": 16385"),
        with("\"path\": \"/model/norm\"", "\"path\": \"/model/embed\"")}) {
    INFO(t.substr(0, 300));
    REQUIRE(scan_manifest(t).has_value());
    const Result<Manifest> fast = decode_manifest(t, "m.json");
    REQUIRE_FALSE(fast.is_ok());
    CHECK(fast.status().to_string() == decode_manifest_dom(t, "m.json").status().to_string());
  }
  // Well-formed values at the edges of what the fast path reads: both paths, the same manifest.
  for (const std::string& t :
       {with("\"rank\": 1", "\"rank\": -1"), with("\"step\": 1234567", "\"step\": -0"),
        with("\"world_size\": 4", "\"world_size\": 9223372036854775807"),
        with("\"step\": 1234567", "\"step\": -9223372036854775807"),
        with("\"file\": \"rank-00001.h5\"", "\"file\": \"\"")}) {
    INFO(t.substr(0, 300));
    REQUIRE(scan_manifest(t).has_value());
    CHECK(canonical(decode_manifest(t, "m.json")) == canonical(decode_manifest_dom(t, "m.json")));
  }
  CHECK(decode_manifest(with("\"rank\": 1", "\"rank\": -1"), "m.json")->rank == -1);
  // Random damage: flipped, dropped and inserted bytes, a few at a time.
  std::mt19937_64 rng(20261206);
  const std::string alphabet = "{}[]:,\" 0123456789-.eE\\abcdefxyz/\n\x80\xff";
  const std::string bases[] = {text, reordered(text)};
  size_t fast_ok = 0, agreed = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string t = bases[round % 2];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits && !t.empty(); ++k) {
      const size_t at = rng() % t.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 4) {
        case 0:
          t[at] = c;
          break;
        case 1:
          t.erase(at, 1 + rng() % 4);
          break;
        case 2:
          t.insert(at, 1, c);
          break;
        default: {  // a number's sign or digits: the integers' edges
          const size_t digit = t.find_first_of("0123456789", at);
          if (digit != std::string::npos) t.insert(digit, rng() % 2 ? "-" : "0");
        }
      }
    }
    const Result<Manifest> fast = decode_manifest(t, "m.json");
    const Result<Manifest> dom = decode_manifest_dom(t, "m.json");
    INFO(t);
    REQUIRE(canonical(fast) == canonical(dom));
    ++agreed;
    if (scan_manifest(t).has_value()) ++fast_ok;
  }
  CHECK(agreed == 4000);
  CHECK(fast_ok > 100);  // the damage left many readable by the fast path: both paths compared
}

}  // namespace
}  // namespace ckpt::manifest_scan_test
