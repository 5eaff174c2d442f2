// A non-executing unpickler for protocols 0-5 (the opcodes torch.save, DCP and numpy emit).
//
// `read_pickle` runs the pickle virtual machine over a byte buffer and builds a PickleDoc: plain
// data becomes Values; BINPERSID tuples become Storage records; calls to a small allow-list
// (torch tensor rebuilds, OrderedDict, Counter, set, _codecs.encode, numpy arrays and scalars,
// torch.Size, torch.device) are interpreted into data; every other call becomes an Object node.
// Nothing is ever imported or executed. Caps stop pickle bombs: number of values, memo size,
// nesting depth; every length is checked against the remaining input. Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/base/status.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

struct PickleLimits {
  uint64_t max_values = 4'000'000;
  uint64_t max_memo = 4'000'000;
  int max_depth = 1000;
  // Scanning: a call, BUILD or persistent id the allow-list cannot interpret becomes an opaque
  // Object instead of an error (CPython would go on), so the rest of the stream is still read.
  bool lenient = false;
};

// Parses one pickle starting at `offset` in `bytes`; `where` names the source in errors
// ("model.pt:archive/data.pkl"). On success doc.end_offset is just past STOP. Corrupt on any
// malformed, truncated or over-limit input.
Result<std::unique_ptr<PickleDoc>> read_pickle(const std::string& bytes, const std::string& where,
                                               const PickleLimits& limits = {},
                                               uint64_t offset = 0);

// What a scan of one pickle saw: the doc (never null; its `uses` hold every global seen, even
// when the stream fails later) and how the stream ended (ok when it reached STOP).
struct PickleScan {
  std::unique_ptr<PickleDoc> doc;
  Status status;
};
PickleScan scan_pickle(const std::string& bytes, const std::string& where,
                       const PickleLimits& limits = {}, uint64_t offset = 0);

// Element size of a torch dtype: dtype_size for ours, and torch's own beyond them ("bits16",
// "float8_e8m0fnu"...); 0 if unknown.
size_t torch_dtype_size(const AnyDType& t);

}  // namespace ckpt::verify
