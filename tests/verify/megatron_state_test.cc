// Megatron's state dict onto the contract, on trees built in memory: the scheduler's closed-form
// LR against the param groups, the sampler cursor against iteration x global batch, an empty RNG
// tracker, the missing pieces, and the per-rank check. The real files are in
// fixtures/foreign/megatron (tests/audit_fixtures).
#include "verify/formats/megatron_state.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

using namespace ckpt::verify;

struct Tree {
  PickleDoc doc;
  Value* dict() { return doc.make(Kind::kDict); }
  Value* list() { return doc.make(Kind::kList); }
  const Value* num(double x) {
    Value* v = doc.make(Kind::kFloat);
    v->f = x;
    return v;
  }
  const Value* integer(int64_t x) {
    Value* v = doc.make(Kind::kInt);
    v->i = x;
    return v;
  }
  const Value* str(const std::string& s) {
    Value* v = doc.make(Kind::kStr);
    v->s = s;
    return v;
  }
  void put(Value* d, const std::string& k, const Value* v) { d->entries.emplace_back(str(k), v); }
};

// A run at iteration 3 with global batch 2, cosine decay from 1e-3 to 1e-4 after 4 warmup samples
// over 20; `lr` is what the param group holds, `consumed` the sampler cursor.
Value* megatron_root(Tree& t, double lr, int64_t consumed, int64_t num_steps = 6,
                     bool tracker = true) {
  Value* root = t.dict();
  Value* args = t.dict();
  t.put(args, "global_batch_size", t.integer(2));
  t.put(args, "consumed_train_samples", t.integer(consumed));
  t.put(args, "rampup_batch_size", t.doc.make(Kind::kNone));
  t.put(args, "lr_warmup_init", t.num(0));
  t.put(root, "args", args);
  t.put(root, "iteration", t.integer(3));
  Value* s = t.dict();
  t.put(s, "max_lr", t.num(1e-3));
  t.put(s, "min_lr", t.num(1e-4));
  t.put(s, "lr_warmup_steps", t.integer(4));
  t.put(s, "num_steps", t.integer(num_steps));
  t.put(s, "lr_decay_steps", t.integer(20));
  t.put(s, "lr_decay_style", t.str("cosine"));
  t.put(root, "opt_param_scheduler", s);
  Value* opt = t.dict();
  Value* groups = t.list();
  Value* g = t.dict();
  t.put(g, "lr", t.num(lr));
  groups->items.push_back(g);
  t.put(opt, "param_groups", groups);
  t.put(root, "optimizer", opt);
  Value* rng = t.list();
  Value* e = t.dict();
  Value* tr = t.dict();
  if (tracker) t.put(tr, "model-parallel-rng", t.str("state"));
  t.put(e, "rng_tracker_states", tr);
  rng->items.push_back(e);
  t.put(root, "rng_state", rng);
  return root;
}

bool has_finding(const CheckpointView& v, AuditComponent c, const std::string& text) {
  for (const auto& f : v.findings) {
    if (f.component == c && f.inconsistent && f.message.find(text) != std::string::npos)
      return true;
  }
  return false;
}

TEST_CASE("Megatron: a consistent state dict maps onto every part", "[verify]") {
  Tree t;
  CheckpointView v;
  v.rng_cuda.found = true;  // as detection would have it from cuda_rng_state
  add_megatron_state(*megatron_root(t, 0.000965745789630079, 6), "f.pt", &v);
  CHECK(v.findings.empty());
  CHECK(v.counters.global_step == 3);
  REQUIRE(v.scheduler.found);
  CHECK(v.scheduler.last_epoch == 3);  // 6 samples / global batch 2
  CHECK(v.scheduler.base_lrs == std::vector<double>{1e-3});
  CHECK(v.scheduler.evidence.find("LR at num_steps 0.000965746") != std::string::npos);
  REQUIRE(v.loader.found);
  CHECK(v.loader.samples == 6);
  CHECK(v.rng_cuda.evidence.find("1 state(s) (model-parallel-rng)") != std::string::npos);
  CHECK(v.config_digest.has_value());
}

TEST_CASE("Megatron: the LR, the cursor and the RNG tracker are checked", "[verify]") {
  Tree t;
  CheckpointView v;
  add_megatron_state(*megatron_root(t, 0.0009, 5, 6, false), "f.pt", &v);
  CHECK(has_finding(v, AuditComponent::kScheduler, "param_groups[0].lr 0.0009 != 0.000965746"));
  CHECK(has_finding(v, AuditComponent::kLoader,
                    "consumed_train_samples 5 != iteration 3 x global_batch_size 2 = 6"));
  CHECK(has_finding(v, AuditComponent::kRngCuda, "rng_tracker_states is empty"));
}

TEST_CASE("Megatron: the warmup part of the schedule", "[verify]") {
  Tree t;
  CheckpointView v;
  // num_steps 2 of 4 warmup samples from init_lr 0: half of max_lr.
  add_megatron_state(*megatron_root(t, 5e-4, 6, 2), "f.pt", &v);
  CHECK_FALSE(has_finding(v, AuditComponent::kScheduler, "param_groups"));
  Tree t2;
  CheckpointView v2;
  add_megatron_state(*megatron_root(t2, 1e-3, 6, 2), "f.pt", &v2);
  CHECK(has_finding(v2, AuditComponent::kScheduler, "!= 0.0005"));
}

TEST_CASE("Megatron: what a missing optimizer or RNG does, from args", "[verify]") {
  Tree t;
  Value* root = t.dict();
  Value* args = t.dict();
  Value* yes = t.doc.make(Kind::kBool);
  yes->b = true;
  yes->i = 1;
  t.put(args, "no_save_optim", yes);
  t.put(args, "no_save_rng", yes);
  t.put(root, "args", args);
  t.put(root, "iteration", t.integer(3));
  CheckpointView v;
  add_megatron_state(*root, "f.pt", &v);
  CHECK(v.optimizer.evidence.find("saved with --no-save-optim") != std::string::npos);
  CHECK(v.scheduler.evidence.find("back into warmup") != std::string::npos);
  CHECK(v.format_gaps.at(AuditComponent::kRngCpu).find("saved with --no-save-rng") !=
        std::string::npos);
  CHECK(v.loader.evidence.find("no consumed_train_samples") != std::string::npos);
}

TEST_CASE("Megatron: every rank file holds what the others hold", "[verify]") {
  Tree t;
  Value* r0 = megatron_root(t, 0.000965745789630079, 6);
  Value* r1 = t.dict();
  t.put(r1, "iteration", t.integer(4));
  t.put(r1, "optimizer", t.dict());
  t.put(r1, "opt_param_scheduler", t.dict());
  t.put(r1, "model", t.dict());
  t.put(r0, "model", t.dict());
  CheckpointView v;
  check_megatron_ranks({{"mp_rank_00/f.pt", r0, ""},
                        {"mp_rank_01/f.pt", r1, ""},
                        {"mp_rank_02/f.pt", nullptr, "missing: no such file"}},
                       &v);
  CHECK(has_finding(v, AuditComponent::kRngCpu, "mp_rank_01/f.pt has no rng_state"));
  CHECK(has_finding(v, AuditComponent::kCounters,
                    "mp_rank_01/f.pt: iteration 4 != 3 in mp_rank_00/f.pt"));
  CHECK(has_finding(v, AuditComponent::kModel, "mp_rank_02/f.pt: missing"));
}

}  // namespace
