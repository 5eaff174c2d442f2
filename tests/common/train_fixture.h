// The training state the Checkpointer tests train and track: a model, Adam, a constant schedule
// at the optimizer's LR, a sampler over 100 samples in batches of 4, and the counters.
// Header-only; needs libtorch and ckpt_train (test_train). Include it after <torch/torch.h>
// and the `#undef CHECK` that lets Catch's CHECK in.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "ckpt/loader/resumable_sampler.h"
#include "ckpt/sched/scheduler.h"
#include "train/checkpointer.h"

namespace ckpt::testing {

inline sched::ScheduleSpec constant_schedule(double lr) {
  sched::ScheduleSpec s;
  s.kind = sched::ScheduleKind::kConstant;
  s.base_lr = lr;
  return s;
}

inline loader::SamplerSpec hundred_in_fours() {
  loader::SamplerSpec s;
  s.dataset_size = 100;
  s.batch_size = 4;
  return s;
}

// `Model` is a torch::nn module holder (torch::nn::Linear, torch::nn::Sequential, ...).
template <typename Model>
struct AdamTraining {
  Model model;
  torch::optim::Adam opt;
  sched::Scheduler scheduler;
  loader::ResumableSampler sampler;
  TrainCounters counters;

  AdamTraining(Model m, double lr)
      : model(std::move(m)),
        opt(model->parameters(), torch::optim::AdamOptions(lr)),
        scheduler(constant_schedule(lr)),
        sampler(hundred_in_fours(), 0) {}

  // One step: Adam on the gradient of forward(input).sum(), the sampler's next batch, the
  // schedule's step, ++global_step.
  void step_on(const torch::Tensor& input) {
    opt.zero_grad();
    model->forward(input).sum().backward();
    opt.step();
    sampler.next_batch();
    scheduler.step();
    ++counters.global_step;
  }
  // Tracks the model, optimizer, scheduler, sampler and counters with `ck`.
  void track(Checkpointer& ck) {
    Tracked t;
    t.model = model.ptr().get();
    t.optimizer = &opt;
    t.scheduler = &scheduler;
    t.sampler = &sampler;
    t.counters = &counters;
    ck.track(t);
  }
};

}  // namespace ckpt::testing
