#include "analytics/coverage/loader_run.h"

#include <algorithm>
#include <map>

#include "analytics/coverage/torch_randperm.h"
#include "analytics/input/json_text.h"
#include "analytics/lr/lr_foreign.h"
#include "analytics/lr/lr_log.h"
#include "ckpt/base/text.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {
namespace {

std::vector<std::string> split_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  for (char c : line) {
    if (c == ',') {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

}  // namespace

Result<LaunchSteps> launch_from_csv_text(const std::string& text, const std::string& path) {
  LaunchSteps l{path, -1, -1};
  int col = -1;
  LineCursor lines(text);
  for (std::string_view line; lines.next(&line);) {
    const int64_t no = lines.number();
    const std::vector<std::string> cells = split_cells(std::string(line));
    if (cells.size() == 1 && cells[0].empty()) continue;
    if (col < 0) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "step") col = static_cast<int>(i);
      }
      if (col < 0) return corrupt(path + ":" + std::to_string(no) + ": no \"step\" column");
      continue;
    }
    if (static_cast<size_t>(col) >= cells.size() || cells[col].empty()) continue;
    const std::string& cell = cells[col];
    if (cell.size() > 15 || cell.find_first_not_of("0123456789") != std::string::npos) {
      return corrupt(path + ":" + std::to_string(no) + ": step must be a non-negative integer, " +
                     "got \"" + escape_bytes(cell, 40) + "\"");
    }
    const int64_t s = std::stoll(cell);
    l.first_step = l.first_step < 0 ? s : std::min(l.first_step, s);
    l.last_step = std::max(l.last_step, s);
  }
  return l;
}

namespace {

// The cursor of a replay: the epoch, steps taken in it, and how many of those steps a fresh
// loader did not read (Lightning restarting an epoch without loader state counts the batches
// done before the restart, but its new iterator starts at position 0).
struct Cursor {
  uint64_t epoch = 0;
  uint64_t step_in_epoch = 0;
  uint64_t shift = 0;
  uint64_t chain = 0;  // which generator the orders come from (one per unrestored loader)
};

uint64_t order_key(uint64_t chain, uint64_t epoch) { return (chain << 32) | epoch; }

struct Geometry {
  uint64_t n = 0;
  uint64_t b = 0;
  uint64_t spe = 0;  // steps per epoch
};

// Where a checkpoint's loader stood: epoch and batches done (an epoch's end is the next one's
// start when the loader resumes).
Cursor cursor_of(const LoaderCheckpoint& c, const Geometry& g) {
  Cursor k;
  const int64_t batches = c.loader ? c.loader->batches : c.batches_in_epoch.value_or(0);
  if (c.epoch) {
    k.epoch = static_cast<uint64_t>(*c.epoch);
  } else {
    const int64_t done = std::max<int64_t>(0, c.step - batches);
    k.epoch = static_cast<uint64_t>(done) / g.spe;
  }
  k.step_in_epoch = static_cast<uint64_t>(std::max<int64_t>(0, batches));
  if (k.step_in_epoch >= g.spe || (c.loader && c.loader->finished)) {
    ++k.epoch;
    k.step_in_epoch = 0;
  }
  return k;
}

Result<uint32_t> batch_size_of(const std::vector<LoaderCheckpoint>& cks, uint64_t n, uint32_t flag,
                               std::vector<std::string>* assumptions) {
  for (const auto& c : cks) {
    if (!c.loader || !c.loader->samples_yielded || !c.loader->sampler_batches) continue;
    const int64_t s = *c.loader->samples_yielded, k = *c.loader->sampler_batches;
    if (k <= 0 || s <= 0 || static_cast<uint64_t>(s) >= n || s % k != 0) continue;
    const int64_t b = s / k;
    if (flag != 0 && flag != b) {
      return invalid_argument(c.source + ": the loader state yielded " + std::to_string(s) +
                              " samples in " + std::to_string(k) + " batches (batch size " +
                              std::to_string(b) + "), not --batch-size " + std::to_string(flag));
    }
    assumptions->push_back("batch size " + std::to_string(b) + ": " + c.source + "'s loader " +
                           "state yielded " + std::to_string(s) + " samples in " +
                           std::to_string(k) + " batches");
    return static_cast<uint32_t>(b);
  }
  if (flag != 0) return flag;
  for (const auto& c : cks) {
    if (c.batch_size_hparam && *c.batch_size_hparam > 0 && *c.batch_size_hparam < (1 << 30)) {
      assumptions->push_back("batch size " + std::to_string(*c.batch_size_hparam) +
                             " from hyper_parameters[\"batch_size\"] of " + c.source);
      return static_cast<uint32_t>(*c.batch_size_hparam);
    }
  }
  return invalid_argument(cks.front().source +
                          ": the batch size is not in these checkpoints (no loader state, no "
                          "hyper_parameters[\"batch_size\"]): give --batch-size B");
}

// A Lightning checkpoint at an epoch's last batch shows the steps per epoch.
Status check_steps_per_epoch(const std::vector<LoaderCheckpoint>& cks, const Geometry& g) {
  for (const auto& c : cks) {
    if (!c.lightning || !c.last_batch || !c.batches_in_epoch) continue;
    if (static_cast<uint64_t>(*c.batches_in_epoch) != g.spe) {
      return invalid_argument(
          c.source + ": its epoch ended after " + std::to_string(*c.batches_in_epoch) +
          " batches, but " + std::to_string(g.n) + " samples in batches of " + std::to_string(g.b) +
          " make " + std::to_string(g.spe) + "; are --dataset-size and the batch size right?");
    }
  }
  return Status::ok();
}

// The permutations of chains whose generator states are known: each saved state gives its
// epoch, later epochs follow by drawing on — `draws` randperms an epoch (with workers torch's
// multiprocessing iterator makes its sampler iterator twice, in __init__ and in _reset, and the
// first one's permutation is thrown away). A saved state that differs from the one drawn on is
// used for its epoch and noted.
void add_known_orders(const std::map<uint64_t, std::map<uint64_t, std::string>>& states,
                      const std::vector<Visit>& visits, uint64_t n, int draws, CoverageInput* in,
                      std::vector<std::string>* notes) {
  std::map<uint64_t, uint64_t> last_epoch;  // chain -> last epoch visited
  for (const auto& v : visits) {
    uint64_t& e = last_epoch[v.order_key >> 32];
    e = std::max(e, v.order_key & 0xffffffffu);
  }
  for (const auto& [chain, by_epoch] : states) {
    if (by_epoch.empty() || last_epoch.count(chain) == 0) continue;
    uint64_t epoch = by_epoch.begin()->first;
    auto gen = TorchCpuGenerator::from_state(by_epoch.begin()->second);
    for (; gen && epoch <= last_epoch[chain]; ++epoch) {
      auto saved = by_epoch.find(epoch);
      if (saved != by_epoch.end()) {
        auto own = TorchCpuGenerator::from_state(saved->second);
        if (!own) break;
        TorchCpuGenerator probe = *gen, check = *own;
        if (probe.random() != check.random() || probe.random() != check.random()) {
          notes->push_back("the generator state saved for epoch " + std::to_string(epoch) +
                           " is not the one left after epoch " + std::to_string(epoch - 1) +
                           "'s permutation (something else draws from the sampler's generator)");
        }
        gen = own;
      }
      std::vector<int64_t> perm = torch_randperm(n, *gen);
      in->orders[order_key(chain, epoch)] = make_table_order(perm);
      for (int d = 1; d < draws; ++d) torch_randperm(n, *gen);
    }
  }
}

// Step 2: the launches one at a time, each from its checkpoint's cursor, into out->input.
class LaunchReplay {
 public:
  LaunchReplay(const std::vector<LoaderCheckpoint>& cks, const Geometry& g, bool sequential,
               DerivedLoaderRun* out)
      : cks_(cks), g_(g), sequential_(sequential), out_(out) {
    for (const auto& c : cks) any_loader_ = any_loader_ || c.loader.has_value();
  }

  Status run(const LaunchSteps& l) {
    Cursor c;
    int64_t start = 0;
    const int64_t end = l.last_step + 1;
    if (segments_.empty()) {
      c.chain = next_chain_++;
    } else {
      CKPT_ASSIGN_OR_RETURN(c, resume(l, &start));
    }
    if (end < start) {
      return corrupt(l.source + ": logged steps " + std::to_string(l.first_step) + ".." +
                     std::to_string(l.last_step) +
                     " end before the checkpoint it resumed from (step " + std::to_string(start) +
                     ")");
    }
    segments_.push_back({start, end});
    chains_.push_back(c.chain);
    collect_states(c.chain, start, end);
    walk(c, static_cast<uint64_t>(end - start));
    return Status::ok();
  }

  // chain -> epoch -> the generator state saved at that epoch's start.
  const std::map<uint64_t, std::map<uint64_t, std::string>>& states() const { return states_; }

 private:
  uint64_t length() const { return out_->input.sampler.epoch_length(); }

  // Where a later launch started: the newest checkpoint at or before its first logged step.
  Result<Cursor> resume(const LaunchSteps& l, int64_t* start) {
    const LoaderCheckpoint* from = nullptr;
    for (const auto& ck : cks_) {
      if (ck.step <= l.first_step) from = &ck;
    }
    if (from == nullptr) {
      return corrupt(l.source + ": its first logged step is " + std::to_string(l.first_step) +
                     ", but no checkpoint is that early");
    }
    *start = from->step;
    Cursor c = cursor_of(*from, g_);
    RestartEvidence ev{from->step, from->source, from->loader.has_value(), c.epoch, 0, ""};
    if (from->loader) {
      // The loader continues the generator of the launch that wrote the checkpoint: the latest
      // one whose steps reach it.
      size_t writer = 0;
      for (size_t j = 0; j < segments_.size(); ++j) {
        if (segments_[j].first < *start && *start <= segments_[j].second) writer = j;
      }
      c.chain = chains_[writer];
      ev.position = std::min(length(), c.step_in_epoch * g_.b);
      ev.evidence = resumed_evidence(*from->loader, c.epoch, ev.position);
    } else {
      c.chain = next_chain_++;
      c.shift = c.step_in_epoch;
      ev.evidence =
          std::string("no loader state (") +
          (from->lightning ? "loops.fit_loop.state_dict has no combined_loader" : "none saved") +
          "): the epoch restarted from its first batch with a fresh shuffle; " +
          std::to_string(g_.spe - c.step_in_epoch) + " batches left in epoch " +
          std::to_string(c.epoch) + " read positions [0, " +
          std::to_string(std::min(length(), (g_.spe - c.step_in_epoch) * g_.b)) +
          ") of an order that was not saved";
    }
    out_->restarts.push_back(ev);
    out_->input.restarts.push_back({*start, c.epoch, ev.position});
    return c;
  }

  static std::string resumed_evidence(const LoaderState& s, uint64_t epoch, uint64_t position) {
    return "StatefulDataLoader state at " + s.where + ": " + std::to_string(s.batches) +
           " batches of the epoch yielded" + (s.finished ? " and the epoch finished" : "") +
           "; the loader resumed at epoch " + std::to_string(epoch) + " position " +
           std::to_string(position) +
           (s.generator_state.empty()
                ? ""
                : "; RandomSampler generator state saved: the order is reproduced");
  }

  // The generator states the checkpoints this launch wrote saved, by the epoch they start.
  void collect_states(uint64_t chain, int64_t start, int64_t end) {
    for (const auto& ck : cks_) {
      if (ck.step <= start || ck.step > end || !ck.loader || ck.loader->generator_state.empty()) {
        continue;
      }
      const Cursor at = cursor_of(ck, g_);
      // A state taken at an epoch's end still belongs to that epoch.
      const uint64_t e = at.step_in_epoch == 0 && ck.loader->batches > 0 ? at.epoch - 1 : at.epoch;
      states_[chain].emplace(e, ck.loader->generator_state);
    }
  }

  void walk(Cursor c, uint64_t steps) {
    while (steps > 0) {
      const uint64_t take = std::min(steps, g_.spe - c.step_in_epoch);
      Visit v;
      v.epoch = c.epoch;
      v.order_key = sequential_ ? 0 : order_key(c.chain, c.epoch);
      v.begin = std::min(length(), (c.step_in_epoch - c.shift) * g_.b);
      v.end = std::min(length(), (c.step_in_epoch - c.shift + take) * g_.b);
      out_->input.visits.push_back(v);
      steps -= take;
      c.step_in_epoch += take;
      if (c.step_in_epoch == g_.spe) {
        ++c.epoch;
        c.step_in_epoch = 0;
        c.shift = 0;
        if (!any_loader_) c.chain = next_chain_++;  // a plain loader reshuffles, unseeded
      }
    }
  }

  const std::vector<LoaderCheckpoint>& cks_;
  const Geometry g_;
  const bool sequential_;
  bool any_loader_ = false;
  DerivedLoaderRun* out_;
  std::vector<std::pair<int64_t, int64_t>> segments_;  // [start, end) per launch
  std::vector<uint64_t> chains_;                       // per launch
  std::map<uint64_t, std::map<uint64_t, std::string>> states_;
  uint64_t next_chain_ = 0;
};

// Step 4: the sampler geometry (batch size found or asked, steps per epoch checked).
Result<Geometry> configure(const std::vector<LoaderCheckpoint>& cks, uint64_t n, uint32_t flag,
                           bool sequential, DerivedLoaderRun* out) {
  CKPT_ASSIGN_OR_RETURN(uint32_t b, batch_size_of(cks, n, flag, &out->assumptions));
  SamplerConfig& cfg = out->input.sampler;
  cfg.dataset_size = n;
  cfg.batch_size = b;
  cfg.world_size = 1;
  cfg.grad_accum = 1;
  cfg.drop_last = false;
  cfg.kind = sequential ? SamplerKind::kSequential : SamplerKind::kTorchRandom;
  cfg.shuffle = !sequential;
  out->input.orders_given = !sequential;
  CKPT_RETURN_IF_ERROR(validate_sampler(cfg));
  const Geometry g{n, b, cfg.steps_per_epoch()};
  CKPT_RETURN_IF_ERROR(check_steps_per_epoch(cks, g));
  out->assumptions.push_back("one process, drop_last false: " + std::to_string(g.spe) +
                             " steps an epoch of " + std::to_string(n) +
                             " samples (a step is one batch; gradient accumulation is not in "
                             "these checkpoints)");
  return g;
}

// Step 3: the orders rebuilt from the saved generator states, and what is left unknown.
void finish_orders(const std::vector<LoaderCheckpoint>& cks, const LaunchReplay& replay,
                   DerivedLoaderRun* out) {
  int workers = 0;
  for (const auto& c : cks) workers = std::max(workers, c.loader ? c.loader->workers : 0);
  add_known_orders(replay.states(), out->input.visits, out->input.sampler.dataset_size,
                   workers > 0 ? 2 : 1, &out->input, &out->assumptions);
  size_t unknown = 0;
  for (const auto& v : out->input.visits) unknown += out->input.orders.count(v.order_key) ? 0 : 1;
  out->assumptions.push_back(
      unknown == 0
          ? "sampler: torchdata's RandomSampler; every epoch's order is torch.randperm from the "
            "generator state the loader saved (later epochs drawn on from it)"
          : "sampler: shuffled (RandomSampler assumed) with an unseeded generator the "
            "checkpoints do not hold: " +
                std::to_string(unknown) +
                " pieces of epochs have unknown orders; epochs that mix them are bounded");
  if (out->certainty.empty()) {
    out->certainty = unknown == 0 ? "exact: orders reproduced, launches from the logs"
                                  : "bounded: positions exact, sample ids unknown where the "
                                    "shuffle was not saved";
  }
}

}  // namespace

Result<std::vector<LaunchSteps>> launches_from_logs(Env* env, const std::string& dir) {
  std::vector<LaunchSteps> out;
  auto tb = scalar_log_from_tensorboard(env, dir);
  if (tb.is_ok()) {
    for (const auto& l : tb->launches) {
      if (l.samples.empty()) continue;
      LaunchSteps s{l.source, l.samples.front().step, l.samples.front().step};
      for (const auto& x : l.samples) {
        s.first_step = std::min(s.first_step, x.step);
        s.last_step = std::max(s.last_step, x.step);
      }
      out.push_back(s);
    }
    return out;
  }
  if (tb.status().code() != Code::kNotFound) return tb.status();
  std::vector<std::string> files;
  for (const auto& a : env->list_dir_or_empty(dir)) {
    const std::string pa = dir + "/" + a;
    if (!env->is_dir(pa)) continue;
    for (const auto& b : env->list_dir_or_empty(pa)) {
      const std::string f = pa + "/" + b + "/metrics.csv";
      if (env->file_size(f).is_ok()) files.push_back(f);
      if (files.size() > kMaxLogTreeFiles) return corrupt(dir + ": too many metrics.csv files");
    }
  }
  std::sort(files.begin(), files.end(), lr_tag_order);
  for (const auto& f : files) {
    CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, f, kMaxLogFileBytes));
    CKPT_ASSIGN_OR_RETURN(LaunchSteps l, launch_from_csv_text(text, f));
    if (l.first_step >= 0) out.push_back(l);
  }
  return out;
}

Result<DerivedLoaderRun> derive_loader_run(std::vector<LoaderCheckpoint> cks,
                                           const std::vector<LaunchSteps>& launches,
                                           uint64_t dataset_size, uint32_t batch_size_flag) {
  if (cks.empty()) return invalid_argument("no loader checkpoint");
  std::stable_sort(
      cks.begin(), cks.end(),
      [](const LoaderCheckpoint& a, const LoaderCheckpoint& b) { return a.step < b.step; });
  if (dataset_size == 0) {
    return invalid_argument(cks.front().source +
                            ": the dataset size is not in the checkpoints: give --dataset-size N "
                            "(the number of training samples)");
  }
  DerivedLoaderRun out;
  out.kind = cks.front().lightning ? "lightning" : "stateful_dataloader";
  bool any_loader = false, any_generator = false;
  for (const auto& c : cks) {
    any_loader = any_loader || c.loader.has_value();
    any_generator = any_generator || (c.loader && !c.loader->generator_state.empty());
  }
  const bool sequential = any_loader && !any_generator;
  CKPT_ASSIGN_OR_RETURN(Geometry g,
                        configure(cks, dataset_size, batch_size_flag, sequential, &out));

  // 1. Launches: from the logs, else one through the last checkpoint.
  out.launches = launches;
  if (out.launches.empty()) {
    out.launches.push_back({"(no logs)", 0, cks.back().step - 1});
    out.assumptions.push_back("no TensorBoard or CSV logs: restarts unknown, one launch of " +
                              std::to_string(cks.back().step) + " steps (to the last checkpoint)");
    out.certainty = "uncertain: without the launches' logs, restarts and lost steps are unknown";
  }
  // 2. Replay.
  LaunchReplay replay(cks, g, sequential, &out);
  for (const auto& l : out.launches) CKPT_RETURN_IF_ERROR(replay.run(l));
  // 3. Orders.
  if (!sequential) {
    finish_orders(cks, replay, &out);
  } else {
    out.assumptions.push_back(
        "sampler: in order assumed (SequentialSampler): the loader states hold no generator; a "
        "torch RandomSampler passed in as sampler= saves none either, and its orders would be "
        "unknown");
    if (out.certainty.empty()) out.certainty = "exact: sequential order, launches from the logs";
  }
  return out;
}

}  // namespace ckpt::analytics
