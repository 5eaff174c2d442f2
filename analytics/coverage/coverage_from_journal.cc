#include "analytics/coverage/coverage_from_journal.h"

namespace ckpt::analytics {
namespace {

void add_visit(CoverageInput* in, uint64_t epoch, uint64_t begin, uint64_t end) {
  if (end <= begin) return;
  const uint64_t key = default_order_key(in->sampler, epoch);
  if (!in->visits.empty()) {
    Visit& last = in->visits.back();
    if (last.epoch == epoch && last.order_key == key && last.end == begin) {
      last.end = end;
      return;
    }
  }
  in->visits.push_back({epoch, key, begin, end});
}

}  // namespace

Result<CoverageInput> coverage_input_from_journal(const RunJournal& journal) {
  CoverageInput in;
  bool have_sampler = false;
  SamplerConfig current;
  int starts = 0;
  bool restart_pending = false;
  // The previous progress event of the current process, to fill gaps in sparse logs.
  bool have_prev = false;
  int64_t prev_step = 0;
  uint64_t prev_epoch = 0, prev_end = 0;

  for (const auto& e : journal.events) {
    const std::string where = journal.path + ":" + std::to_string(e.line);
    if (e.kind == store::JournalEventType::kStart) {
      have_prev = false;
      if (starts++ > 0) restart_pending = true;
      if (!e.sampler) continue;
      SamplerConfig c;
      auto kind = sampler_kind_from(e.sampler->kind);
      if (!kind.is_ok()) return corrupt(where + ": " + kind.status().message());
      c.kind = *kind;
      c.dataset_size = e.sampler->spec.dataset_size;
      c.seed = e.sampler->spec.seed;
      c.shuffle = e.sampler->spec.shuffle;
      c.drop_last = e.sampler->spec.drop_last;
      c.world_size = e.sampler->spec.world_size;
      c.batch_size = e.sampler->spec.batch_size;
      c.grad_accum = static_cast<uint32_t>(e.grad_accum);
      Status valid = validate_sampler(c);
      if (!valid.is_ok()) return Status(valid.code(), where + ": " + valid.message());
      if (have_sampler && (c.kind != in.sampler.kind || c.dataset_size != in.sampler.dataset_size ||
                           c.seed != in.sampler.seed || c.shuffle != in.sampler.shuffle)) {
        return unsupported(where +
                           ": the dataset or its order changed between processes "
                           "(dataset_size, seed, shuffle or kind); coverage compares one dataset");
      }
      if (!have_sampler) in.sampler = c;
      current = c;
      have_sampler = true;
      continue;
    }
    if (e.kind != store::JournalEventType::kProgress || !e.cursor) continue;
    if (!have_sampler) {
      return corrupt(where +
                     ": \"progress\" with a loader cursor before any \"start\" that "
                     "describes the sampler");
    }
    const uint64_t length = std::min(current.epoch_length(), in.sampler.epoch_length());
    const loader::LoaderCursor c = *e.cursor;
    if (c.position > length) {
      return corrupt(where + ": position " + std::to_string(c.position) +
                     " is beyond the epoch's " + std::to_string(length) + " positions");
    }
    if (restart_pending) {
      in.restarts.push_back({e.step, c.epoch, c.position});
      restart_pending = false;
    }
    if (have_prev && e.step > prev_step + 1) {
      // Steps between two logged steps consumed the positions in between, in order.
      if (c.epoch == prev_epoch) {
        add_visit(&in, prev_epoch, prev_end, std::max(prev_end, c.position));
      } else if (c.epoch > prev_epoch) {
        add_visit(&in, prev_epoch, prev_end, length);
        for (uint64_t ep = prev_epoch + 1; ep < c.epoch; ++ep) add_visit(&in, ep, 0, length);
        add_visit(&in, c.epoch, 0, c.position);
      }
    }
    const uint64_t end = std::min(length, c.position + current.step_positions());
    add_visit(&in, c.epoch, c.position, end);
    have_prev = true;
    prev_step = e.step;
    prev_epoch = c.epoch;
    prev_end = end;
  }
  if (!have_sampler) {
    return corrupt(journal.path + ": no \"start\" event describes the sampler");
  }
  return in;
}

Result<CoverageInput> coverage_input_from_run(Env* env, const std::string& run_dir) {
  CKPT_ASSIGN_OR_RETURN(RunJournal journal, read_journal(env, run_dir));
  return coverage_input_from_journal(journal);
}

}  // namespace ckpt::analytics
