// The restore over a remote store (ReadProfile::remote): more reads in flight, and a check-first
// restore that downloads the file once (resume/read_cache.h) instead of twice, with the same bytes
// in every destination as on a local disk.
#include <atomic>
#include <catch2/catch.hpp>
#include <random>

#include "ckpt/store/rank_io.h"
#include "resume/pipeline.h"
#include "resume/read_cache.h"
#include "resume/restore.h"
#include "resume_test_util.h"
#include "tests/common/remote_env.h"

namespace ckpt::resume::remote_restore_test {
namespace {

using testing::byte_sum;
using testing::ByteSum;
using testing::CountedRemote;
using testing::RemoteEnv;

using Saved = resume_test::SavedRank;
constexpr auto save = resume_test::save_varied;

// Every model and optimizer tensor into caller memory (as the Python Checkpointer restores).
std::map<std::string, std::vector<unsigned char>> destinations(const Manifest& m,
                                                               RestoreOptions* o) {
  std::map<std::string, std::vector<unsigned char>> out;
  for (const auto& e : m.tensors) {
    if (e.path.rfind("/model/", 0) != 0 && e.path.rfind("/optimizer/", 0) != 0) continue;
    out[e.path].assign(e.nbytes, 0xAB);
  }
  for (auto& [path, b] : out) o->destinations[path] = {b.data(), b.size()};
  return out;
}

TEST_CASE("a check-first restore from a remote store reads the file once", "[resume]") {
  Saved s;
  save(&s);
  auto run = [&](ReadProfile profile, uint64_t* read, RestoreStats* stats) {
    RemoteEnv env(profile);
    RestoreOptions o;
    o.check_first = true;
    o.chunk_bytes = 65536;
    auto d = destinations(s.manifest, &o);
    auto got = restore_rank(&env, s.dir.path(), 0, o, stats);
    INFO(got.status().to_string());
    REQUIRE(got.is_ok());
    *read = env.read.load();
    return d;
  };
  uint64_t local = 0, remote = 0, in_place = 0;
  RestoreStats ls, rs;
  auto want = run(ReadProfile{}, &local, &ls);
  auto got = run(ReadProfile{6, 0, true}, &remote, &rs);
  REQUIRE(got == want);
  for (const auto& [path, b] : want) in_place += b.size();
  REQUIRE(in_place > 0);
  // The local restore reads the in-place tensors twice; the remote one once.
  REQUIRE(remote + in_place <= local);
  REQUIRE(rs.read_bytes == ls.read_bytes);  // the restore still made both passes
}

TEST_CASE("a check-first restore from a remote store keeps only what its second read needs",
          "[resume]") {
  Saved s;
  save(&s);
  auto run = [&](bool optimizer_fresh, RestoreStats* stats) {
    RemoteEnv env(ReadProfile{6, 0, true});
    RestoreOptions o;
    o.check_first = true;
    o.chunk_bytes = 65536;
    auto d = destinations(s.manifest, &o);
    for (auto& [path, span] : o.destinations) {
      span.fresh = optimizer_fresh && path.rfind("/optimizer/", 0) == 0;
    }
    auto got = restore_rank(&env, s.dir.path(), 0, o, stats);
    INFO(got.status().to_string());
    REQUIRE(got.is_ok());
    return d;
  };
  RestoreStats live, fresh;
  auto want = run(false, &live);
  auto got = run(true, &fresh);
  REQUIRE(got == want);
  uint64_t model = 0, optimizer = 0;
  for (const auto& [path, b] : want)
    (path.rfind("/model/", 0) == 0 ? model : optimizer) += b.size();
  REQUIRE(optimizer > 0);
  REQUIRE(live.cached_bytes >= model + optimizer);  // every destination's bytes, kept
  REQUIRE(fresh.cached_bytes >= model);
  REQUIRE(fresh.cached_bytes + optimizer / 2 <= live.cached_bytes);  // less what pads
}

TEST_CASE("ReadCache::keep_only holds the wanted ranges and still serves every byte", "[resume]") {
  std::string bytes(1 << 18, '\0');
  std::mt19937 g(11);
  for (char& c : bytes) c = static_cast<char>(g());
  auto base = memory_file("mem", bytes);
  ReadCache cache(*base, uint64_t{1} << 30);
  cache.keep_only({{5000, 9000}, {100, 200}, {8000, 12000}, {70000, 70000}});  // 100 + 7000
  std::string all(bytes.size(), '\0');
  REQUIRE(cache.read_at(0, all.data(), all.size()).is_ok());
  REQUIRE(all == bytes);
  REQUIRE(cache.held_bytes() == 7100);
  std::string part(7000, '\0');
  const uint64_t misses = cache.misses();
  REQUIRE(cache.read_at(5000, part.data(), part.size()).is_ok());
  REQUIRE(part == bytes.substr(5000, 7000));
  REQUIRE(cache.misses() == misses);  // served from memory
  REQUIRE(cache.read_at(4000, part.data(), part.size()).is_ok());
  REQUIRE(part == bytes.substr(4000, 7000));
  REQUIRE(cache.misses() == misses + 1000);  // [4000, 5000) was not kept
}

TEST_CASE("a damaged tensor on a remote store is refused before any destination is written",
          "[resume]") {
  Saved s;
  save(&s);
  const ManifestEntry& last = *std::max_element(
      s.manifest.tensors.begin(), s.manifest.tensors.end(),
      [](const ManifestEntry& a, const ManifestEntry& b) { return a.offset < b.offset; });
  resume_test::flip_bit(path_join(s.dir.path(), rank_file_name(0)), last.offset + last.nbytes - 1);
  RemoteEnv env(ReadProfile{6, 0, true});
  RestoreOptions o;
  o.check_first = true;
  auto d = destinations(s.manifest, &o);
  auto got = restore_rank(&env, s.dir.path(), 0, o);
  REQUIRE(got.status().code() == Code::kCorrupt);
  for (const auto& [path, b] : d) REQUIRE(b == std::vector<unsigned char>(b.size(), 0xAB));
}

// A GET lands in parts (CountedRemote shows them in uneven sizes, ending anywhere): the pipeline
// hashes each part as it lands, so the bytes must be the local restore's, and a flipped byte in
// any tensor must still be found, named, wherever the parts end.
TEST_CASE("a restore from a remote store hashes each part of a read as it lands", "[resume]") {
  Saved s;
  save(&s);
  auto run = [&](ReadProfile profile, bool check_first, Status* status, uint64_t* parts) {
    RemoteEnv env(profile);
    RestoreOptions o;
    o.check_first = check_first;
    o.chunk_bytes = 65536;
    auto d = destinations(s.manifest, &o);
    auto got = restore_rank(&env, s.dir.path(), 0, o);
    *status = got.status();
    *parts = env.parts.load();
    return d;
  };
  for (bool check_first : {false, true}) {
    INFO("check_first " << check_first);
    Status st;
    uint64_t local_parts = 0, remote_parts = 0;
    auto want = run(ReadProfile{}, check_first, &st, &local_parts);
    REQUIRE(st.is_ok());
    auto got = run(ReadProfile{6, 0, true}, check_first, &st, &remote_parts);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
    REQUIRE(got == want);
    CHECK(local_parts > 20);  // ~2 MB in parts of ~36 KB on average
    CHECK(remote_parts > 20);
  }
  const std::string file = path_join(s.dir.path(), rank_file_name(0));
  int damaged = 0;
  for (const ManifestEntry& e : s.manifest.tensors) {
    if (e.nbytes == 0) continue;
    for (uint64_t at : {uint64_t{0}, e.nbytes / 2, e.nbytes - 1}) {
      INFO(e.path << " byte " << at);
      resume_test::flip_bit(file, e.offset + at);
      Status st;
      uint64_t parts = 0;
      run(ReadProfile{6, 0, true}, false, &st, &parts);
      resume_test::flip_bit(file, e.offset + at);  // back
      REQUIRE(st.code() == Code::kCorrupt);
      REQUIRE(st.message().find("\"" + e.path + "\"") != std::string::npos);
      ++damaged;
    }
  }
  REQUIRE(damaged > 100);
}

TEST_CASE("a file shows the range it reads once, whole, unless it receives it in parts",
          "[resume]") {
  std::string bytes(100000, '\0');
  std::mt19937 g(9);
  for (char& c : bytes) c = static_cast<char>(g());
  auto mem = memory_file("mem", bytes);
  struct Shown {
    std::vector<std::pair<const unsigned char*, size_t>> parts;
    static void run(const unsigned char* b, size_t n, void* arg) {
      static_cast<Shown*>(arg)->parts.emplace_back(b, n);
    }
  };
  std::string out(60000, '\0');
  Shown whole;
  REQUIRE(mem->read_visiting(1000, out.data(), out.size(), &Shown::run, &whole).is_ok());
  REQUIRE(out == bytes.substr(1000, out.size()));
  REQUIRE(whole.parts.size() == 1);
  CHECK(whole.parts[0].first == reinterpret_cast<const unsigned char*>(out.data()));
  CHECK(whole.parts[0].second == out.size());
  std::atomic<uint64_t> read{0};
  CountedRemote remote(memory_file("r", bytes), &read, ReadProfile{4, 0, true});
  Shown parts;
  std::string again(60000, '\0');
  REQUIRE(remote.read_visiting(1000, again.data(), again.size(), &Shown::run, &parts).is_ok());
  REQUIRE(again == out);
  REQUIRE(parts.parts.size() > 1);
  const auto* next = reinterpret_cast<const unsigned char*>(again.data());
  for (const auto& [b, n] : parts.parts) {  // consecutive, in order, together the range
    REQUIRE(b == next);
    next += n;
  }
  CHECK(next == reinterpret_cast<const unsigned char*>(again.data()) + again.size());
  CHECK(mem->read_visiting(99000, out.data(), 2000, &Shown::run, &whole).code() == Code::kCorrupt);
}

// The checking read of a check-first restore from a store: what the second read wants is
// downloaded straight into a block it keeps, and visited there.
TEST_CASE("ReadCache::visit_at downloads a wanted range into a block it keeps, else declines",
          "[resume]") {
  std::string bytes(1 << 18, '\0');
  std::mt19937 g(5);
  for (char& c : bytes) c = static_cast<char>(g());
  auto base = memory_file("mem", bytes);
  ReadCache cache(*base, uint64_t{1} << 30);
  cache.keep_only({{0, 100000}});
  ByteSum sum;
  auto got = cache.visit_at(1000, 50000, &ByteSum::run, &sum);
  REQUIRE(got.is_ok());
  REQUIRE(*got);
  CHECK(sum.sum == byte_sum(bytes, 1000, 50000));
  CHECK(cache.held_bytes() == 50000);
  CHECK(cache.misses() == 50000);
  ByteSum again;  // inside the block: visited there, nothing read
  REQUIRE(cache.visit_at(2000, 1000, &ByteSum::run, &again).value());
  CHECK(again.sum == byte_sum(bytes, 2000, 1000));
  CHECK(cache.misses() == 50000);
  std::string out(50000, '\0');
  REQUIRE(cache.read_at(1000, out.data(), out.size()).is_ok());
  CHECK(out == bytes.substr(1000, 50000));
  CHECK(cache.misses() == 50000);  // the second read: from the block
  ByteSum no;
  CHECK_FALSE(cache.visit_at(90000, 20000, &ByteSum::run, &no).value());  // partly unwanted
  CHECK_FALSE(cache.visit_at(40000, 20000, &ByteSum::run, &no).value());  // partly held
  CHECK_FALSE(cache.visit_at(bytes.size() - 10, 20, &ByteSum::run, &no).value());  // outside
  CHECK(no.sum == 0);
  ReadCache small(*base, 1000);
  CHECK_FALSE(small.visit_at(0, 5000, &ByteSum::run, &no).value());  // over the budget
  CHECK(small.held_bytes() == 0);

  // The second read, streamed into its destinations: from the block and, past it, the file.
  std::vector<unsigned char> a(70000), b(120000);
  const ReadSpan spans[] = {{a.data(), a.size()}, {b.data(), b.size()}};
  REQUIRE(cache.read_scatter_streaming(900, spans, 2).is_ok());
  CHECK(std::string(a.begin(), a.end()) == bytes.substr(900, a.size()));
  CHECK(std::string(b.begin(), b.end()) == bytes.substr(900 + a.size(), b.size()));
  CHECK(cache.misses() == 50000 + 100 + (900 + a.size() + b.size() - 51000));
}

TEST_CASE("ReadCache serves any range bit-exact whatever it holds", "[resume]") {
  std::string bytes(1 << 20, '\0');
  std::mt19937 g(7);
  for (char& c : bytes) c = static_cast<char>(g());
  auto base = memory_file("mem", bytes);
  for (uint64_t budget : {uint64_t{0}, uint64_t{100000}, uint64_t{1} << 21}) {
    ReadCache cache(*base, budget);
    for (int i = 0; i < 400; ++i) {
      const uint64_t off = g() % bytes.size();
      const size_t n = g() % std::min<uint64_t>(70000, bytes.size() - off);
      std::string out(n, '\0');
      REQUIRE(cache.read_at(off, out.data(), n).is_ok());
      REQUIRE(out == bytes.substr(off, n));
    }
    REQUIRE(cache.held_bytes() <= budget);
    if (budget == 0) REQUIRE(cache.hits() == 0);
    if (budget > bytes.size()) REQUIRE(cache.hits() > 0);
    std::string tail(10, '\0');
    REQUIRE(cache.read_at(bytes.size() - 5, tail.data(), 10).code() == Code::kCorrupt);
  }
}

TEST_CASE("a remote file gets the reads in flight it asks for unless the caller says", "[resume]") {
  auto mem = memory_file("mem", "abc");
  std::atomic<uint64_t> read{0};
  CountedRemote remote(memory_file("r", "abc"), &read, ReadProfile{40, 0, true});
  REQUIRE(io_threads_for(*mem, 0) == default_io_threads());
  REQUIRE(io_threads_for(remote, 0) == std::max(40u, default_io_threads()));
  REQUIRE(io_threads_for(remote, 3) == 3);
}

}  // namespace
}  // namespace ckpt::resume::remote_restore_test
