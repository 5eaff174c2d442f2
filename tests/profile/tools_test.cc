// Budget model, dataset layout scan/diff, environment snapshot/diff, /proc parsing.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "profile/analyze/budget.h"
#include "profile/analyze/verdict_catalog.h"
#include "profile/history/env_info.h"
#include "profile/history/layout.h"
#include "profile/recorder/cpu_sampler.h"

namespace ckpt::profile::tools_test {
namespace {

namespace fs = std::filesystem;

TEST_CASE("budget model: min(1, supply / demand), labelled a model", "[profile]") {
  auto b = budget_model(8, 400, 2000);
  REQUIRE(b.is_ok());
  REQUIRE(b->demand == 3200);
  REQUIRE(b->predicted_utilisation == Approx(0.625));
  REQUIRE(b->gpus_to_saturate == Approx(5));
  REQUIRE(b->bound == "input");
  REQUIRE(render_budget_text(*b).find("MODEL (not a measurement)") != std::string::npos);
  REQUIRE(budget_model(4, 100, 1000)->predicted_utilisation == 1.0);
  REQUIRE(budget_model(0, 100, 1000).status().code() == Code::kInvalidArgument);
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

TEST_CASE("layout: shards vs loose files, codecs, and the diff that names the change",
          "[profile]") {
  fs::path root = fs::temp_directory_path() / "ckpt_profile_layout_test";
  fs::remove_all(root);
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  std::string tar_header(512, '\0');
  tar_header.replace(257, 5, "ustar");
  for (int i = 0; i < 3; ++i)
    write(root / "a" / ("shard" + std::to_string(i) + ".tar"), tar_header);
  for (int i = 0; i < 1200; ++i) {
    write(root / "b" / ("img" + std::to_string(i) + ".jpg.gz"), std::string("\x1f\x8b\x08rest", 7));
  }
  auto a = scan_layout((root / "a").string());
  auto b = scan_layout((root / "b").string());
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  REQUIRE(a->files == 3);
  REQUIRE(a->formats.at("tar") == 3);
  REQUIRE(b->layout == "loose files");
  REQUIRE(b->compression == std::vector<std::string>{"gzip"});
  auto back = layout_from_json(layout_json(*b), "b.json");
  REQUIRE(back.is_ok());
  REQUIRE(back->files == 1200);
  auto changes = diff_layouts(*a, *back);
  REQUIRE_FALSE(changes.empty());
  REQUIRE(changes.front().find("loose files") != std::string::npos);
  bool codec = false;
  for (const auto& c : changes) codec |= c.find("compression: none -> gzip") != std::string::npos;
  REQUIRE(codec);
  REQUIRE(diff_layouts(*a, *a).empty());
  REQUIRE(scan_layout((root / "missing").string()).status().code() == Code::kNotFound);
  REQUIRE(layout_from_json(nlohmann::json::object(), "x.json").status().code() == Code::kCorrupt);
  fs::remove_all(root);
}

TEST_CASE("env snapshot: config digest and a diff of what changed", "[profile]") {
  fs::path cfg = fs::temp_directory_path() / "ckpt_profile_env_cfg.yaml";
  write(cfg, "lr: 0.1\n");
  auto a = capture_env(cfg.string());
  REQUIRE(a.is_ok());
  REQUIRE(a->fields.count("compiler") == 1);
  REQUIRE(a->fields.at("config.xxh3").size() == 16);
  write(cfg, "lr: 0.2\n");
  auto b = capture_env(cfg.string());
  REQUIRE(b.is_ok());
  b->fields["env.NCCL_ALGO"] = "Ring";
  auto round = env_from_json(env_json(*b), "b.json");
  REQUIRE(round.is_ok());
  auto d = diff_env(*a, *round);
  REQUIRE(d.size() == 2);
  REQUIRE(d[0].rfind("config.xxh3: ", 0) == 0);
  REQUIRE(d[1] == "env.NCCL_ALGO: (absent) -> Ring");
  REQUIRE(capture_env("/nonexistent.yaml").status().code() == Code::kNotFound);
  fs::remove(cfg);
}

TEST_CASE("/proc parsing: busy, iowait and the process's own ticks", "[profile]") {
  auto h = parse_proc_stat("cpu  100 5 50 1000 40 3 2 1 0 0\ncpu0 1 2 3\n");
  REQUIRE(h.is_ok());
  REQUIRE(h->busy == 100 + 5 + 50 + 3 + 2 + 1);
  REQUIRE(h->iowait == 40);
  REQUIRE(h->idle == 1000);
  REQUIRE(parse_proc_stat("intr 1 2").status().code() == Code::kCorrupt);
  auto p = parse_proc_self_stat("42 (my (odd) name) S 1 42 42 0 -1 4194560 10 0 0 0 17 23 0 0");
  REQUIRE(p.is_ok());
  REQUIRE(*p == 40);
  REQUIRE_FALSE(parse_proc_self_stat("garbage").is_ok());
  CpuMeter m;
  REQUIRE(m.cores() >= 1);
}

TEST_CASE("verdict ids: one closed set, one name table, text for each", "[profile]") {
  for (int i = 0; i < kNumVerdicts; ++i) {
    auto id = static_cast<VerdictId>(i);
    INFO(verdict_name(id));
    REQUIRE(verdict_from_name(verdict_name(id)) == id);
    REQUIRE(verdict_text(id) != nullptr);
    REQUIRE(std::string(verdict_text(id)->id) == verdict_name(id));
  }
  REQUIRE_FALSE(verdict_from_name("stragler").has_value());
  REQUIRE(std::string(verdict_name(VerdictId::kPageableH2D)) == "pageable_h2d");
}

}  // namespace
}  // namespace ckpt::profile::tools_test
