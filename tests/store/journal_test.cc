// The journal on an object store is kept in segments (ckpt/store/journal.h): each durable event
// writes the newest segment only, whatever the run's length, and a reader gets every event in
// order, also after a roll-over cut short. MemEnv stands in for the store (open_segmented).
#include "ckpt/store/journal.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ckpt/io/mem_env.h"

namespace ckpt::journal_test {
namespace {

using store::JournalEventType;

std::vector<int64_t> steps_of(Env* env, const std::string& run) {
  auto lines = store::read_journal(env, run);
  REQUIRE(lines.is_ok());
  std::vector<int64_t> out;
  for (const auto& j : *lines) out.push_back(j["step"].get<int64_t>());
  return out;
}

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t k = from; k < to; ++k) out.push_back(k);
  return out;
}

TEST_CASE("a segmented journal writes only its newest segment and reads back whole, in order",
          "[store]") {
  MemEnv env;
  constexpr uint64_t kLimit = 1000;
  uint64_t largest_tail = 0;
  {
    auto j = store::Journal::open_segmented(&env, "/run", kLimit);
    REQUIRE(j.is_ok());
    for (int64_t step = 0; step < 100; ++step) {
      const bool durable = step % 7 == 0;
      REQUIRE((*j)->append(durable ? JournalEventType::kSave : JournalEventType::kProgress,
                           {{"step", step}, {"loss", 0.5}}, durable)
                  .is_ok());
      auto tail = env.read_all("/run/journal.jsonl", 1 << 20);
      if (tail.is_ok()) largest_tail = std::max<uint64_t>(largest_tail, tail->size());
    }
  }                              // the last progress events are written when the journal closes
  CHECK(largest_tail < kLimit);  // a durable event writes the tail only, never the whole journal
  REQUIRE(env.exists("/run/" + store::journal_segment_name(5)));
  CHECK_FALSE(env.exists("/run/" + store::journal_segment_name(20)));
  REQUIRE(steps_of(&env, "/run") == range(0, 100));

  // Reopened: numbering goes on from the tail's marker, nothing is lost or repeated.
  {
    auto j = store::Journal::open_segmented(&env, "/run", kLimit);
    REQUIRE(j.is_ok());
    for (int64_t step = 100; step < 150; ++step) {
      REQUIRE((*j)->append(JournalEventType::kProgress, {{"step", step}}, step == 149).is_ok());
    }
  }
  REQUIRE(steps_of(&env, "/run") == range(0, 150));
  size_t segments = 0;
  while (env.exists("/run/" + store::journal_segment_name(segments + 1))) ++segments;
  CHECK(segments >= 8);
  for (size_t k = 1; k <= segments; ++k) {
    auto seg = env.read_all("/run/" + store::journal_segment_name(k), 1 << 20);
    REQUIRE(seg.is_ok());
    CHECK(seg->size() >= kLimit);       // a segment is closed at the limit …
    CHECK(seg->size() < kLimit + 200);  // … by the event that reached it
  }
}

TEST_CASE("a journal roll-over cut short reads the same, and the next writer finishes it",
          "[store]") {
  MemEnv env;
  {
    auto j = store::Journal::open_segmented(&env, "/run", 400);
    REQUIRE(j.is_ok());
    for (int64_t step = 0; step < 12; ++step) {
      REQUIRE((*j)->append(JournalEventType::kProgress, {{"step", step}}, true).is_ok());
    }
  }
  const auto before = steps_of(&env, "/run");
  REQUIRE(before == range(0, 12));
  REQUIRE(env.exists("/run/" + store::journal_segment_name(1)));
  // A writer stopped inside a roll-over, after the segment and before the new tail: the tail
  // (grown past the limit) and the next segment hold the same bytes.
  uint64_t next = 1;
  while (env.exists("/run/" + store::journal_segment_name(next))) ++next;
  auto tail = env.read_all("/run/journal.jsonl", 1 << 20);
  REQUIRE(tail.is_ok());
  std::string grown = *tail;
  while (grown.size() < 400) grown += "{\"event\":\"progress\",\"time\":1,\"step\":99}\n";
  REQUIRE(env.write_atomic("/run/journal.jsonl", grown).is_ok());
  REQUIRE(env.write_atomic("/run/" + store::journal_segment_name(next), grown).is_ok());
  const auto cut = steps_of(&env, "/run");
  REQUIRE(cut.size() > before.size());
  {
    auto j = store::Journal::open_segmented(&env, "/run", 400);  // rolls the tail over
    REQUIRE(j.is_ok());
    REQUIRE((*j)->append(JournalEventType::kSave, {{"step", 1000}}, true).is_ok());
  }
  auto after = steps_of(&env, "/run");
  REQUIRE(after.size() == cut.size() + 1);
  CHECK(std::equal(cut.begin(), cut.end(), after.begin()));
  CHECK(after.back() == 1000);
  CHECK(env.exists("/run/" + store::journal_segment_name(next)));
  CHECK_FALSE(env.exists("/run/" + store::journal_segment_name(next + 1)));
}

TEST_CASE("a journal written whole before segments becomes the first segment", "[store]") {
  MemEnv env;
  std::string old;
  for (int step = 0; step < 50; ++step) {
    old += "{\"event\":\"progress\",\"time\":1,\"step\":" + std::to_string(step) + "}\n";
  }
  REQUIRE(env.make_dirs("/run").is_ok());
  REQUIRE(env.write_atomic("/run/journal.jsonl", old).is_ok());
  {
    auto j = store::Journal::open_segmented(&env, "/run", 500);
    REQUIRE(j.is_ok());
    REQUIRE((*j)->append(JournalEventType::kProgress, {{"step", 50}}, true).is_ok());
  }
  auto seg = env.read_all("/run/" + store::journal_segment_name(1), 1 << 20);
  REQUIRE(seg.is_ok());
  CHECK(*seg == old);
  REQUIRE(steps_of(&env, "/run") == range(0, 51));
}

TEST_CASE("a missing journal segment is an error naming it", "[store]") {
  MemEnv env;
  {
    auto j = store::Journal::open_segmented(&env, "/run", 200);
    REQUIRE(j.is_ok());
    for (int64_t step = 0; step < 20; ++step) {
      REQUIRE((*j)->append(JournalEventType::kProgress, {{"step", step}}, true).is_ok());
    }
  }
  REQUIRE(env.remove_file("/run/" + store::journal_segment_name(2)).is_ok());
  auto lines = store::read_journal(&env, "/run");
  REQUIRE(lines.status().code() == Code::kNotFound);
  CHECK(lines.status().message().find(store::journal_segment_name(2)) != std::string::npos);
  CHECK(lines.status().message().find("segment 2 of") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::journal_test
