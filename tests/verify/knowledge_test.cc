// The knowledge table (verify/formats/knowledge.h) and the rules that read it, on views built
// by hand for the cases no CPU fixture can hold (an fp16 run on a GPU) and on the table itself.
// The real-library cases are fixtures/foreign/knowledge/ (tests/audit_fixtures/).
#include "verify/formats/knowledge.h"

#include <catch2/catch.hpp>

#include "verify/audit/rules.h"

namespace ckpt::verify {
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
}  // namespace ckpt::verify
