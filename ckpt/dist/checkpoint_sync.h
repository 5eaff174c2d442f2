// The Checkpointer's barrier for a process group: every save meets the other ranks twice (after
// this rank's file is durable, and after rank 0 committed), and each meeting is also the moment to
// check that the ranks are saving the same training state — DESIGN's "gathering the loader
// cursors". The hook all-gathers a few integers from each rank (global step, loader epoch and
// position, ...) and fails on every rank alike, with the values of each rank, when they differ; so
// rank 0 never commits a checkpoint whose rank files describe different points of the run.
//
// Stateless apart from the borrowed group and probe; the returned function must not outlive the
// group. Not thread-safe (like the group it calls).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::dist {

class ProcessGroupContext;

// The integers a rank reports at a checkpoint barrier, e.g. {global_step, epoch, position}.
using AgreementProbe = std::function<std::vector<int64_t>()>;

// Ok when every row equals row 0. Otherwise Mismatch naming `what`, the first field that differs
// (by names[i] when given, else its index) and every rank's value of it, e.g.
//   "save barrier: ranks disagree on position: rank 0 = 320, rank 1 = 288".
Status check_agreement(const std::vector<std::vector<int64_t>>& rows,
                       const std::vector<std::string>& names, const std::string& what);

// A CheckpointerOptions::barrier for `group`. Without a probe it is a plain barrier; with one,
// each call all-gathers probe() (which also synchronises every rank) and applies check_agreement.
std::function<Status()> checkpoint_barrier(ProcessGroupContext* group, AgreementProbe probe = {},
                                           std::vector<std::string> names = {});

}  // namespace ckpt::dist
