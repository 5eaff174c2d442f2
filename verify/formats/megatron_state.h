// What Megatron-LM's save_checkpoint puts in a state dict, mapped onto the completeness contract.
//
// generate_state_dict (megatron/training/checkpointing.py) writes `args` (the argparse Namespace:
// the run's configuration, and `consumed_train_samples`, the data cursor), `checkpoint_version`,
// `iteration`, `model`, `optimizer` (unless --no-save-optim), `opt_param_scheduler` (likewise),
// `rng_state` (unless --no-save-rng: a list, one dict per data-parallel rank when
// --data-parallel-random-init, with random_rng_state, np_rng_state, torch_rng_state,
// cuda_rng_state and rng_tracker_states) and `num_floating_point_operations_so_far`.
// Structural detection (verify/formats/detect.h) finds the model, optimizer and RNG tensors; this
// adds what only Megatron's names say: the scheduler (its closed-form LR recomputed and compared
// with the param groups), the sampler cursor, the missing pieces and what each does to a resumed
// run (Megatron's load_checkpoint refuses a checkpoint without optimizer or RNG unless told).
// Pure; thread-safe on distinct views.
#pragma once

#include <string>
#include <vector>

#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

// `root` is the state dict of the first model-parallel rank (legacy model_optim_rng.pt, or the
// torch_dist common.pt merged with the sharded part); `label` names it in evidence. Call after
// detect_components.
void add_megatron_state(const Value& root, const std::string& label, CheckpointView* view);

// One model-parallel rank file of a legacy checkpoint: its label ("mp_rank_01/model_optim_rng.pt")
// and its top-level state dict (nullptr when it could not be read; `error` says why).
struct MegatronRankFile {
  std::string label;
  const Value* root = nullptr;
  std::string error;
};

// Every rank must hold what the first one holds (model, optimizer, scheduler, rng_state): a rank
// without one is a finding against that component, with the rank named. A rank file that is
// missing or unreadable took its own share of the model and the optimizer's moments and its own
// generators (those components are inconsistent) and its copies of the scheduler, iteration
// and args (named in an error finding).
void check_megatron_ranks(const std::vector<MegatronRankFile>& ranks, CheckpointView* view);

}  // namespace ckpt::verify
