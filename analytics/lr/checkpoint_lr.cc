#include "analytics/lr/checkpoint_lr.h"

#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"
#include "ckpt/sched/scheduler.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace ckpt::analytics {

Result<LrSeries> lr_from_checkpoints(Env* env, const std::string& run_dir) {
  CKPT_ASSIGN_OR_RETURN(auto entries, store::list_checkpoints(env, run_dir));
  LrSeries out;
  out.source = run_dir;
  out.format = "checkpoints";
  store::ReadOptions options;
  options.metadata_only = true;
  for (const auto& entry : entries) {
    if (!entry.committed) continue;
    const std::string name = step_dir_name(entry.step);
    auto root = store::read_rank(env, entry.dir, 0, options);
    if (!root.is_ok()) {
      out.warnings.push_back(name + ": " + root.status().message());
      continue;
    }
    const Node* node = root->find_child("scheduler");
    if (node == nullptr) {
      out.warnings.push_back(name + ": no scheduler component");
      continue;
    }
    auto scheduler = sched::Scheduler::from_node(*node);
    if (!scheduler.is_ok()) {
      out.warnings.push_back(
          name + ": scheduler not in ckpt's closed-form layout: " + scheduler.status().message());
      continue;
    }
    out.points.push_back({scheduler->last_step(), scheduler->lr()});
    out.schedule = scheduler->spec();  // the newest checkpoint's spec wins
  }
  if (out.points.empty()) {
    return corrupt(run_dir +
                   ": no journal.jsonl and no committed checkpoint with a readable "
                   "scheduler component");
  }
  // Checkpoints are listed by ascending step; a scheduler restarted by a resume may repeat a
  // last_step: keep the later checkpoint's value, as for logs.
  std::vector<LrPoint> unique;
  for (const auto& p : out.points) {
    if (!unique.empty() && unique.back().step >= p.step) {
      while (!unique.empty() && unique.back().step >= p.step) unique.pop_back();
    }
    unique.push_back(p);
  }
  out.points = std::move(unique);
  return out;
}

}  // namespace ckpt::analytics
