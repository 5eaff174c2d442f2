// The knowledge table (verify/formats/knowledge.h) and the rules that read it, on views built
// by hand for the cases no CPU fixture can hold (an fp16 run on a GPU) and on the table itself.
// The real-library cases are fixtures/foreign/knowledge/ (tests/audit_fixtures/).
#include "verify/formats/knowledge.h"

#include <catch2/catch.hpp>

#include "verify/audit/rules.h"

namespace ckpt::verify::knowledge_test {
namespace {

TEST_CASE("optimizer classes are identified from a GLOBAL, else from their shape", "[verify]") {
  const std::set<std::string> lion_groups = {"lr", "betas", "weight_decay", "maximize", "foreach"};
  OptimizerIdentity id = identify_optimizer(lion_groups, {"exp_avg"}, {});
  REQUIRE(id.candidates.size() == 1);
  CHECK(std::string(id.candidates[0]->name) == "Lion");
  CHECK_FALSE(id.from_global);
  CHECK(id.how.find("by shape") != std::string::npos);

  id = identify_optimizer(lion_groups, {"exp_avg"}, {"timm.optim.lion.Lion"});
  CHECK(id.from_global);
  CHECK(id.how == "class from the pickle's GLOBAL timm.optim.lion.Lion");

  // torch 1.13's RAdam and Adamax save the same param_group keys: the state tells them apart,
  // and without state both stay candidates.
  const std::set<std::string> g = {"lr", "betas", "eps", "weight_decay", "foreach"};
  id = identify_optimizer(g, {"exp_avg", "exp_avg_sq", "step"}, {});
  REQUIRE(id.candidates.size() == 1);
  CHECK(std::string(id.candidates[0]->name) == "RAdam");
  id = identify_optimizer(g, {}, {});
  CHECK(id.candidates.size() >= 2);

  const OptimizerClass* sgd = optimizer_class_named("SGD");
  REQUIRE(sgd != nullptr);
  GroupValues zero, nine;
  zero.numbers["momentum"] = 0;
  nine.numbers["momentum"] = 0.9;
  CHECK(required_state(*sgd, zero).empty());
  CHECK(required_state(*sgd, nine) == std::vector<std::string>{"momentum_buffer"});
}

// apex's FusedAdam needs CUDA, so no fixture holds one: its row, told from DeepSpeed's by where
// the step lives (apex: param_groups only, from apex/optimizers/fused_adam.py; DeepSpeed: also
// each parameter's state), judged on a view built by hand.
TEST_CASE("apex's FusedAdam by its shape: the step in param_groups, none per parameter",
          "[verify]") {
  const std::set<std::string> groups = {"lr",  "bias_correction", "betas",
                                        "eps", "weight_decay",    "step"};
  // Without a step in the state it could also be DeepSpeed's with its step lost: both stay
  // candidates, and only what both keep is required.
  OptimizerIdentity apex = identify_optimizer(groups, {"exp_avg", "exp_avg_sq"}, {});
  CHECK(apex.label() == "FusedAdam (apex) or FusedAdam (DeepSpeed)");
  OptimizerIdentity ds = identify_optimizer(groups, {"exp_avg", "exp_avg_sq", "step"}, {});
  REQUIRE(ds.candidates.size() == 1);
  CHECK(std::string(ds.candidates[0]->name) == "FusedAdam (DeepSpeed)");
  CHECK(identify_optimizer(groups, {"exp_avg"}, {"apex.optimizers.fused_adam.FusedAdam"})
            .from_global);

  CheckpointView v;
  v.counters.found = true;
  v.counters.global_step = 6;
  v.optimizer.found = true;
  v.optimizer.identity = apex;
  OptimizerPart::Group g;
  g.params = {0, 1};
  g.step = 6;
  g.values.present = groups;
  v.optimizer.groups.push_back(g);
  for (int64_t id : {0, 1}) {
    OptimizerPart::ParamState ps;
    ps.id = id;
    ps.keys = {"exp_avg", "exp_avg_sq"};
    v.optimizer.state.push_back(ps);
  }
  CHECK(apply_rules(v, {}).find(AuditComponent::kOptimizer)->status == ComponentStatus::kPresent);
  v.counters.global_step = 9;
  CHECK(apply_rules(v, {}).find(AuditComponent::kOptimizer)->status ==
        ComponentStatus::kInconsistent);
  v.counters.global_step = 6;
  v.optimizer.state[1].keys = {"exp_avg"};  // a parameter without its second moment
  CHECK(apply_rules(v, {}).find(AuditComponent::kOptimizer)->status ==
        ComponentStatus::kInconsistent);
}

// bitsandbytes before 0.44 wrote no AdEMAMix keys in its groups: Adam8bit and Lion8bit look the
// same, so only state1 is required of either.
TEST_CASE("bitsandbytes without the AdEMAMix group keys: one row, state2 optional", "[verify]") {
  const std::set<std::string> groups = {"lr", "betas", "eps", "weight_decay"};
  OptimizerIdentity id = identify_optimizer(groups, {"state1", "qmap1", "absmax1", "step"}, {});
  REQUIRE(id.candidates.size() == 1);
  CHECK(std::string(id.candidates[0]->name) == "bitsandbytes 8-bit");
  id = identify_optimizer(groups, {"state1", "state2", "step"}, {});
  REQUIRE(id.candidates.size() == 1);
  CHECK(std::string(id.candidates[0]->name) == "bitsandbytes 8-bit");
  std::set<std::string> newer = groups;
  newer.insert({"alpha", "t_alpha", "t_beta3"});
  id = identify_optimizer(newer, {"state1", "step"}, {});
  REQUIRE(id.candidates.size() == 1);
  CHECK(required_state(*id.candidates[0], GroupValues()) ==
        std::vector<std::string>{"state1", "state2"});
}

CheckpointView hf_view() {
  CheckpointView v;
  v.format = CheckpointFormat::kHfTrainer;
  v.counters.found = true;
  v.counters.global_step = 6;
  return v;
}

TEST_CASE("fp16 without a GradScaler: missing on a GPU run, not_applicable on the CPU",
          "[verify]") {
  CheckpointView v = hf_view();
  v.mixed_precision = true;
  v.mixed_precision_evidence = "training_args.bin: fp16=True";
  CHECK(apply_rules(v, {}).find(AuditComponent::kGradScaler)->status == ComponentStatus::kMissing);
  v.no_scaler_reason = "training_args.bin: fp16=True, but the run was on the CPU";
  CHECK(apply_rules(v, {}).find(AuditComponent::kGradScaler)->status ==
        ComponentStatus::kNotApplicable);
}

TEST_CASE("ReduceLROnPlateau against the evaluation count: unknown without one", "[verify]") {
  CheckpointView v = hf_view();
  v.scheduler.found = true;
  v.scheduler.kind = "ReduceLROnPlateau";
  v.scheduler.klass = identify_scheduler({"patience", "num_bad_epochs", "last_epoch"});
  REQUIRE(v.scheduler.klass != nullptr);
  v.scheduler.last_epoch = 3;
  v.counters.evaluations = 3;
  CHECK(apply_rules(v, {}).find(AuditComponent::kScheduler)->status == ComponentStatus::kPresent);
  v.counters.evaluations = 5;
  CHECK(apply_rules(v, {}).find(AuditComponent::kScheduler)->status ==
        ComponentStatus::kInconsistent);
  v.counters.evaluations.reset();
  const AuditReport r = apply_rules(v, {});
  CHECK(r.find(AuditComponent::kScheduler)->status == ComponentStatus::kUnknown);
  bool warned = false;
  for (const auto& f : r.findings)
    warned =
        warned || (f.severity == Severity::kWarning && f.component == AuditComponent::kScheduler);
  CHECK(warned);
  CHECK(status_is_ok(ComponentStatus::kUnknown));
  CHECK(std::string(status_name(ComponentStatus::kUnknown)) == "unknown");
}

}  // namespace
}  // namespace ckpt::verify::knowledge_test
