// Structural detection and the audit rules on hand-built value trees: components found by shape
// under any key name, device awareness, consistency checks, --require semantics.
#include "verify/formats/detect.h"

#include <catch2/catch.hpp>

#include "verify/audit/rules.h"

using namespace ckpt;
using namespace ckpt::verify;

namespace {

struct Tree {
  PickleDoc doc;
  Value* dict() { return doc.make(Kind::kDict); }
  Value* list() { return doc.make(Kind::kList); }
  Value* str(const std::string& s) {
    Value* v = doc.make(Kind::kStr);
    v->s = s;
    return v;
  }
  Value* num(int64_t i) {
    Value* v = doc.make(Kind::kInt);
    v->i = i;
    return v;
  }
  Value* flt(double f) {
    Value* v = doc.make(Kind::kFloat);
    v->f = f;
    return v;
  }
  Value* tensor(const std::string& dtype, std::vector<int64_t> shape, const std::string& loc) {
    Value* v = doc.make(Kind::kTensor);
    v->tensor->dtype = AnyDType::from_name(dtype);
    v->tensor->element_size = dtype == "uint8" ? 1 : 4;
    v->tensor->shape = std::move(shape);
    v->tensor->location = loc;
    return v;
  }
  void set(Value* d, const std::string& k, const Value* v) { d->entries.emplace_back(str(k), v); }

  // {weights, optim_sd (Adam, steps), lr_sched, gen (RNG), cursor, global_step, epoch}
  Value* training_dict(const std::string& loc, int64_t opt_step, int64_t global_step, double lr,
                       double last_lr, bool with_loader = true) {
    Value* root = dict();
    Value* model = dict();
    set(model, "enc.weight", tensor("float32", {8, 4}, loc));
    set(model, "enc.bias", tensor("float32", {8}, loc));
    set(root, "weights", model);
    Value* opt = dict();
    Value* state = dict();
    for (int id = 0; id < 2; ++id) {
      Value* ps = dict();
      set(ps, "step", num(opt_step));
      set(ps, "exp_avg", tensor("float32", {8}, loc));
      set(ps, "exp_avg_sq", tensor("float32", {8}, loc));
      state->entries.emplace_back(num(id), ps);
    }
    set(opt, "state", state);
    Value* groups = list();
    Value* g = dict();
    set(g, "lr", flt(lr));
    Value* params = list();
    params->items = {num(0), num(1)};
    set(g, "params", params);
    groups->items.push_back(g);
    set(opt, "param_groups", groups);
    set(root, "optim_sd", opt);
    Value* sch = dict();
    set(sch, "last_epoch", num(global_step));
    Value* base = list();
    base->items = {flt(0.1)};
    set(sch, "base_lrs", base);
    Value* ll = list();
    ll->items = {flt(last_lr)};
    set(sch, "_last_lr", ll);
    set(sch, "T_max", num(100));
    set(root, "lr_sched", sch);
    Value* gen = dict();
    set(gen, "torch", tensor("uint8", {5056}, "cpu"));
    set(root, "gen", gen);
    if (with_loader) {
      Value* cur = dict();
      set(cur, "epoch", num(0));
      set(cur, "samples_seen", num(global_step * 8));
      set(root, "data_pos", cur);
    }
    set(root, "global_step", num(global_step));
    return root;
  }
};

AuditReport judge(const Value* root, const std::set<AuditComponent>& required = {}) {
  CheckpointView v;
  v.path = "hand-built";
  v.format = CheckpointFormat::kTorchSave;
  detect_components(*root, DetectContext{"t.pt", nullptr}, &v);
  return apply_rules(v, required);
}

}  // namespace

TEST_CASE("components are found by structure under any key name", "[verify]") {
  Tree t;
  AuditReport r = judge(t.training_dict("cpu", 6, 6, 0.05, 0.05));
  for (AuditComponent c :
       {AuditComponent::kModel, AuditComponent::kOptimizer, AuditComponent::kScheduler,
        AuditComponent::kRngCpu, AuditComponent::kLoader, AuditComponent::kCounters}) {
    INFO(component_name(c) << ": " << r.find(c)->evidence);
    CHECK(r.find(c)->status == ComponentStatus::kPresent);
  }
  CHECK(r.find(AuditComponent::kRngCuda)->status == ComponentStatus::kNotApplicable);
  CHECK(r.find(AuditComponent::kGradScaler)->status == ComponentStatus::kNotApplicable);
  CHECK(r.complete);
  CHECK(r.find(AuditComponent::kOptimizer)->evidence.find("optim_sd") != std::string::npos);
  CHECK(r.find(AuditComponent::kScheduler)->evidence.find("CosineAnnealingLR") !=
        std::string::npos);
}

TEST_CASE("tensors stored from cuda:N make the CUDA RNG state required", "[verify]") {
  Tree t;
  AuditReport r = judge(t.training_dict("cuda:0", 6, 6, 0.05, 0.05));
  CHECK(r.find(AuditComponent::kRngCuda)->status == ComponentStatus::kMissing);
  CHECK(r.find(AuditComponent::kRngCuda)->evidence.find("cuda:0") != std::string::npos);
  CHECK_FALSE(r.complete);
  Value* root = t.training_dict("cuda:0", 6, 6, 0.05, 0.05);
  Value* gen = const_cast<Value*>(root->get("gen"));
  t.set(gen, "cuda", t.tensor("uint8", {16}, "cpu"));
  r = judge(root);
  CHECK(r.find(AuditComponent::kRngCuda)->status == ComponentStatus::kPresent);
  CHECK(r.complete);
}

TEST_CASE("consistency: optimizer step, scheduler step and LR against the global step",
          "[verify]") {
  Tree t;
  AuditReport r = judge(t.training_dict("cpu", 6, 9, 0.05, 0.05));
  CHECK(r.find(AuditComponent::kOptimizer)->status == ComponentStatus::kInconsistent);
  CHECK(r.find(AuditComponent::kOptimizer)->evidence.find("!= global_step 9") != std::string::npos);
  CHECK(r.find(AuditComponent::kScheduler)->status == ComponentStatus::kPresent);

  Tree t2;
  r = judge(t2.training_dict("cpu", 6, 6, 0.05, 0.00882));
  CHECK(r.find(AuditComponent::kScheduler)->status == ComponentStatus::kInconsistent);
  CHECK(r.find(AuditComponent::kScheduler)->evidence.find("_last_lr[0]") != std::string::npos);
  CHECK_FALSE(r.complete);
}

TEST_CASE("an optimizer that never stepped is empty, a wrong-size RNG is inconsistent",
          "[verify]") {
  Tree t;
  Value* root = t.training_dict("cpu", 6, 6, 0.05, 0.05);
  const_cast<Value*>(root->get("optim_sd")->get("state"))->entries.clear();
  const_cast<Value*>(root->get("gen"))->entries.clear();
  t.set(const_cast<Value*>(root->get("gen")), "torch", t.tensor("uint8", {5056}, "cpu"));
  AuditReport r = judge(root);
  CHECK(r.find(AuditComponent::kOptimizer)->status == ComponentStatus::kEmpty);
  CHECK_FALSE(r.find(AuditComponent::kOptimizer)->consequence.empty());

  Tree t2;
  Value* root2 = t2.training_dict("cpu", 6, 6, 0.05, 0.05);
  Value* gen = const_cast<Value*>(root2->get("gen"));
  gen->entries.clear();
  t2.set(gen, "cpu", t2.tensor("uint8", {16}, "cpu"));
  t2.set(gen, "also", t2.tensor("uint8", {5000}, "cpu"));
  r = judge(root2);
  CHECK(r.find(AuditComponent::kRngCpu)->status == ComponentStatus::kMissing);
}

TEST_CASE("audit --require narrows the components that decide completeness", "[verify]") {
  Tree t;
  const Value* root = t.training_dict("cpu", 6, 6, 0.05, 0.05, /*with_loader=*/false);
  AuditReport all = judge(root);
  CHECK(all.find(AuditComponent::kLoader)->status == ComponentStatus::kMissing);
  CHECK_FALSE(all.complete);
  AuditReport some = judge(root, {AuditComponent::kModel, AuditComponent::kOptimizer});
  CHECK(some.complete);
  bool warned = false;
  for (const auto& f : some.findings)
    warned = warned || (f.component == AuditComponent::kLoader && f.severity == Severity::kWarning);
  CHECK(warned);
}

TEST_CASE("detection never descends into opaque objects", "[verify]") {
  Tree t;
  Value* root = t.dict();
  Value* obj = t.doc.make(Kind::kObject);
  Value* g = t.doc.make(Kind::kGlobal);
  g->s = "torch.optim.lr_scheduler";
  g->name = "OneCycleLR";
  obj->callable = g;
  obj->args = t.doc.make(Kind::kTuple);
  Tree inner;
  obj->state = inner.training_dict("cpu", 1, 1, 0.1, 0.1);
  t.set(root, "anneal", obj);
  AuditReport r = judge(root);
  CHECK(r.find(AuditComponent::kOptimizer)->status == ComponentStatus::kMissing);
  CHECK(r.find(AuditComponent::kModel)->status == ComponentStatus::kMissing);
}

TEST_CASE("cyclic trees terminate", "[verify]") {
  Tree t;
  Value* root = t.dict();
  Value* l = t.list();
  l->items.push_back(l);
  l->items.push_back(root);
  t.set(root, "loop", l);
  AuditReport r = judge(root);
  CHECK(r.find(AuditComponent::kModel)->status == ComponentStatus::kMissing);
  size_t budget = 1000;
  InspectNode n = inspect_value(*root, "root", &budget);
  CHECK(budget < 1000);
}

TEST_CASE("rules that hold on real training: scaler, frozen params, relative LR, counters",
          "[verify]") {
  SECTION("a GradScaler allows optimizer step < global step, and says why") {
    Tree t;
    Value* root = t.training_dict("cpu", 3, 12, 0.05, 0.05);
    Value* sc = t.dict();
    t.set(sc, "scale", t.flt(2.0));
    t.set(sc, "growth_factor", t.flt(2.0));
    t.set(sc, "backoff_factor", t.flt(0.5));
    t.set(sc, "growth_interval", t.num(2000));
    t.set(root, "scaler", sc);
    AuditReport r = judge(root);
    CHECK(r.find(AuditComponent::kOptimizer)->status == ComponentStatus::kPresent);
    CHECK(r.find(AuditComponent::kOptimizer)->evidence.find("GradScaler skipped 9") !=
          std::string::npos);
    // Without the scaler the same numbers are inconsistent.
    Tree u;
    AuditReport bad = judge(u.training_dict("cpu", 3, 12, 0.05, 0.05));
    CHECK(bad.find(AuditComponent::kOptimizer)->status == ComponentStatus::kInconsistent);
    CHECK(bad.find(AuditComponent::kOptimizer)->evidence.find("step 3 != global_step 12") !=
          std::string::npos);
  }
  SECTION("params listed without state are a note, not inconsistent") {
    Tree t;
    Value* root = t.training_dict("cpu", 6, 6, 0.05, 0.05);
    // Add two frozen params (ids 2, 3) to the group; they have no state.
    const Value* opt = root->get("optim_sd");
    Value* params = const_cast<Value*>(opt->get("param_groups")->items[0]->get("params"));
    params->items.push_back(t.num(2));
    params->items.push_back(t.num(3));
    AuditReport r = judge(root);
    CHECK(r.find(AuditComponent::kOptimizer)->status == ComponentStatus::kPresent);
    bool note = false;
    for (const auto& f : r.findings)
      note = note || (f.severity == Severity::kInfo && f.component == AuditComponent::kOptimizer &&
                      f.message.find("2 of 4 params") != std::string::npos);
    CHECK(note);
  }
  SECTION("LRs compare relatively: 1e-6 against 1.9e-6 differs") {
    Tree t;
    AuditReport r = judge(t.training_dict("cpu", 6, 6, 1.9e-6, 1e-6));
    CHECK(r.find(AuditComponent::kScheduler)->status == ComponentStatus::kInconsistent);
    Tree u;
    AuditReport ok = judge(u.training_dict("cpu", 6, 6, 1e-6, 1e-6 * (1 + 1e-9)));
    CHECK(ok.find(AuditComponent::kScheduler)->status == ComponentStatus::kPresent);
  }
  SECTION("DeepSpeed's global_steps is the global step") {
    Tree t;
    Value* root = t.dict();
    t.set(root, "global_steps", t.num(42));
    t.set(root, "global_samples", t.num(336));
    CheckpointView v;
    detect_components(*root, DetectContext{"mp_rank_00_model_states.pt", nullptr}, &v);
    REQUIRE(v.counters.global_step);
    CHECK(*v.counters.global_step == 42);
  }
}
