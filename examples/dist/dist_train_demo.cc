// ckpt-dist-demo: ckpt-train-demo's training task run data-parallel by W processes, one per rank,
// over c10d (TCPStore + Gloo on loopback), saving and resuming with ckpt.
//
// Same model, data, AdamW, warmup+cosine schedule and resumable sampler as ckpt-train-demo (see
// examples/demo_model.h). Every global step consumes batch_size * W consecutive positions of the
// epoch's order; rank r trains on the positions g with g mod W == r. Each rank's loss is its share
// of the global-batch mean (sum over its samples / samples in the whole global batch, times W), and
// allreduce_mean averages the gradients, so every rank applies the same update and the parameters
// stay identical. Dropout draws from the rank's own CPU generator (seeded seed + 1 + rank after the
// model is built from `seed`), which each rank's checkpoint file records.
//
// Saves: each rank writes its own rank file, rank 0 commits after a barrier that checks every rank
// is at the same step and loader cursor; rank 0 writes the journal. Every rank appends the sample
// ids it trained on to RUN/samples/rank-R-<start step>.txt (one line per step: step epoch position
// ids...), so tests can check that no sample was lost or repeated across a restart, also one that
// changes W. The last stdout line is `final_params_xxh3 <16 hex>`, after all ranks have confirmed
// they hold identical parameters.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "ckpt/base/hash.h"
#include "ckpt/dist/checkpoint_sync.h"
#include "ckpt/dist/process_group.h"
#include "ckpt/format/manifest.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/scheduler.h"
#include "examples/demo_model.h"
#include "profile/recorder/recorder.h"
#include "train/checkpointer.h"

namespace {

struct DistDemoOptions {
  std::string run_dir;
  int64_t steps = 200;
  int64_t save_every = 25;
  int64_t stop_at = -1;
  int64_t crash_at = -1;
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t port = 0;
  std::string port_file;
  int64_t timeout_ms = 30000;
  int64_t dataset_size = 3000;
  double slow_loader_ms = 0;
  int keep_last = 3;
  uint64_t seed = 7;
  bool async_save = false;
};

constexpr int kCrashExit = 3;

std::string tag(const DistDemoOptions& o) {
  return "ckpt-dist-demo[rank " + std::to_string(o.rank) + "/" + std::to_string(o.world_size) + "]";
}

// Fails unless every rank holds the same parameters; returns the digest they agree on.
ckpt::Result<uint64_t> agreed_digest(ckpt::dist::ProcessGroupContext& group,
                                     const torch::nn::Module& model) {
  const uint64_t mine = demo::params_digest(model);
  CKPT_ASSIGN_OR_RETURN(auto rows, group.allgather({static_cast<int64_t>(mine)}));
  CKPT_RETURN_IF_ERROR(ckpt::dist::check_agreement(rows, {"params_xxh3"}, "final parameters"));
  return mine;
}

class DistDemo {
 public:
  explicit DistDemo(const DistDemoOptions& o) : o_(o) {}
  int run();

 private:
  int fail(const std::string& what, const ckpt::Status& s) {
    std::cerr << tag(o_) << ": " << what << ": " << s.to_string() << "\n";
    return 1;
  }
  void warn_if(const ckpt::Status& s, const char* what) {
    if (!s.is_ok()) std::cerr << tag(o_) << ": warning: " << what << ": " << s.to_string() << "\n";
  }
  int finish(ckpt::dist::ProcessGroupContext& group, const demo::Mlp& model);

  const DistDemoOptions& o_;
};

int DistDemo::finish(ckpt::dist::ProcessGroupContext& group, const demo::Mlp& model) {
  auto digest = agreed_digest(group, *model);
  if (!digest.is_ok()) return fail("parameters differ between ranks", digest.status());
  std::cout << "final_params_xxh3 " << ckpt::hex64(*digest) << "\n";
  return 0;
}

int DistDemo::run() {
  const uint32_t W = static_cast<uint32_t>(o_.world_size);
  const uint32_t R = static_cast<uint32_t>(o_.rank);
  ckpt::dist::ProcessGroupOptions gopts;
  gopts.rank = o_.rank;
  gopts.world_size = o_.world_size;
  gopts.master_addr = o_.master_addr;
  gopts.port = o_.port;
  gopts.port_file = o_.port_file;
  gopts.timeout = std::chrono::milliseconds(o_.timeout_ms);
  auto created = ckpt::dist::ProcessGroupContext::create(gopts);
  if (!created.is_ok()) return fail("process group", created.status());
  ckpt::dist::ProcessGroupContext& group = **created;

  torch::manual_seed(o_.seed);  // identical initial weights on every rank
  demo::Dataset data = demo::make_dataset(o_.dataset_size, /*seed=*/1234);
  demo::Mlp model = demo::make_model();
  torch::manual_seed(o_.seed + 1 + R);  // this rank's dropout stream
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));

  const ckpt::sched::ScheduleSpec spec = demo::make_schedule(o_.steps);
  ckpt::sched::Scheduler scheduler(spec);
  const ckpt::loader::SamplerSpec sspec = demo::make_sampler_spec(data, o_.seed, W);
  ckpt::loader::ResumableSampler sampler(sspec, R);
  ckpt::TrainCounters counters;
  counters.config = "demo mlp adamw warmup_cosine steps=" + std::to_string(o_.steps) +
                    " dataset=" + std::to_string(o_.dataset_size);

  ckpt::CheckpointerOptions copts;
  copts.run_dir = o_.run_dir;
  copts.keep_last = o_.keep_last;
  copts.rank = o_.rank;
  copts.world_size = o_.world_size;
  // Every save checks that the ranks are at the same step and data position before rank 0 commits.
  copts.barrier = ckpt::dist::checkpoint_barrier(
      &group,
      [&] {
        const ckpt::loader::LoaderCursor c = sampler.cursor();
        return std::vector<int64_t>{counters.global_step, static_cast<int64_t>(c.epoch),
                                    static_cast<int64_t>(c.position), counters.samples_seen};
      },
      {"global_step", "loader epoch", "loader position", "samples_seen"});
  ckpt::Checkpointer ck(copts);
  ckpt::Tracked tracked;
  tracked.model = model.ptr().get();
  tracked.optimizer = &opt;
  tracked.scheduler = &scheduler;
  tracked.sampler = &sampler;
  tracked.counters = &counters;
  ck.track(tracked);

  auto restored = ck.restore_latest();
  if (!restored.is_ok()) return fail("restore", restored.status());
  {
    // Every rank must have restored the same checkpoint (or none), or the run would fork.
    const ckpt::loader::LoaderCursor c = sampler.cursor();
    auto rows = group.allgather({restored->step, counters.global_step,
                                 static_cast<int64_t>(c.epoch), static_cast<int64_t>(c.position)});
    if (!rows.is_ok()) return fail("restore", rows.status());
    auto agree = ckpt::dist::check_agreement(
        *rows, {"checkpoint step", "global_step", "loader epoch", "loader position"}, "restore");
    if (!agree.is_ok()) return fail("restore", agree);
  }
  const nlohmann::json dist = {
      {"dist", {{"backend", "gloo"}, {"world_size", o_.world_size}, {"port", group.port()}}}};
  if (auto s = ck.log_start(*restored, dist); !s.is_ok()) return fail("journal", s);
  if (restored->restored) {
    std::cout << "restored " << restored->checkpoint << " (step " << restored->step
              << ", loader epoch " << sampler.cursor().epoch << " position "
              << sampler.cursor().position << "):";
    for (const auto& c : restored->components) std::cout << " " << ckpt::component_name(c);
    if (!restored->missing.empty()) {
      std::cout << "; missing:";
      for (const auto& c : restored->missing) std::cout << " " << ckpt::component_name(c);
    }
    std::cout << "\n";
    if (!restored->note.empty()) std::cout << "note: " << restored->note << "\n";
  } else {
    std::cout << "fresh start in " << o_.run_dir << " with " << W << " ranks\n";
  }

  // Per-rank logs, one file per process segment, named by the step it starts at.
  auto* env = ckpt::Env::posix();
  const std::string segment = ckpt::step_dir_name(counters.global_step);
  char rank_name[32];
  std::snprintf(rank_name, sizeof rank_name, "rank%05u", R);
  for (const char* sub : {"/profile", "/samples"}) {
    if (auto s = env->make_dirs(o_.run_dir + sub); !s.is_ok()) return fail("run dir", s);
  }
  const std::string samples_path = o_.run_dir + "/samples/" + rank_name + "-" + segment + ".txt";
  std::ofstream samples_log(samples_path, std::ios::trunc);
  if (!samples_log) return fail("samples log", ckpt::io_error("cannot create " + samples_path));
  ckpt::profile::RecorderOptions ropts;
  ropts.path = o_.run_dir + "/profile/" + rank_name + "-" + segment + ".jsonl";
  ropts.rank = o_.rank;
  ropts.world_size = o_.world_size;
  ropts.first_step = counters.global_step;
  auto opened = ckpt::profile::StepRecorder::open(std::move(ropts));
  if (!opened.is_ok()) return fail("profile", opened.status());
  std::unique_ptr<ckpt::profile::StepRecorder> rec = std::move(opened).value();
  using ckpt::profile::Phase;

  std::vector<torch::Tensor> params = model->parameters();
  model->train();
  while (counters.global_step < o_.steps) {
    const int64_t step = counters.global_step;
    if (sampler.at_epoch_end(sampler.cursor())) {
      sampler.set_cursor({sampler.cursor().epoch + 1, 0});
    }
    const ckpt::loader::LoaderCursor c = sampler.cursor();  // what this step consumes
    std::vector<int64_t> mine;
    std::vector<int64_t> global_ids;  // every rank's ids, for the journal's batch digest
    {
      auto phase = rec->phase(Phase::kDataWait);
      for (uint32_t r = 0; r < W; ++r) {
        for (uint64_t id : sampler.batch_at(c, r)) global_ids.push_back(static_cast<int64_t>(id));
      }
      for (uint64_t id : sampler.next_batch()) mine.push_back(static_cast<int64_t>(id));
      if (o_.slow_loader_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o_.slow_loader_ms));
      }
    }
    samples_log << step << " " << c.epoch << " " << c.position;
    for (int64_t id : mine) samples_log << " " << id;
    samples_log << "\n" << std::flush;

    const double lr = ckpt::sched::lr_at(scheduler.spec(), scheduler.last_step());
    demo::set_lr(opt, lr);
    // This rank's share of the global-batch mean, scaled by W because allreduce_mean divides by W:
    // the mean of the ranks' gradients is then the gradient of the global-batch mean even for the
    // epoch's short last step, where ranks hold different numbers of samples (or none).
    const double share = static_cast<double>(W) / static_cast<double>(global_ids.size());
    opt.zero_grad();
    torch::Tensor local_loss = torch::zeros({1});
    if (!mine.empty()) {
      torch::Tensor index = torch::tensor(mine, torch::kLong);
      torch::Tensor x = data.x.index_select(0, index);
      torch::Tensor y = data.y.index_select(0, index);
      torch::Tensor loss;
      {
        auto phase = rec->phase(Phase::kForward);
        loss = torch::nn::functional::cross_entropy(
                   model->forward(x), y,
                   torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) *
               share;
      }
      {
        auto phase = rec->phase(Phase::kBackward);
        loss.backward();
      }
      local_loss = loss.detach().reshape({1});
    }
    std::vector<torch::Tensor> reduce;
    for (torch::Tensor& p : params) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      reduce.push_back(p.grad());
    }
    reduce.push_back(local_loss);
    {
      auto phase = rec->phase(Phase::kCollective);
      if (auto s = group.allreduce_mean(reduce); !s.is_ok()) {
        return fail("gradient allreduce at step " + std::to_string(step), s);
      }
    }
    {
      auto phase = rec->phase(Phase::kOptimizer);
      opt.step();
    }
    scheduler.step();
    counters.global_step = step + 1;
    counters.epoch = static_cast<int64_t>(sampler.cursor().epoch);
    counters.samples_seen += static_cast<int64_t>(global_ids.size());
    warn_if(
        ck.log_progress({step, lr, reduce.back().item<double>(), c.epoch, c.position,
                         static_cast<int64_t>(global_ids.size()),
                         ckpt::xxh3_64(global_ids.data(), global_ids.size() * sizeof(int64_t))}),
        "journal");
    rec->end_step(static_cast<int64_t>(mine.size()), 0);

    const int64_t done = counters.global_step;
    if (done == o_.crash_at) {
      std::cout << "crash at step " << done << " (nothing saved since the last checkpoint)\n";
      std::cout.flush();
      std::_Exit(kCrashExit);
    }
    const bool stop = done == o_.stop_at;
    if (stop || done % o_.save_every == 0 || done == o_.steps) {
      auto phase = rec->phase(Phase::kCheckpoint);
      ckpt::SaveOptions how;
      how.blocking = !o_.async_save;
      if (auto s = ck.save(done, how); !s.is_ok())
        return fail("save at step " + std::to_string(done), s);
      std::cout << (o_.async_save ? "saving step " : "saved step ") << done
                << (o_.async_save ? " in the background\n" : "\n");
    }
    if (stop) {
      std::cout << "stopped at step " << done << " (preempted)\n";
      break;
    }
  }
  // Every rank at the same point: the barriers and commit of a save in flight.
  if (auto s = ck.wait(); !s.is_ok()) return fail("save", s);
  warn_if(rec->close(), "profile");
  return finish(group, model);
}

}  // namespace

int main(int argc, char** argv) {
  DistDemoOptions o;
  CLI::App app{
      "ckpt-dist-demo: ckpt-train-demo's MLP trained data-parallel by one process per "
      "rank (c10d Gloo), each rank writing its own checkpoint file, rank 0 committing.",
      "ckpt-dist-demo"};
  app.add_option("--run-dir", o.run_dir, "Run directory (checkpoints, journal.jsonl)")->required();
  app.add_option("--steps", o.steps, "Train until this global step")->check(CLI::PositiveNumber);
  app.add_option("--save-every", o.save_every, "Save every N steps")->check(CLI::PositiveNumber);
  app.add_option("--stop-at", o.stop_at, "Save at step K and exit 0 (a preempted job)");
  app.add_option("--crash-at", o.crash_at,
                 "Exit with status 3 at step K without saving (a crash; give it to one rank to "
                 "kill a peer mid-run)");
  app.add_option("--rank", o.rank, "This process's rank")->check(CLI::NonNegativeNumber);
  app.add_option("--world-size", o.world_size, "Number of processes")->check(CLI::Range(1, 64));
  app.add_option("--master-addr", o.master_addr, "Address of rank 0's store (and Gloo's bind)");
  app.add_option("--port", o.port,
                 "Port of rank 0's store; 0 = rank 0 picks one and writes it to --port-file");
  app.add_option("--port-file", o.port_file,
                 "With --port 0: file through which rank 0 publishes the port (fresh per launch)");
  app.add_option("--timeout-ms", o.timeout_ms,
                 "Bound on the rendezvous and every collective (a dead or hung peer fails the run "
                 "after at most this long)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dataset-size", o.dataset_size, "Samples in the synthetic dataset")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--slow-loader", o.slow_loader_ms,
                 "Sleep this many ms in every data fetch (a slow input pipeline)");
  app.add_option("--keep-last", o.keep_last, "Committed checkpoints to keep");
  app.add_option("--seed", o.seed, "Seed of the sampler and of the fresh-start RNG");
  app.add_flag("--async-save", o.async_save,
               "Non-blocking saves: each rank writes its file in the background; the barriers "
               "and rank 0's commit run at the next save and at the end (docs/distributed.md)");
  app.footer(
      "The last stdout line is `final_params_xxh3 <16 hex digits>`; exit status 0 done, "
      "1 error (including a peer that died), 3 --crash-at, 64 usage.");
  try {
    app.parse(argc, argv);
    if (o.rank >= o.world_size) {
      throw CLI::ValidationError("--rank", "rank " + std::to_string(o.rank) +
                                               " is outside --world-size " +
                                               std::to_string(o.world_size));
    }
    return DistDemo(o).run();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 64;
  } catch (const c10::Error& e) {
    std::cerr << tag(o) << ": libtorch error: " << e.what_without_backtrace() << "\n";
    return 1;
  }
}
