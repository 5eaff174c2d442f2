// Groups that the `ckpt` Python package writes hold torch's own state_dict layout (docs/python.md,
// "Storage": a container is a group tagged `ckpt.kind` = dict / intdict / list / tuple, scalars are
// attributes, tensors datasets). This turns such a group back into the value tree the foreign-
// format readers build, so the same structural detection (verify/formats/detect.h) judges an
// optimizer or a scheduler state_dict whether torch.save or ckpt wrote it.
#pragma once

#include <string>

#include "ckpt/format/torch_layout.h"
#include "ckpt/format/tree.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

// Whether `group` was written from a Python state_dict: ckpt::is_torch_layout
// (ckpt/format/torch_layout.h, where the layouts are described and converted).
using ckpt::is_torch_layout;

// Detects the components `group` holds (as detect_components does for a torch.save file) and
// fills the parts of `view` not found yet; `name` is the group's name ("optimizer"), `file` the
// rank file, both for the evidence. Tensor values (a 0-d `step`) are read when their bytes are in
// the tree (--deep), otherwise reported unreadable.
void detect_torch_layout(const Node& group, const std::string& name, const std::string& file,
                         CheckpointView* view);

}  // namespace ckpt::verify
