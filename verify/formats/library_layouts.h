// What a few libraries' checkpoint layouts mean beyond their components' shapes, read from the
// whole tree after detection: mmengine's Runner checkpoint (meta + message_hub: the loader
// position is re-derived from meta.iter with a seeded sampler), and research loops that
// recompute the LR from a counter instead of saving a scheduler (nanoGPT's config decay_lr /
// warmup_iters / lr_decay_iters with iter_num; timm's train.py args.sched with epoch). Pure;
// fills only what detection left unset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

void note_library_layouts(const Value& root, const std::string& source, CheckpointView* view);

// What the layout readers share (here and composer_torchvision.cc):
// "SOURCE: " to put before evidence, or "" for an unnamed source.
std::string source_prefix(const std::string& source);
// The keyword settings at `v`: a dict, or an object's BUILD state (argparse.Namespace, a
// dataclass); null otherwise.
const Value* layout_settings(const Value* v);
// The integer at d[key] (null d or a missing key: nullopt).
std::optional<int64_t> layout_int(const Value* d, const char* key);

}  // namespace ckpt::verify
