// The libtorch adapter in one include: live libtorch objects (modules, optimizers, StepLR,
// generators, user values) <-> ckpt::Node trees (ckpt/format/tree.h). The HDF5 store writes and
// reads the trees; this adapter never does I/O. Each header below documents its component's
// on-disk layout, ownership and thread-safety.
#pragma once

#include "ckpt/torch/extra_state.h"
#include "ckpt/torch/model_state.h"
#include "ckpt/torch/optimizer_state.h"
#include "ckpt/torch/rng_state.h"
#include "ckpt/torch/scheduler_state.h"
#include "ckpt/torch/tensor_convert.h"
#include "ckpt/torch/version.h"
