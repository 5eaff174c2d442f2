// What a lost or damaged rank file takes with it, for DeepSpeed and Megatron torch_dist folders
// (issue 24): copies of real fixtures (DeepSpeed's save_checkpoint at 1 and 2 data-parallel
// ranks, ZeRO 1 and 3; Megatron's dist_checkpointing) with one file deleted or cut, through the
// real `ckpt` executable. The audit must exit 2, name what the file held — the parameters with
// the element ranges of their partitions, the entries by key — and mark every component that
// lost something missing or inconsistent, never present. DCP's own folders are tested in
// tests/verify/dcp_loss_test.cc.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/run_cli.h"

namespace rank_loss_test {
namespace {

namespace fs = std::filesystem;
using ckpt_test::FolderCopy;
using ckpt_test::quote;
using nlohmann::json;

const fs::path kForeign = fs::path(CKPT_SOURCE_DIR) / "fixtures" / "foreign";

json audit(const fs::path& p, int* rc) {
  return ckpt_test::run_ckpt_json("audit --json " + quote(p.string()), rc);
}

std::string status(const json& j, const char* component) {
  return j["components"][component]["status"].get<std::string>();
}

// The error finding that mentions every one of `words`, or "" (with the findings in the log).
std::string finding(const json& j, const std::vector<std::string>& words) {
  for (const auto& f : j["findings"]) {
    if (f["severity"] != "error") continue;
    const std::string m = f["message"].get<std::string>();
    bool all = true;
    for (const auto& w : words) all = all && m.find(w) != std::string::npos;
    if (all) return m;
  }
  UNSCOPED_INFO("findings: " << j["findings"].dump(1));
  return "";
}

void cut(const fs::path& p, uintmax_t size) { fs::resize_file(p, size); }

TEST_CASE("DeepSpeed ZeRO-1: a lost rank file names its partition of every parameter", "[verify]") {
  const fs::path src = kForeign / "deepspeed" / "zero1_2ranks";
  int rc = -1;
  SECTION("rank 1's optimizer file deleted") {
    FolderCopy c(src, "ds_z1_rm1");
    fs::remove(c.root / "global_step3" / "zero_pp_rank_1_mp_rank_00_optim_states.pt");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    // 58 elements padded to 60 and cut in two: rank 1 held flat [30, 60).
    const std::string m = finding(
        j, {"zero_pp_rank_1_mp_rank_00_optim_states.pt is missing (rank 1 of "
            "dp_world_size 2, ZeRO stage 1)",
            "exp_avg, exp_avg_sq", "4 parameter(s), 28 of their 58 elements",
            "\"0.weight\" elements [30:32] of 32;", "\"0.bias\" elements [0:8] of 8 (all)",
            "\"2.weight\" elements [0:16] of 16 (all)", "\"2.bias\" elements [0:2] of 2 (all)",
            "optimizer_state_dict.loss_scaler", "optimizer_state_dict.base_optimizer_state"});
    CHECK_FALSE(m.empty());
    CHECK(status(j, "optimizer") == "inconsistent");
    CHECK(status(j, "model") == "present");  // the module's fp32 weights are in mp_rank_00
  }
  SECTION("rank 0's optimizer file cut in half: unreadable, the other rank still read") {
    FolderCopy c(src, "ds_z1_cut0");
    const fs::path f = c.root / "global_step3" / "zero_pp_rank_0_mp_rank_00_optim_states.pt";
    cut(f, fs::file_size(f) / 2);
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(finding(j, {"zero_pp_rank_0_mp_rank_00_optim_states.pt is unreadable",
                            "(rank 0 of dp_world_size 2, ZeRO stage 1)",
                            "1 parameter(s), 30 of their 32 elements",
                            "\"0.weight\" elements [0:30] of 32"})
                    .empty());
    CHECK(status(j, "optimizer") == "inconsistent");
    CHECK(j["components"]["optimizer"]["evidence"].get<std::string>().find(
              "zero_pp_rank_1_mp_rank_00_optim_states.pt") != std::string::npos);
  }
  SECTION("the model states deleted: the module, scheduler and counters are missing") {
    FolderCopy c(src, "ds_z1_rmmodel");
    fs::remove(c.root / "global_step3" / "mp_rank_00_model_states.pt");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(finding(j, {"mp_rank_00_model_states.pt is missing",
                            "the module, lr_scheduler, global_steps"})
                    .empty());
    CHECK(status(j, "model") == "missing");
    CHECK(status(j, "scheduler") == "missing");
    CHECK(status(j, "counters") == "missing");
  }
}

TEST_CASE("DeepSpeed ZeRO-1 at one rank: its only optimizer file deleted", "[verify]") {
  FolderCopy c(kForeign / "deepspeed" / "zero1", "ds_z1w1_rm");
  fs::remove(c.root / "global_step3" / "zero_pp_rank_0_mp_rank_00_optim_states.pt");
  int rc = -1;
  json j = audit(c.root, &rc);
  CHECK(rc == 2);
  // No sibling to read the partition from: placed from param_shapes alone (58 -> 58 of 2 x 1).
  CHECK_FALSE(finding(j, {"zero_pp_rank_0_mp_rank_00_optim_states.pt is missing (rank 0 of "
                          "dp_world_size 1, ZeRO stage 1)",
                          "4 parameter(s), 58 of their 58 elements",
                          "\"0.weight\" elements [0:32] of 32 (all)"})
                  .empty());
  CHECK(status(j, "optimizer") == "missing");
}

TEST_CASE("DeepSpeed ZeRO-3: a lost partition is the only copy of those weights", "[verify]") {
  const fs::path src = kForeign / "deepspeed" / "zero3_2ranks";
  int rc = -1;
  SECTION("rank 1's optimizer file deleted: optimizer and model inconsistent") {
    FolderCopy c(src, "ds_z3_rm1");
    fs::remove(c.root / "global_step3" / "zero_pp_rank_1_mp_rank_00_optim_states.pt");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    // Each parameter cut on its own: ceil(n / 2) elements a rank.
    const std::vector<std::string> ranges = {
        "4 parameter(s), 29 of their 58 elements", "\"0.weight\" elements [16:32] of 32;",
        "\"0.bias\" elements [4:8] of 8;", "\"2.weight\" elements [8:16] of 16;",
        "\"2.bias\" elements [1:2] of 2"};
    std::vector<std::string> opt = ranges;
    opt.push_back("(rank 1 of dp_world_size 2, ZeRO stage 3)");
    opt.push_back("optimizer_state_dict.fp32_flat_groups");
    CHECK_FALSE(finding(j, opt).empty());
    std::vector<std::string> model = ranges;
    model.push_back("0-element placeholders");
    CHECK_FALSE(finding(j, model).empty());
    CHECK(status(j, "optimizer") == "inconsistent");
    CHECK(status(j, "model") == "inconsistent");
  }
  SECTION("rank 1's model states deleted: that rank cannot load, exit 2") {
    FolderCopy c(src, "ds_z3_rmmodel1");
    fs::remove(c.root / "global_step3" / "zero_pp_rank_1_mp_rank_00_model_states.pt");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(finding(j, {"zero_pp_rank_1_mp_rank_00_model_states.pt is missing (rank 1 of "
                            "dp_world_size 2, ZeRO stage 3)",
                            "load_checkpoint opens it and stops", "lr_scheduler, data_sampler",
                            "global_steps", "survive in zero_pp_rank_0_mp_rank_00_model_states.pt"})
                    .empty());
  }
}

TEST_CASE("Megatron torch_dist: a lost .distcp or common.pt names what it held", "[verify]") {
  const fs::path src = kForeign / "megatron" / "torch_dist";
  const fs::path iter = fs::path("iter_0000003");
  int rc = -1;
  SECTION("__0_1.distcp deleted: model and optimizer tensors with element ranges") {
    FolderCopy c(src, "mg_rm01");
    fs::remove(c.root / iter / "__0_1.distcp");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(
        finding(j, {"__0_1.distcp is missing: 26 tensor chunk(s) and 2 bytes entries"}).empty());
    CHECK_FALSE(finding(j, {"__0_1.distcp (missing) held model entries, now lost",
                            "tensor \"embedding.word_embeddings.weight\" loses 512 of 512 "
                            "elements: [0:32, 0:16]",
                            "bytes entry \"decoder.layers.mlp.linear_fc2._extra_state/shard_0_1\""})
                    .empty());
    CHECK_FALSE(finding(j, {"__0_1.distcp (missing) held optimizer entries, now lost",
                            "tensor \"optimizer.state.exp_avg_sq.output_layer.weight\" loses 512 "
                            "of 512 elements"})
                    .empty());
    CHECK(finding(j, {"entries of no component"}).empty());
    CHECK(status(j, "model") == "inconsistent");
    CHECK(status(j, "optimizer") == "inconsistent");
  }
  SECTION("__0_0.distcp cut short: what lay past the cut is named") {
    FolderCopy c(src, "mg_cut00");
    cut(c.root / iter / "__0_0.distcp", 30000);
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(finding(j, {"__0_0.distcp is truncated: 30000 bytes, .metadata places data up to "
                            "byte 84212"})
                    .empty());
    CHECK(status(j, "model") == "inconsistent");
    CHECK(status(j, "optimizer") == "inconsistent");
  }
  SECTION("common.pt cut short: unreadable, its entries named, the rest still audited") {
    FolderCopy c(src, "mg_cutcommon");
    cut(c.root / iter / "common.pt", 4096);
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(finding(j, {"common.pt is unreadable",
                            "it held args, checkpoint_version, "
                            "iteration, optimizer (param_groups, "
                            "common_step), opt_param_scheduler"})
                    .empty());
    CHECK(status(j, "model") == "present");  // the sharded weights are all in the .distcp files
    CHECK(status(j, "scheduler") == "missing");
    CHECK(status(j, "counters") == "missing");
    CHECK(status(j, "loader") == "missing");
    CHECK(status(j, "optimizer") == "missing");
  }
  SECTION("common.pt deleted: the same entries named") {
    FolderCopy c(src, "mg_rmcommon");
    fs::remove(c.root / iter / "common.pt");
    json j = audit(c.root, &rc);
    CHECK(rc == 2);
    CHECK_FALSE(finding(j, {"common.pt is missing: it held args", "opt_param_scheduler"}).empty());
    CHECK(status(j, "scheduler") == "missing");
  }
}

}  // namespace

}  // namespace rank_loss_test
