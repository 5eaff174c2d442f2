// What the missing or damaged .distcp files of a torch.distributed.checkpoint folder take with
// them: every entry they held, charged to the component it belongs to.
//
// The DCP reader (dcp.cc) records one DcpLostEntry per tensor chunk and per bytes entry whose
// bytes are not there (the file is absent, too short for the range `.metadata` gives, or the
// blob does not parse). report_dcp_loss turns them into findings once detection has filled the
// view: one error per damaged file (what it was, how many entries went with it), and one error
// per (component, file) that names every entry lost — tensors with the element ranges of their
// lost chunks and how many of their elements that is, bytes entries by key — marked
// `inconsistent`, so that a component found present from what remains is never called `present`;
// a model every tensor of which is lost whole is `missing`.
// A lost entry belongs to the component whose detected state holds it (a model or optimizer
// tensor by its key; an entry under the optimizer's or scheduler's path), else to the component
// its path names (rng, loader, scheduler, step/epoch counters: the bytes are gone, so the key is
// all that is left); an entry of no component is charged to the file only. Pure; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/store/box_index.h"
#include "verify/formats/view.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

struct DcpLostEntry {
  std::string key;   // the flat state_dict key ("model.0.weight", "lr_scheduler.last_epoch")
  std::string file;  // the .distcp file that held it; empty when .metadata gives no location
  bool tensor = false;
  store::Extent range;          // tensor entries: the chunk's elements
  std::vector<int64_t> shape;   // tensor entries: the tensor's global shape
  const Value* leaf = nullptr;  // the entry's leaf in the rebuilt state dict
};

// Per damaged file, what is wrong with it ("missing", "truncated: 30000 bytes, .metadata places
// data up to byte 54614", "holds bytes that do not parse").
using DcpDamagedFiles = std::map<std::string, std::string>;

// The component whose words a state-dict path holds ("optimizer.state.0.weight.step" is the
// optimizer's, "train_state.step" the counters'), for an entry detection did not place; nullopt
// when it names none.
std::optional<AuditComponent> dcp_component_named(const std::string& path);

// Adds the findings described above to `view`. `root` is the rebuilt state dict (the leaves'
// paths are found in it).
void report_dcp_loss(const std::vector<DcpLostEntry>& lost, const DcpDamagedFiles& damaged,
                     const Value& root, CheckpointView* view);

}  // namespace ckpt::verify
