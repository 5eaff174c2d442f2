// ckpt-train-demo: a complete libtorch training program that uses ckpt for every piece of state.
//
// An MLP with dropout learns a synthetic classification task (a few thousand samples, labelled by
// a fixed random "teacher"), shuffled by ckpt's resumable sampler, trained with AdamW under a
// linear-warmup + cosine schedule. It saves every --save-every steps and resumes from the run
// directory's latest checkpoint. --stop-at and --crash-at simulate preemption and crashes;
// --omit leaves components out of its checkpoints to show what each one is for; --async-save
// makes every save non-blocking (Checkpointer::save(step, {.blocking = false})). The last line of
// stdout is `final_params_xxh3 <16 hex digits>`, XXH3-64 over every parameter's bytes in name
// order: two runs agree on it exactly when they ended bit-identical.
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ckpt/base/hash.h"
#include "ckpt/format/manifest.h"
#include "ckpt/io/location.h"
#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/scheduler.h"
#include "examples/demo_model.h"
#include "profile/recorder/recorder.h"
#include "train/checkpointer.h"

namespace {

struct DemoOptions {
  std::string run_dir;
  int64_t steps = 200;
  int64_t save_every = 25;
  int64_t stop_at = -1;
  int64_t crash_at = -1;
  std::string omit;
  uint32_t world_size = 1;
  double slow_loader_ms = 0;
  int keep_last = 3;
  uint64_t seed = 7;
  std::string on_damaged = "refuse";
  bool async_save = false;
};

constexpr int kCrashExit = 3;

std::set<ckpt::Component> parse_omit(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) names.push_back(item);
  }
  auto parsed = ckpt::parse_components(names);
  if (!parsed.is_ok()) throw CLI::ValidationError("--omit", parsed.status().message());
  if (parsed->count(ckpt::Component::kModel) != 0) {
    throw CLI::ValidationError("--omit", "the model cannot be omitted");
  }
  return *parsed;
}

// Diagnostics that must not stop training (the journal, the profiler) go to stderr.
void warn_if(const ckpt::Status& s, const char* what) {
  if (!s.is_ok())
    std::cerr << "ckpt-train-demo: warning: " << what << ": " << s.to_string() << "\n";
}

int fail(const std::string& what, const ckpt::Status& s) {
  std::cerr << "ckpt-train-demo: " << what << ": " << s.to_string() << "\n";
  return 1;
}

// Every flag combination that cannot run is a usage error before anything touches the disk.
void validate(const DemoOptions& o) {
  auto bad = [](const std::string& flag, const std::string& why) {
    throw CLI::ValidationError(flag, why);
  };
  if (o.run_dir.empty()) bad("--run-dir", "must not be empty");
  if (o.stop_at != -1 && (o.stop_at < 1 || o.stop_at > o.steps)) {
    bad("--stop-at", "must be in [1, --steps], got " + std::to_string(o.stop_at));
  }
  if (o.crash_at != -1 && (o.crash_at < 1 || o.crash_at > o.steps)) {
    bad("--crash-at", "must be in [1, --steps], got " + std::to_string(o.crash_at));
  }
  if (o.keep_last < 0) bad("--keep-last", "must be >= 0 (0 keeps all)");
  if (!(o.slow_loader_ms >= 0)) bad("--slow-loader", "must be >= 0");
  if (auto v = ckpt::sched::validate(demo::make_schedule(o.steps)); !v.is_ok()) {
    bad("--steps", v.status().message());
  }
  parse_omit(o.omit);
}

int run(const DemoOptions& o) {
  const std::set<ckpt::Component> omit = parse_omit(o.omit);
  torch::manual_seed(static_cast<uint64_t>(o.seed));  // a fresh process always starts here
  demo::Dataset data = demo::make_dataset(/*n=*/3000, /*seed=*/1234);
  demo::Mlp model = demo::make_model();
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));

  const ckpt::sched::ScheduleSpec spec = demo::make_schedule(o.steps);
  ckpt::sched::Scheduler scheduler(spec);
  const ckpt::loader::SamplerSpec sspec = demo::make_sampler_spec(data, o.seed, o.world_size);
  ckpt::loader::ResumableSampler sampler(sspec, 0);
  ckpt::TrainCounters counters;
  counters.config = "demo mlp adamw warmup_cosine steps=" + std::to_string(o.steps);

  ckpt::CheckpointerOptions copts;
  copts.run_dir = o.run_dir;
  copts.keep_last = o.keep_last;
  copts.omit = omit;
  copts.on_damaged =
      o.on_damaged == "fallback" ? ckpt::OnDamaged::kFallback : ckpt::OnDamaged::kRefuse;
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
  for (const auto& k : restored->skipped) std::cout << "skipped damaged " << k << "\n";
  if (auto s = ck.log_start(*restored); !s.is_ok()) return fail("journal", s);
  if (restored->restored) {
    std::cout << "restored " << restored->checkpoint << " (step " << restored->step << "):";
    for (const auto& c : restored->components) std::cout << " " << ckpt::component_name(c);
    if (!restored->missing.empty()) {
      std::cout << "; missing:";
      for (const auto& c : restored->missing) std::cout << " " << ckpt::component_name(c);
    }
    std::cout << "\n";
    if (!restored->note.empty()) std::cout << "note: " << restored->note << "\n";
    // What a loader without saved state does: the epoch counter survives, the position does not.
    const auto& miss = restored->missing;
    if (miss.count(ckpt::Component::kLoader) != 0) {
      sampler.set_cursor({static_cast<uint64_t>(counters.epoch), 0});
    }
    if (miss.count(ckpt::Component::kScheduler) != 0) {
      std::cout << "scheduler state missing: the schedule starts again from step 0\n";
    }
  } else {
    std::cout << "fresh start in " << o.run_dir << "\n";
    if (!restored->note.empty()) std::cout << "note: " << restored->note << "\n";
  }

  // One profiler file per process (segment of the run), named by the step it starts at. The
  // recorder appends to a local file; a run directory on an object store (no append) gets it
  // when the recorder closes.
  const std::string profile_name =
      "profile/rank00000-" + ckpt::step_dir_name(counters.global_step) + ".jsonl";
  const bool remote = ckpt::looks_like_url(o.run_dir);
  const std::string local_dir = remote ? std::filesystem::temp_directory_path().string() +
                                             "/ckpt-demo-" + std::to_string(::getpid())
                                       : o.run_dir;
  if (auto s = ckpt::Env::posix()->make_dirs(local_dir + "/profile"); !s.is_ok()) {
    return fail("profile", s);
  }
  ckpt::profile::RecorderOptions ropts;
  ropts.path = local_dir + "/" + profile_name;
  ropts.first_step = counters.global_step;
  auto opened = ckpt::profile::StepRecorder::open(std::move(ropts));
  if (!opened.is_ok()) return fail("profile", opened.status());
  std::unique_ptr<ckpt::profile::StepRecorder> rec = std::move(opened).value();
  auto close_profile = [&] {
    warn_if(rec->close(), "profile");
    if (!remote) return;
    ckpt::Env* posix = ckpt::Env::posix();
    auto bytes = posix->read_all(local_dir + "/" + profile_name);
    ckpt::Status s = bytes.status();
    if (s.is_ok()) s = ckpt::routing_env()->write_atomic(o.run_dir + "/" + profile_name, *bytes);
    warn_if(s, "profile");
    warn_if(posix->remove_tree(local_dir), "profile");
  };
  using ckpt::profile::Phase;
  demo::set_lr(opt, scheduler.lr());
  model->train();
  while (counters.global_step < o.steps) {
    const int64_t step = counters.global_step;
    if (sampler.at_epoch_end(sampler.cursor())) sampler.set_cursor({sampler.cursor().epoch + 1, 0});
    const ckpt::loader::LoaderCursor c = sampler.cursor();  // what this step consumes
    std::vector<int64_t> ids;
    {
      auto phase = rec->phase(Phase::kDataWait);
      for (uint32_t r = 0; r < o.world_size; ++r) {
        for (uint64_t id : sampler.batch_at(c, r)) ids.push_back(static_cast<int64_t>(id));
      }
      sampler.next_batch();
      if (o.slow_loader_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.slow_loader_ms));
      }
    }
    const double lr = scheduler.lr();  // the LR of this step, as torch's scheduler leaves it
    torch::Tensor index = torch::tensor(ids, torch::kLong);
    torch::Tensor x = data.x.index_select(0, index);
    torch::Tensor y = data.y.index_select(0, index);
    torch::Tensor loss;
    {
      auto phase = rec->phase(Phase::kForward);
      loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    }
    {
      auto phase = rec->phase(Phase::kBackward);
      opt.zero_grad();
      loss.backward();
    }
    {
      auto phase = rec->phase(Phase::kOptimizer);
      opt.step();
    }
    // Like torch's LRScheduler.step(): the groups now hold the next step's LR, so a checkpoint's
    // optimizer LR and scheduler last_lr agree.
    demo::set_lr(opt, scheduler.step());
    counters.global_step = step + 1;
    counters.epoch = static_cast<int64_t>(sampler.cursor().epoch);
    counters.samples_seen += static_cast<int64_t>(ids.size());
    warn_if(ck.log_progress({step, lr, loss.item<double>(), c.epoch, c.position,
                             static_cast<int64_t>(ids.size()),
                             ckpt::xxh3_64(ids.data(), ids.size() * sizeof(int64_t))}),
            "journal");
    rec->end_step(static_cast<int64_t>(ids.size()), 0);

    const int64_t done = counters.global_step;
    if (done == o.crash_at) {
      std::cout << "crash at step " << done << " (nothing saved since the last checkpoint)\n";
      std::cout.flush();
      std::_Exit(kCrashExit);
    }
    const bool stop = done == o.stop_at;
    if (stop || done % o.save_every == 0 || done == o.steps) {
      auto phase = rec->phase(Phase::kCheckpoint);
      ckpt::SaveOptions how;
      how.blocking = !o.async_save;
      if (auto s = ck.save(done, how); !s.is_ok()) return fail("save", s);
      std::cout << (o.async_save ? "saving step " : "saved step ") << done
                << (o.async_save ? " in the background\n" : "\n");
    }
    if (stop) {
      if (auto s = ck.wait(); !s.is_ok()) return fail("save", s);
      std::cout << "stopped at step " << done << " (preempted)\n";
      close_profile();
      std::cout << "final_params_xxh3 " << ckpt::hex64(demo::params_digest(*model)) << "\n";
      return 0;
    }
  }
  if (auto s = ck.wait(); !s.is_ok()) return fail("save", s);
  close_profile();
  std::cout << "final_params_xxh3 " << ckpt::hex64(demo::params_digest(*model)) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  DemoOptions o;
  CLI::App app{
      "ckpt-train-demo: an MLP trained with AdamW and a warmup+cosine schedule, saving "
      "complete checkpoints with ckpt and resuming from the latest one.",
      "ckpt-train-demo"};
  app.add_option("--run-dir", o.run_dir, "Run directory (checkpoints, journal.jsonl)")->required();
  app.add_option("--steps", o.steps, "Train until this global step")->check(CLI::PositiveNumber);
  app.add_option("--save-every", o.save_every, "Save every N steps")->check(CLI::PositiveNumber);
  app.add_option("--stop-at", o.stop_at, "Save at step K and exit 0 (a preempted job)");
  app.add_option("--crash-at", o.crash_at, "Exit with status 3 at step K without saving (a crash)");
  app.add_option("--omit", o.omit,
                 "Comma list of components to leave out of checkpoints: optimizer, scheduler, "
                 "rng, loader");
  app.add_option("--world-size", o.world_size,
                 "Sampler ranks simulated in this process (data-parallel batches)")
      ->check(CLI::Range(1, 64));
  app.add_option("--slow-loader", o.slow_loader_ms,
                 "Sleep this many ms in every data fetch (a starved input pipeline)");
  app.add_option("--keep-last", o.keep_last, "Committed checkpoints to keep");
  app.add_option("--seed", o.seed, "Seed of the sampler and of the fresh-start RNG");
  app.add_option("--on-damaged", o.on_damaged,
                 "When a checkpoint newer than every intact one has a damaged commit record: "
                 "refuse (exit 1, the default) or fallback to the newest intact one")
      ->check(CLI::IsMember({"refuse", "fallback"}));
  app.add_flag("--async-save", o.async_save,
               "Non-blocking saves: return after the snapshot, write and commit in the "
               "background (waited for before --stop-at exits and at the end)");
  app.footer("The last stdout line is `final_params_xxh3 <16 hex digits>`.");
  try {
    app.parse(argc, argv);
    validate(o);
    return run(o);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "ckpt-train-demo: usage: " << e.what() << " (see --help)\n";
    return 64;
  } catch (const c10::Error& e) {
    std::cerr << "ckpt-train-demo: libtorch error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ckpt-train-demo: error: " << e.what() << "\n";
    return 1;
  }
}
