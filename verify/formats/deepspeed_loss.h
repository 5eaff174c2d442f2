// What the missing or damaged rank files of a DeepSpeed save_checkpoint tag folder take with
// them: every parameter partition and entry they held, charged to the component it belongs to.
//
// DeepSpeed writes, per tag folder (engine.save_checkpoint):
//   mp_rank_MM_model_states.pt                         ZeRO 0-2: the module, lr_scheduler,
//                                                      global_steps, param_shapes, ds_config, ...
//   zero_pp_rank_R_mp_rank_MM_model_states.pt          ZeRO 3: one per data-parallel rank R
//   [bf16_]zero_pp_rank_R_mp_rank_MM_optim_states.pt   ZeRO 1-3, and bf16 runs: rank R's partition
// A readable model-states file says which must exist (dp_world_size, mp_world_size, the ZeRO
// stage and bf16 in ds_config) and how the parameters lie (param_shapes). A partition is placed
// as DeepSpeed's own zero_to_fp32.py places it:
//   ZeRO 1/2  each param group flattened in param_shapes order (plus param_alignment_paddings),
//             padded to a multiple of 2 x dp_world_size and cut into dp_world_size equal parts:
//             rank R holds flat elements [R*P, (R+1)*P)
//   ZeRO 3    every parameter cut on its own: rank R holds [R*c, min((R+1)*c, n)), c = ceil(n/dp)
// report_deepspeed_loss adds one error finding per lost file. An optimizer file names every
// parameter with the element range (of the flattened parameter) whose fp32 master copy and
// moments went with it, and the file's entries by key (loss_scaler, param_groups, ...); it marks
// the optimizer inconsistent, and under ZeRO 3 the model too (the module holds 0-element
// placeholders: the partitions are the only copy of its weights). A model-states file names
// what it held; under ZeRO 3 those are copies, but the rank that reads it cannot resume.
// Pure; no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

// True for the names DeepSpeed gives its model-states and optimizer-states files.
bool is_deepspeed_model_states(const std::string& name);
bool is_deepspeed_optim_states(const std::string& name);

// `read`: every file of the tag folder that parsed, by name, with its root; `damaged`: the
// files that did not (name -> "unreadable: <why>"). Files the model states say must exist and
// that are in neither are missing. Adds the findings above to `view`.
void report_deepspeed_loss(const std::map<std::string, const Value*>& read,
                           const std::map<std::string, std::string>& damaged, CheckpointView* view);

}  // namespace ckpt::verify
