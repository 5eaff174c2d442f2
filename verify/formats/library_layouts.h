// What a few libraries' checkpoint layouts mean beyond their components' shapes, read from the
// whole tree after detection: mmengine's Runner checkpoint (meta + message_hub: the loader
// position is re-derived from meta.iter with a seeded sampler), and research loops that
// recompute the LR from a counter instead of saving a scheduler (nanoGPT's config decay_lr /
// warmup_iters / lr_decay_iters with iter_num; timm's train.py args.sched with epoch). Pure;
// fills only what detection left unset.
#pragma once

#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

void note_library_layouts(const Value& root, const std::string& source, CheckpointView* view);

}  // namespace ckpt::verify
