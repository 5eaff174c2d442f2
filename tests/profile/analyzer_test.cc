// Synthetic series for the analyzer's edge cases: noise without a period, equal ranks, a hung
// tail, CPU- and I/O-bound loaders, tokens, and the scale prediction.
#include "profile/analyze/analyzer.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "profile/analyze/report_render.h"
#include "profile/analyze/series_stats.h"

namespace ckpt::profile::analyzer_test {
namespace {

RankTrace make_rank(int rank, size_t n, double base, double noise, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd(0, noise);
  RankTrace t;
  t.rank = rank;
  t.world_size = 1;
  double now = 0;
  for (size_t i = 0; i < n; ++i) {
    StepRecord s;
    s.step = static_cast<int64_t>(i);
    s.start_s = now;
    s.duration_s = std::max(base * 0.5, base + nd(gen));
    s.phase_s[index(Phase::kForward)] = s.duration_s * 0.4;
    s.phase_s[index(Phase::kBackward)] = s.duration_s * 0.5;
    now += s.duration_s;
    t.steps.push_back(s);
  }
  t.end_s = now;
  return t;
}

std::set<std::string> ids(const Report& r) {
  std::set<std::string> out;
  for (const auto& v : r.verdicts) out.insert(v.id());
  return out;
}

TEST_CASE("periodicity: a period is found, noise and random spikes give none", "[profile]") {
  std::mt19937 gen(7);
  std::normal_distribution<double> nd(0, 0.01);
  std::vector<double> periodic, noise, random_spikes;
  std::uniform_int_distribution<int> coin(0, 99);
  for (int i = 0; i < 400; ++i) {
    periodic.push_back(1.0 + nd(gen) + (i % 7 == 3 ? 0.8 : 0));
    noise.push_back(1.0 + nd(gen));
    random_spikes.push_back(1.0 + nd(gen) + (coin(gen) < 4 ? 0.8 : 0));
  }
  auto p = detect_periodic_spikes(periodic, 0.25);
  REQUIRE(p.found);
  REQUIRE(p.period_steps == 7);
  REQUIRE_FALSE(detect_periodic_spikes(noise, 0.25).found);
  auto r = detect_periodic_spikes(random_spikes, 0.25);
  REQUIRE(r.spikes.size() >= 5);
  REQUIRE_FALSE(r.found);
}

TEST_CASE("periodicity: three spikes that fit a period, or a period in part of the run, are none",
          "[profile]") {
  // 30 steps of 7 ms, spikes of +50%: what a short healthy trace on a busy host shows.
  auto series = [](std::vector<size_t> at, size_t n) {
    std::vector<double> x(n, 0.007);
    for (size_t i = 0; i < n; ++i) x[i] += 0.0001 * double(i % 3);
    for (size_t i : at) x[i] *= 1.5;
    return x;
  };
  // Three random spikes 14 apart: a period of 14 with every place filled, but three is chance.
  auto three = detect_periodic_spikes(series({0, 14, 28}, 30), 0.25 * 0.007);
  CHECK(three.spikes.size() == 3);
  CHECK_FALSE(three.found);
  // Four, 7 apart over 30 steps: a period.
  auto four = detect_periodic_spikes(series({3, 10, 17, 24}, 30), 0.25 * 0.007);
  CHECK(four.found);
  CHECK(four.period_steps == 7);
  // The same four in a run of 90 steps: 9 places of that phase, 4 filled; no period.
  auto part = detect_periodic_spikes(series({3, 10, 17, 24}, 90), 0.25 * 0.007);
  CHECK(part.coverage < 0.5);
  CHECK_FALSE(part.found);
}

TEST_CASE("noise without a period gives no periodic_stall, a period with eval does", "[profile]") {
  RankTrace t = make_rank(0, 300, 0.1, 0.01, 1);
  auto quiet = analyze({t});
  REQUIRE(quiet.is_ok());
  REQUIRE(ids(*quiet).count("periodic_stall") == 0);
  REQUIRE(quiet->verdicts.front().id() == "compute_bound");
  for (size_t i = 10; i < t.steps.size(); i += 25) {
    t.steps[i].phase_s[index(Phase::kEval)] = 0.3;
    t.steps[i].duration_s += 0.3;
  }
  auto stalled = analyze({t});
  REQUIRE(stalled.is_ok());
  const Verdict& v = stalled->verdicts.front();
  REQUIRE(v.id() == "periodic_stall");
  REQUIRE(v.period_steps == 25);
  REQUIRE(v.evidence["cause"] == "eval");
  // Start times were generated before the stalls were added: 25 steps of ~0.1 s apart.
  REQUIRE(v.evidence["period_s"].get<double>() == Approx(25 * 0.1).epsilon(0.05));
}

TEST_CASE("equal ranks give no straggler, a slow rank is named", "[profile]") {
  std::vector<RankTrace> ranks;
  for (int r = 0; r < 4; ++r) {
    RankTrace t = make_rank(r, 200, 0.1, 0.005, 100 + r);
    for (auto& s : t.steps) s.phase_s[index(Phase::kCollective)] = 0.01 + 0.002 * (s.step % 3);
    ranks.push_back(t);
  }
  auto equal = analyze(ranks);
  REQUIRE(equal.is_ok());
  REQUIRE(ids(*equal).count("straggler") == 0);
  // Rank 2 computes 30 ms longer; the others wait for it inside the all-reduce.
  for (int r = 0; r < 4; ++r) {
    for (auto& s : ranks[r].steps) {
      s.phase_s[index(Phase::kCollective)] = r == 2 ? 0.004 : 0.034;
    }
  }
  auto slow = analyze(ranks);
  REQUIRE(slow.is_ok());
  REQUIRE(slow->verdicts.front().id() == "straggler");
  REQUIRE(slow->verdicts.front().rank == 2);
  REQUIRE(report_json(*slow)["verdicts"][0]["rank"] == 2);
}

TEST_CASE("a hung tail gives hung, first, with the phase it is stuck in", "[profile]") {
  RankTrace t = make_rank(0, 100, 0.05, 0.002, 3);
  double last_end = t.end_s;
  for (int i = 1; i <= 30; ++i) {
    t.cpu.push_back({last_end + 0.1 * i, 0.05, 0.0, 0.01, 100, index(Phase::kCollective)});
  }
  t.end_s = last_end + 3.0;
  auto rep = analyze({t});
  REQUIRE(rep.is_ok());
  REQUIRE(rep->verdicts.front().id() == "hung");
  REQUIRE(rep->verdicts.front().evidence["ranks"][0]["stuck_in_phase"] == "collective");
  t.clean_end = true;  // the same tail after a clean close is the process exiting, not a hang
  REQUIRE(ids(*analyze({t})).count("hung") == 0);
  auto healthy = analyze({make_rank(0, 100, 0.05, 0.002, 3)});
  REQUIRE(ids(*healthy).count("hung") == 0);
}

TEST_CASE("input-bound with host CPU: saturated means CPU-bound, idle means I/O-bound",
          "[profile]") {
  RankTrace t = make_rank(0, 100, 0.1, 0.002, 4);
  for (auto& s : t.steps) {
    s.phase_s[index(Phase::kDataWait)] = 0.03;
    s.phase_s[index(Phase::kForward)] = 0.03;
    s.samples = 64;
  }
  for (int i = 0; i < 50; ++i) t.cpu.push_back({0.1 * i, 0.95, 0.0, 0.2, i, 0});
  auto cpu = analyze({t});
  REQUIRE(cpu.is_ok());
  REQUIRE(cpu->verdicts[0].id() == "input_bound");
  REQUIRE(cpu->verdicts[0].evidence["level"] == "high");
  REQUIRE(cpu->verdicts[1].id() == "cpu_bound_loader");
  REQUIRE(cpu->measured_budget.has_value());
  REQUIRE(cpu->measured_budget->predicted_utilisation == Approx(0.7).epsilon(0.02));
  for (auto& c : t.cpu) {
    c.host_busy = 0.2;
    c.host_iowait = 0.5;
  }
  auto io = analyze({t});
  REQUIRE(io->verdicts[1].id() == "io_bound_loader");
  for (auto& s : t.steps) s.phase_s[index(Phase::kDataWait)] = 0.01;  // 10%: moderate
  auto moderate = analyze({t});
  REQUIRE(moderate->verdicts[0].evidence["level"] == "moderate");
  for (auto& s : t.steps) s.phase_s[index(Phase::kDataWait)] = 0.003;  // 3%: not input-bound
  REQUIRE(ids(*analyze({t})).count("input_bound") == 0);
  // 8% of the time in all, but all of it in a fifth of the steps: slow batches, said in a note.
  for (auto& s : t.steps) s.phase_s[index(Phase::kDataWait)] = s.step % 5 == 0 ? 0.04 : 0.0;
  auto few = analyze({t});
  REQUIRE(few.is_ok());
  CHECK(ids(*few).count("input_bound") == 0);
  bool noted = false;
  for (const auto& n : few->notes) noted = noted || n.find("occasional slow batches") != n.npos;
  CHECK(noted);
  // The same total spread over half the steps: a starved loader.
  for (auto& s : t.steps) s.phase_s[index(Phase::kDataWait)] = s.step % 2 == 0 ? 0.016 : 0.0;
  CHECK(ids(*analyze({t})).count("input_bound") == 1);
}

TEST_CASE("a straggler whose lead is its own wait for data is said to be its input pipeline",
          "[profile]") {
  std::vector<RankTrace> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(make_rank(r, 100, 0.1, 0.002, 40 + r));
  for (int r = 0; r < 3; ++r) {
    for (auto& s : ranks[r].steps) {
      s.phase_s[index(Phase::kCollective)] = r == 1 ? 0.004 : 0.034;
      if (r == 1) s.phase_s[index(Phase::kDataWait)] = 0.03;  // rank 1's loader is the slow part
    }
  }
  auto rep = analyze(ranks);
  REQUIRE(rep.is_ok());
  REQUIRE(rep->verdicts.front().id() == "straggler");
  CHECK(rep->verdicts.front().rank == 1);
  CHECK(rep->verdicts.front().summary.find("the lead is its input pipeline") != std::string::npos);
  CHECK(rep->verdicts.front().evidence["cause"] == "its own input pipeline");
  // A straggler whose data wait is like the others' is not said to be its loader.
  for (auto& s : ranks[1].steps) s.phase_s[index(Phase::kDataWait)] = 0.0;
  auto device = analyze(ranks);
  REQUIRE(device.is_ok());
  REQUIRE(device->verdicts.front().id() == "straggler");
  CHECK(device->verdicts.front().summary.find("input pipeline") == std::string::npos);
}

TEST_CASE("step time following tokens: sequence_imbalance, and pageable copies", "[profile]") {
  RankTrace t = make_rank(0, 200, 0.1, 0.001, 5);
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> len(500, 2000);
  for (auto& s : t.steps) {
    s.tokens = len(gen);
    s.duration_s = 0.05 + 0.00005 * double(s.tokens);
    s.phase_s[index(Phase::kH2D)] = 0.005;
    s.pageable_h2d = 2;
  }
  auto rep = analyze({t});
  REQUIRE(rep.is_ok());
  auto got = ids(*rep);
  REQUIRE(got.count("sequence_imbalance") == 1);
  REQUIRE(got.count("pageable_h2d") == 1);
}

TEST_CASE("scale: 1 - (1 - p)^N at 2x and 4x the ranks", "[profile]") {
  std::vector<RankTrace> ranks;
  for (int r = 0; r < 2; ++r) {
    RankTrace t = make_rank(r, 100, 0.1, 0.0, 10 + r);
    for (size_t i = static_cast<size_t>(r); i < 100; i += 10) t.steps[i].duration_s = 0.3;
    ranks.push_back(t);
  }
  auto rep = analyze(ranks);
  REQUIRE(rep.is_ok());
  REQUIRE(rep->scale.p_slow == Approx(0.1));
  REQUIRE(rep->scale.predicted_2x == Approx(1 - std::pow(0.9, 4)));
  REQUIRE(rep->scale.predicted_4x == Approx(1 - std::pow(0.9, 8)));
  REQUIRE(rep->scale.observed_any_slow == Approx(0.2));
  REQUIRE(report_text(*rep).find("5. Scale") != std::string::npos);
  REQUIRE(report_svg(*rep).find("<polyline") != std::string::npos);
}

TEST_CASE("no steps at all is an error naming the input", "[profile]") {
  RankTrace t;
  t.source = "empty.jsonl";
  auto rep = analyze({t});
  REQUIRE(rep.status().code() == Code::kCorrupt);
  REQUIRE(rep.status().message().find("empty.jsonl") != std::string::npos);
}

TEST_CASE("collective_bound's impact is the share its summary gives, not a mean an outlier lifts",
          "[profile]") {
  std::vector<RankTrace> ranks;
  for (int r = 0; r < 2; ++r) {
    RankTrace t = make_rank(r, 60, 0.1, 0.0, 70);
    for (auto& s : t.steps) s.phase_s[index(Phase::kCollective)] = 0.015;  // 15% transfer
    ranks.push_back(t);
  }
  // One step where every rank sat 2 s inside the all-reduce (descheduled): not transfer.
  for (auto& t : ranks) {
    t.steps[30].phase_s[index(Phase::kCollective)] = 2.0;
    t.steps[30].duration_s = 2.1;
  }
  auto rep = analyze(ranks);
  REQUIRE(rep.is_ok());
  const Verdict* c = nullptr;
  for (const auto& v : rep->verdicts) {
    if (v.id() == "collective_bound") c = &v;
  }
  REQUIRE(c != nullptr);
  const double share = c->evidence["transfer_fraction"].get<double>();
  CHECK(share == Approx(0.15).margin(0.01));
  CHECK(c->impact == Approx(share).margin(1e-3));
  CHECK(c->evidence["mean_transfer_fraction"].get<double>() > share);  // what the mean said
}

}  // namespace
}  // namespace ckpt::profile::analyzer_test
