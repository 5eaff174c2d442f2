// Two training libraries whose checkpoints are single torch.save dicts that mean more than their
// shapes, read from the whole tree after the structural walk (detect.h), as library_layouts.h
// does for mmengine and timm:
//
//   Composer  Trainer(save_folder=...) writes ep{E}-ba{B}-rank{R}.pt = {"state": State.state_dict()
//             (model, optimizers {Class: state}, schedulers {Class: state}, timestamp {Timestamp:
//             {epoch, batch, sample, token, batch_in_epoch, ...}}, rank_zero_seed, dataset_state,
//             metadata {precision, world_size}, ...), "rng": [one {python, numpy, torch, cuda}
//             per rank]}. Its Timestamp is the run's counter (it replaces what the generic walk
//             guessed), and the loader position is re-derived from batch_in_epoch on resume.
//   torchvision  references/{classification,detection,segmentation}/train.py save {model,
//             optimizer, lr_scheduler, epoch, args (argparse.Namespace), model_ema?, scaler?}
//             at every epoch end and resume at epoch + 1; no generator state, no seed.
//
// Pure; fills or corrects only the parts those layouts decide. Thread-safe on distinct views.
#pragma once

#include "verify/formats/detect.h"
#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

void note_composer_torchvision(const Value& root, const DetectContext& ctx, CheckpointView* view);

}  // namespace ckpt::verify
