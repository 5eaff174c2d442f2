// End-to-end [dist] tests: W processes of ckpt-dist-demo on loopback, stopped, crashed, resumed in
// fresh processes (also with another world size), and a peer that dies or hangs.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/dist/launcher.h"

namespace {

using ckpt::dist_test::last_line;
using ckpt::dist_test::Launch;
using ckpt::dist_test::RankResult;
using ckpt::dist_test::read_text;

const std::string kDemo = std::string(CKPT_BINARY_DIR) + "/examples/dist/ckpt-dist-demo";
constexpr std::chrono::milliseconds kLaunchLimit{60000};
// Small and fast: 600 samples, 16 per rank per step; W=2 takes 19 steps per epoch.
const std::vector<std::string> kTask = {"--steps",        "60",  "--save-every", "10",
                                        "--dataset-size", "600", "--timeout-ms", "5000"};

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Runs one launch of `world` ranks that rendezvous through a fresh port file; `extra(r)` adds
// per-rank flags.
std::vector<RankResult> run_ranks(const std::string& work, const std::string& name, int world,
                                  const std::vector<std::string>& args,
                                  std::function<std::vector<std::string>(int)> extra = {}) {
  std::vector<std::vector<std::string>> argv;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> a = {kDemo,
                                  "--run-dir",
                                  work + "/run",
                                  "--rank",
                                  std::to_string(r),
                                  "--world-size",
                                  std::to_string(world),
                                  "--port-file",
                                  work + "/" + name + ".port"};
    a.insert(a.end(), args.begin(), args.end());
    if (extra) {
      auto more = extra(r);
      a.insert(a.end(), more.begin(), more.end());
    }
    argv.push_back(a);
  }
  Launch launch(argv, work + "/" + name);
  return launch.wait_all(kLaunchLimit);
}

std::string describe(const std::vector<RankResult>& rs) {
  std::string s;
  for (size_t r = 0; r < rs.size(); ++r) {
    s += "rank " + std::to_string(r) + " exit " + std::to_string(rs[r].exit_code) + "\n--- out\n" +
         rs[r].out + "--- err\n" + rs[r].err;
  }
  return s;
}

void require_success(const std::vector<RankResult>& rs) {
  INFO(describe(rs));
  for (const auto& r : rs) REQUIRE(r.exit_code == 0);
}

std::string final_digest(const std::vector<RankResult>& rs) {
  const std::string line = last_line(rs[0].out);
  REQUIRE(line.rfind("final_params_xxh3 ", 0) == 0);
  const std::string digest = line.substr(18);
  REQUIRE(digest.size() == 16);
  for (const auto& r : rs) REQUIRE(last_line(r.out) == line);  // every rank ends identical
  return digest;
}

std::vector<nlohmann::json> journal_events(const std::string& run, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(run + "/journal.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == kind) out.push_back(j);
  }
  return out;
}

// Every committed checkpoint has one rank file (and manifest) per rank of the run that wrote it,
// all listed in COMMIT.json.
void check_committed_checkpoints(const std::string& run, const std::map<int64_t, int>& world_at) {
  int committed = 0;
  for (const std::string& name : list_dir(run)) {
    if (name.rfind("step-", 0) != 0 || !exists(run + "/" + name + "/COMMIT.json")) continue;
    ++committed;
    const int64_t step = std::stoll(name.substr(5));
    auto commit = nlohmann::json::parse(read_text(run + "/" + name + "/COMMIT.json"));
    const int world = world_at.upper_bound(step - 1) == world_at.begin()
                          ? 0
                          : std::prev(world_at.upper_bound(step - 1))->second;
    INFO(name);
    REQUIRE(commit["body"]["world_size"] == world);
    std::set<std::string> listed;
    for (const auto& f : commit["body"]["files"]) listed.insert(f["name"].get<std::string>());
    for (int r = 0; r < world; ++r) {
      char file[32];
      std::snprintf(file, sizeof file, "rank-%05d.h5", r);
      REQUIRE(exists(run + "/" + name + "/" + file));
      REQUIRE(listed.count(file) == 1);
    }
    REQUIRE(listed.size() == static_cast<size_t>(2 * world));  // rank files and manifests
  }
  REQUIRE(committed >= 1);
}

// The sample ids each (epoch) received from the per-rank logs, keeping only the steps that counted:
// a segment's steps at or past the start of the next segment were replayed after a crash.
std::map<uint64_t, std::vector<int64_t>> effective_samples(const std::string& run) {
  struct Line {
    int64_t step;
    uint64_t epoch;
    std::vector<int64_t> ids;
  };
  std::map<int64_t, std::vector<Line>> by_segment;  // segment start step -> lines of all ranks
  for (const std::string& name : list_dir(run + "/samples")) {
    const int64_t start = std::stoll(name.substr(name.find("step-") + 5));
    std::istringstream in(read_text(run + "/samples/" + name));
    std::string text;
    while (std::getline(in, text)) {
      std::istringstream ls(text);
      Line l;
      uint64_t position;
      ls >> l.step >> l.epoch >> position;
      for (int64_t id; ls >> id;) l.ids.push_back(id);
      by_segment[start].push_back(l);
    }
  }
  std::map<uint64_t, std::vector<int64_t>> per_epoch;
  for (auto it = by_segment.begin(); it != by_segment.end(); ++it) {
    const auto next = std::next(it);
    const int64_t end = next == by_segment.end() ? INT64_MAX : next->first;
    for (const Line& l : it->second) {
      if (l.step >= end) continue;
      auto& v = per_epoch[l.epoch];
      v.insert(v.end(), l.ids.begin(), l.ids.end());
    }
  }
  return per_epoch;
}

void require_each_sample_once(const std::vector<int64_t>& ids, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (int64_t id : ids) {
    REQUIRE(id >= 0);
    REQUIRE(id < n);
    ++seen[static_cast<size_t>(id)];
  }
  for (int64_t id = 0; id < n; ++id) {
    INFO("sample " << id);
    REQUIRE(seen[static_cast<size_t>(id)] == 1);
  }
}

}  // namespace

TEST_CASE("two ranks stopped, crashed and resumed end bit-identical to an uninterrupted run",
          "[dist]") {
  const std::string ref = ckpt::dist_test::make_temp_dir("ckpt-dist-ref");
  const std::string chain = ckpt::dist_test::make_temp_dir("ckpt-dist-chain");
  REQUIRE_FALSE(ref.empty());
  REQUIRE_FALSE(chain.empty());

  auto uninterrupted = run_ranks(ref, "all", 2, kTask);
  require_success(uninterrupted);
  const std::string expected = final_digest(uninterrupted);

  // Stop at 25 (mid-epoch 1: step 19 began it), resume, crash at 47 (7 steps after the save at 40),
  // resume again: every segment in fresh processes.
  auto args = kTask;
  args.insert(args.end(), {"--stop-at", "25"});
  auto first = run_ranks(chain, "stop", 2, args);
  require_success(first);
  REQUIRE(first[0].out.find("stopped at step 25") != std::string::npos);

  args = kTask;
  args.insert(args.end(), {"--crash-at", "47"});
  auto crashed = run_ranks(chain, "crash", 2, args);
  {
    INFO(describe(crashed));
    for (const auto& r : crashed) REQUIRE(r.exit_code == 3);
    REQUIRE(crashed[0].out.find("restored step-000000000025") != std::string::npos);
  }

  auto last = run_ranks(chain, "last", 2, kTask);
  require_success(last);
  REQUIRE(last[0].out.find("restored step-000000000040") != std::string::npos);
  CHECK(final_digest(last) == expected);

  // Same LR, loss and batch at every step, replayed steps included.
  std::map<int64_t, nlohmann::json> ref_steps;
  for (const auto& e : journal_events(ref + "/run", "progress")) ref_steps[e["step"]] = e;
  const auto chain_progress = journal_events(chain + "/run", "progress");
  REQUIRE(chain_progress.size() == 60 + 7);
  for (const auto& e : chain_progress) {
    const auto& r = ref_steps.at(e["step"].get<int64_t>());
    INFO("step " << e["step"]);
    CHECK(e["lr"] == r["lr"]);
    CHECK(e["loss"] == r["loss"]);
    CHECK(e["position"] == r["position"]);
    CHECK(e["batch_xxh3"] == r["batch_xxh3"]);
  }
  check_committed_checkpoints(ref + "/run", {{0, 2}});
  check_committed_checkpoints(chain + "/run", {{0, 2}});
}

// --async-save with W = 2: each rank writes in the background, the barriers and commit run on
// the training thread at the next save. So the save at 40 is never committed by a crash at 47
// (its commit would have run at the save at 50): the run resumes from 30, still bit-identical.
TEST_CASE("two ranks with non-blocking saves: stopped, crashed and resumed bit-identical",
          "[dist]") {
  const std::string ref = ckpt::dist_test::make_temp_dir("ckpt-dist-aref");
  const std::string chain = ckpt::dist_test::make_temp_dir("ckpt-dist-achain");
  REQUIRE_FALSE(ref.empty());
  REQUIRE_FALSE(chain.empty());
  auto uninterrupted = run_ranks(ref, "all", 2, kTask);
  require_success(uninterrupted);
  auto task = kTask;
  task.push_back("--async-save");
  auto args = task;
  args.insert(args.end(), {"--stop-at", "25"});
  auto first = run_ranks(chain, "stop", 2, args);
  require_success(first);
  REQUIRE(first[0].out.find("saving step 25 in the background") != std::string::npos);
  args = task;
  args.insert(args.end(), {"--crash-at", "47"});
  auto crashed = run_ranks(chain, "crash", 2, args);
  {
    INFO(describe(crashed));
    for (const auto& r : crashed) REQUIRE(r.exit_code == 3);
    REQUIRE(crashed[0].out.find("restored step-000000000025") != std::string::npos);
  }
  REQUIRE_FALSE(exists(chain + "/run/step-000000000040/COMMIT.json"));  // never committed
  auto last = run_ranks(chain, "last", 2, task);
  require_success(last);
  REQUIRE(last[0].out.find("restored step-000000000030") != std::string::npos);
  CHECK(final_digest(last) == final_digest(uninterrupted));
  check_committed_checkpoints(chain + "/run", {{0, 2}});
}

TEST_CASE("resuming 2 ranks as 3 mid-epoch visits every sample of the epoch exactly once",
          "[dist]") {
  const std::string work = ckpt::dist_test::make_temp_dir("ckpt-dist-reshard");
  REQUIRE_FALSE(work.empty());
  const std::vector<std::string> task = {"--steps",        "30",  "--save-every", "10",
                                         "--dataset-size", "600", "--timeout-ms", "5000"};
  auto args = task;
  args.insert(args.end(), {"--stop-at", "10"});  // epoch 0, position 320 of 600
  require_success(run_ranks(work, "w2", 2, args));
  auto resumed = run_ranks(work, "w3", 3, task);
  require_success(resumed);
  final_digest(resumed);

  // From the ranks' own logs: epoch 0 (10 steps at W=2, 6 at W=3) and epoch 1 (all at W=3).
  auto per_epoch = effective_samples(work + "/run");
  REQUIRE(per_epoch.count(0) == 1);
  REQUIRE(per_epoch.count(1) == 1);
  require_each_sample_once(per_epoch[0], 600);
  require_each_sample_once(per_epoch[1], 600);

  // From the journal: epoch 0's steps tile [0, 600) with no gap or overlap, 32 then 48 a step.
  uint64_t next = 0;
  std::vector<int64_t> sizes;
  for (const auto& e : journal_events(work + "/run", "progress")) {
    if (e["epoch"] != 0) continue;
    REQUIRE(e["position"].get<uint64_t>() == next);
    next += e["samples"].get<uint64_t>();
    sizes.push_back(e["samples"].get<int64_t>());
  }
  REQUIRE(next == 600);
  REQUIRE(sizes ==
          std::vector<int64_t>{32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 48, 48, 48, 48, 48, 40});
  REQUIRE(
      resumed[2].out.find("restored step-000000000010 (step 10, loader epoch 0 position 320)") !=
      std::string::npos);
  check_committed_checkpoints(work + "/run", {{0, 2}, {10, 3}});
}

TEST_CASE("a peer that dies mid-run makes the others fail promptly with a clear error", "[dist]") {
  const std::string work = ckpt::dist_test::make_temp_dir("ckpt-dist-death");
  REQUIRE_FALSE(work.empty());
  auto rs = run_ranks(work, "die", 2, kTask, [](int r) {
    return r == 1 ? std::vector<std::string>{"--crash-at", "23"} : std::vector<std::string>{};
  });
  INFO(describe(rs));
  REQUIRE(rs[1].exit_code == 3);
  REQUIRE(rs[0].exit_code == 1);  // not killed at the launch deadline: it failed by itself
  CHECK(rs[0].err.find("gradient allreduce at step 23") != std::string::npos);
  CHECK(rs[0].err.find("failed on rank 0 of 2") != std::string::npos);
  // The checkpoint at 20 is intact and committed; nothing newer claims to be.
  CHECK(read_text(work + "/run/LATEST") == "step-000000000020\n");
}

TEST_CASE("a peer that hangs makes the others fail after the timeout", "[dist]") {
  const std::string work = ckpt::dist_test::make_temp_dir("ckpt-dist-hang");
  REQUIRE_FALSE(work.empty());
  std::vector<std::vector<std::string>> argv;
  for (int r = 0; r < 2; ++r) {
    argv.push_back({kDemo, "--run-dir", work + "/run", "--rank", std::to_string(r), "--world-size",
                    "2", "--port-file", work + "/hang.port", "--steps", "400", "--dataset-size",
                    "600", "--timeout-ms", "2000", "--slow-loader", "20"});
  }
  Launch launch(argv, work + "/hang");
  // Freeze rank 1 once it is training (its sample log has lines); rank 0 then waits in vain.
  const std::string log1 = work + "/run/samples/rank00001-step-000000000000.txt";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (read_text(log1).size() < 200 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(kill(launch.pid(1), SIGSTOP) == 0);
  const auto frozen = std::chrono::steady_clock::now();
  // Rank 0 must exit by itself (killed at the 40 s launch deadline otherwise); the frozen rank 1
  // is killed when `launch` goes out of scope.
  const RankResult r0 = launch.wait_one(0, std::chrono::milliseconds(40000));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen).count();
  INFO("exit " << r0.exit_code << " after " << waited << " s\n" << r0.out << r0.err);
  REQUIRE(r0.exit_code == 1);
  // Where the freeze lands decides who reports it: our barrier ("timed out") or gloo under a
  // collective ("Timed out waiting 2000ms for recv").
  std::string err = r0.err;
  std::transform(err.begin(), err.end(), err.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  CHECK(err.find("timed out") != std::string::npos);
}

TEST_CASE("a rank that never joins fails the rendezvous within the timeout", "[dist]") {
  const std::string work = ckpt::dist_test::make_temp_dir("ckpt-dist-absent");
  REQUIRE_FALSE(work.empty());
  Launch launch({{kDemo, "--run-dir", work + "/run", "--rank", "0", "--world-size", "2",
                  "--port-file", work + "/absent.port", "--timeout-ms", "1500"}},
                work + "/absent");
  auto rs = launch.wait_all(std::chrono::milliseconds(20000));
  INFO(describe(rs));
  REQUIRE(rs[0].exit_code == 1);
  CHECK(rs[0].err.find("rendezvous") != std::string::npos);
}
