// `ckpt coverage DIR` on real Lightning and torchdata runs, no hand-written spec:
// fixtures/lightning_coverage/make_fixtures.py ran each job in fresh processes, crashed it twice
// (once), resumed it from its checkpoints, and recorded in truth.json the sample ids every
// completed step trained on; expected.json is computed from those alone. What ckpt derives from
// the checkpoints and logs must replay exactly those samples where the order was saved, and
// bound them where it was not.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/loader_run.h"
#include "analytics/coverage/torch_randperm.h"
#include "analytics/input/json_text.h"
#include "cli/commands.h"
#include "cli/loader_checkpoint.h"
#include "tests/analytics/test_support.h"

namespace ckpt::analytics::loader_coverage_test {
namespace {

namespace fs = std::filesystem;

std::string run_dir(const std::string& name) {
  return std::string(CKPT_SOURCE_DIR) + "/fixtures/lightning_coverage/" + name;
}

nlohmann::json json_file(const std::string& path) {
  auto text = read_text_file(Env::posix(), path);
  REQUIRE(text.is_ok());
  return nlohmann::json::parse(*text);
}

// epoch -> id -> times a completed step trained on it.
using EpochVisits = std::map<uint64_t, std::map<uint64_t, int64_t>>;

EpochVisits truth_of(const std::string& dir) {
  EpochVisits out;
  for (const auto& row : json_file(dir + "/truth.json")) {
    for (const auto& id : row["ids"]) ++out[row["epoch"].get<uint64_t>()][id.get<uint64_t>()];
  }
  return out;
}

Result<DerivedLoaderRun> derive(const std::string& dir, uint64_t n = 37) {
  CKPT_ASSIGN_OR_RETURN(auto cks, cli::read_loader_checkpoints(Env::posix(), dir));
  CKPT_ASSIGN_OR_RETURN(auto launches, launches_from_logs(Env::posix(), dir));
  return derive_loader_run(cks, launches, n, 0);
}

// The ids the derived visits read, through the orders ckpt rebuilt (all must be known).
EpochVisits replayed(const CoverageInput& in) {
  EpochVisits out;
  for (const auto& v : in.visits) {
    if (!in.orders_given) {  // in order
      for (uint64_t p = v.begin; p < v.end; ++p) ++out[v.epoch][p];
      continue;
    }
    auto it = in.orders.find(v.order_key);
    REQUIRE(it != in.orders.end());
    REQUIRE(it->second != nullptr);
    for (uint64_t p = v.begin; p < v.end; ++p) ++out[v.epoch][it->second->id_at(p)];
  }
  return out;
}

nlohmann::json coverage_json(const std::string& dir, uint64_t n, int* rc, std::string* err_text) {
  cli::CoverageCommandOptions o;
  o.run_dir = dir;
  o.dataset_size = n;
  o.json = true;
  std::ostringstream out, err;
  *rc = cli::run_coverage_command(o, Env::posix(), out, err);
  *err_text = err.str();
  return *rc == 0 ? nlohmann::json::parse(out.str()) : nlohmann::json();
}

// The report against expected.json: exact epochs equal, bounded ones bracket the truth.
void check_against_expected(const std::string& dir, bool all_exact) {
  int rc = 0;
  std::string err;
  const auto got = coverage_json(dir, 37, &rc, &err);
  INFO(err);
  REQUIRE(rc == 0);
  const auto want = json_file(dir + "/expected.json");
  REQUIRE(got["epochs"].size() == want["epochs"].size());
  for (size_t i = 0; i < want["epochs"].size(); ++i) {
    const auto& w = want["epochs"][i];
    const auto& g = got["epochs"][i];
    INFO("epoch " << w["epoch"]);
    CHECK(g["epoch"] == w["epoch"]);
    CHECK(g["visits"] == w["visits"]);
    const bool exact = g.value("exact", true);
    CHECK((exact || !all_exact));
    if (exact) {
      CHECK(g["unique"] == w["unique"]);
      CHECK(g["repeats"] == w["repeats"]);
    } else {
      CHECK(g["unique"].get<int64_t>() <= w["unique"].get<int64_t>());
      CHECK(w["unique"].get<int64_t>() <= g["unique_max"].get<int64_t>());
    }
    if (g.value("ids_known", true)) CHECK(g["never_visited"] == w["never_visited"]);
  }
  CHECK(got["overall"]["unique"] == want["overall_unique"]);
}

TEST_CASE("StatefulDataLoader runs: the rebuilt orders replay the samples each step trained on",
          "[analytics]") {
  for (const char* name : {"lightning_stateful", "sdl", "sdl_sequential"}) {
    INFO(name);
    const std::string dir = run_dir(name);
    auto d = derive(dir);
    REQUIRE(d.is_ok());
    CHECK(d->certainty.rfind("exact", 0) == 0);
    CHECK(replayed(d->input) == truth_of(dir));
    for (const auto& r : d->restarts) CHECK(r.loader_resumed);
    check_against_expected(dir, true);
  }
  // Mid-epoch resumes, from the loader's own count (workers: snapshot step + steps since).
  auto l = derive(run_dir("lightning_stateful"));
  REQUIRE(l->restarts.size() == 2);
  CHECK(l->restarts[0].step == 12);
  CHECK(l->restarts[0].epoch == 1);
  CHECK(l->restarts[0].position == 8);
  CHECK(l->restarts[1].position == 16);
  auto s = derive(run_dir("sdl"));
  REQUIRE(s->restarts.size() == 1);
  CHECK(s->restarts[0].step == 15);
  CHECK(s->restarts[0].position == 20);
}

TEST_CASE("StatefulDataLoader runs: epochs without a checkpoint are drawn on from the last state",
          "[analytics]") {
  // Drop the checkpoints of the last epoch: its order must come from the previous epoch's
  // generator state (one randperm an epoch in-process, two with workers).
  for (const auto& [name, keep_below] :
       std::vector<std::pair<std::string, int>>{{"lightning_stateful", 30}, {"sdl", 20}}) {
    INFO(name);
    testing::ScratchDir tmp;
    const std::string src = run_dir(name);
    fs::copy(src, tmp.path(), fs::copy_options::recursive);
    for (const auto& e : fs::recursive_directory_iterator(tmp.path())) {
      const std::string f = e.path().filename().string();
      auto at = f.find_first_of("0123456789");
      if (at == std::string::npos ||
          (f.find(".ckpt") == std::string::npos && f.find(".pt") == std::string::npos)) {
        continue;
      }
      if (std::stoi(f.substr(at)) >= keep_below) fs::remove(e.path());
    }
    auto d = derive(tmp.path());
    REQUIRE(d.is_ok());
    CHECK(replayed(d->input) == truth_of(src));
    for (const auto& a : d->assumptions) CHECK(a.find("is not the one left") == std::string::npos);
  }
}

TEST_CASE("Lightning without loader state: restarts replay the epoch head with unknown orders",
          "[analytics]") {
  const std::string dir = run_dir("lightning_plain");
  auto d = derive(dir);
  REQUIRE(d.is_ok());
  REQUIRE(d->restarts.size() == 2);
  for (const auto& r : d->restarts) {
    CHECK_FALSE(r.loader_resumed);
    CHECK(r.position == 0);
    CHECK(r.evidence.find("no combined_loader") != std::string::npos);
  }
  CHECK(d->certainty.rfind("bounded", 0) == 0);
  // Every step's samples are counted where they were, even if their ids are unknown.
  const EpochVisits truth = truth_of(dir);
  std::map<uint64_t, int64_t> per_epoch;
  for (const auto& v : d->input.visits) per_epoch[v.epoch] += int64_t(v.end - v.begin);
  for (const auto& [epoch, ids] : truth) {
    int64_t n = 0;
    for (const auto& [id, k] : ids) n += k;
    CHECK(per_epoch[epoch] == n);
  }
  check_against_expected(dir, false);
}

TEST_CASE("Loader runs without logs: one launch to the last checkpoint, said to be uncertain",
          "[analytics]") {
  testing::ScratchDir tmp;
  fs::copy(run_dir("lightning_stateful") + "/checkpoints", tmp.path());
  auto d = derive(tmp.path());
  REQUIRE(d.is_ok());
  CHECK(d->certainty.rfind("uncertain", 0) == 0);
  CHECK(d->restarts.empty());
  REQUIRE(d->launches.size() == 1);
  uint64_t visits = 0;
  for (const auto& v : d->input.visits) visits += v.end - v.begin;
  CHECK(visits == 3 * 37 + 6 * 4);  // 36 steps: three epochs and six batches, none redone
}

TEST_CASE("Loader runs: what the checkpoints cannot tell is asked for, and checked",
          "[analytics]") {
  int rc = 0;
  std::string err;
  coverage_json(run_dir("lightning_plain"), 0, &rc, &err);
  CHECK(rc == 64);
  CHECK(err.find("--dataset-size") != std::string::npos);
  // 33 samples in batches of 4 make 9 steps an epoch; the checkpoint at step 20 ended its epoch
  // after 10.
  coverage_json(run_dir("lightning_plain"), 33, &rc, &err);
  CHECK(rc == 64);
  CHECK(err.find("ended after 10 batches") != std::string::npos);
  // A torn .ckpt (a killed save) is named, exit 65.
  testing::ScratchDir tmp;
  const std::string ckpt = run_dir("lightning_plain") + "/checkpoints/step=4.ckpt";
  fs::copy(ckpt, tmp.path() + "/step=4.ckpt");
  auto whole = read_text_file(Env::posix(), ckpt);
  REQUIRE(whole.is_ok());
  tmp.file("step=8.ckpt", whole->substr(0, whole->size() / 2));
  coverage_json(tmp.path(), 37, &rc, &err);
  CHECK(rc == 65);
  CHECK(err.find("step=8.ckpt") != std::string::npos);
}

TEST_CASE("coverage with unknown orders: positions counted, mixed epochs bounded", "[analytics]") {
  CoverageInput in;
  in.sampler.kind = SamplerKind::kTorchRandom;
  in.sampler.dataset_size = 37;
  in.sampler.batch_size = 4;
  in.orders_given = true;
  std::vector<int64_t> reversed(37);
  for (int i = 0; i < 37; ++i) reversed[i] = 36 - i;
  in.orders[7] = make_table_order(reversed);  // key 7 known; keys 1, 2, 3 unknown
  in.visits = {{0, 1, 0, 20},                 // epoch 0: one unknown order, counted exactly
               {1, 2, 0, 16},                 // epoch 1: two unknown pieces of 16 and 32
               {1, 3, 0, 32},
               {2, 7, 0, 10},  // epoch 2: ids 36..27 known, plus 30 unknown positions
               {2, 3, 0, 30}};
  auto r = compute_coverage(in, {});
  REQUIRE(r.is_ok());
  REQUIRE(r->epochs.size() == 3);
  const auto& e0 = r->epochs[0];
  CHECK(e0.exact);
  CHECK_FALSE(e0.ids_known);
  CHECK(e0.unique == 20);
  CHECK(e0.never_visited_ids.empty());
  const auto& e1 = r->epochs[1];
  CHECK_FALSE(e1.exact);
  CHECK(e1.unique == 32);
  CHECK(e1.unique_max == 37);
  CHECK(e1.unique_expected == Approx(37.0 - 37.0 * (21.0 / 37) * (5.0 / 37)));
  CHECK(e1.never_visited_count == 5);
  const auto& e2 = r->epochs[2];
  CHECK(e2.unique == 30);
  CHECK(e2.unique_max == 37);
  CHECK(e2.unique_expected == Approx(37.0 - 27.0 * (7.0 / 37)));
  CHECK_FALSE(r->overall_exact);
  CHECK(r->overall_unique == 32);
  CHECK(r->overall_unique_max == 37);
  CHECK(r->total_visits == 20 + 48 + 40);
}

TEST_CASE("torch generator states: from_state continues the twister where get_state left it",
          "[analytics]") {
  TorchCpuGenerator seeded(123456789);
  std::mt19937 reference(123456789u);
  for (int i = 0; i < 2000; ++i) REQUIRE(seeded.random() == reference());
  CHECK_FALSE(TorchCpuGenerator::from_state(std::string(100, '\0')).has_value());
  // `left` 5 with `next` 624 would read past the state: refused.
  std::string bad(TorchCpuGenerator::kStateBytes, '\0');
  bad[8] = 5;
  bad[16] = static_cast<char>(624 & 0xff);
  bad[17] = static_cast<char>(624 >> 8);
  CHECK_FALSE(TorchCpuGenerator::from_state(bad).has_value());
}

}  // namespace
}  // namespace ckpt::analytics::loader_coverage_test
