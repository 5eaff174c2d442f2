// Value trees (what the non-executing readers build) → ckpt groups in torch's state_dict layout,
// exactly as the Python package's `_tree.encode` writes a state dict (docs/python.md, "Storage"):
// a container is a group tagged `ckpt.kind` = dict / intdict / list / tuple (`ckpt.len`), tensors
// are datasets, bool / int / float / str typed attributes, homogeneous int / float / str lists
// array attributes (`ckpt.tuples` names the tuples), None values named in `ckpt.none`, bytes
// uint8 datasets named in `ckpt.bytes`. What cannot be represented is named in `ckpt.skipped`
// and reported as unmapped with its path and the reason. A value that another group holds (an
// optimizer moved to /optimizer) stays as None with `ckpt.moved` = "name=/optimizer", so the
// remaining tree still decodes. One encoder per conversion; single-threaded.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "ckpt/format/tree.h"
#include "verify/convert/convert.h"
#include "verify/formats/tensor_bytes.h"

namespace ckpt::verify::convert {

struct EncodeTally {
  size_t tensors = 0;
  uint64_t bytes = 0;
  std::vector<UnmappedEntry> unmapped;
  std::function<void(uint64_t)> progress;  // tensor bytes read, as they are
};

class TreeEncoder {
 public:
  // `moved`: values written elsewhere, each with the group that holds it.
  TreeEncoder(TensorFetch fetch, const std::map<const Value*, std::string>* moved,
              EncodeTally* tally)
      : fetch_(std::move(fetch)), moved_(moved), tally_(tally) {}

  // Encodes the container `v` (dict, list or tuple) into `out`; false when `v` cannot be a
  // group (listed as unmapped at `path`). An error only for damaged tensor bytes. `path` is the
  // container's source path: "" for a single file's top level, "file.pt:" for a folder file's.
  Result<bool> container(const Value& v, const std::string& path, Node* out, int depth = 0);
  // One tensor's bytes; false when it cannot be converted (listed as unmapped at `path`).
  Result<bool> tensor(const Value& v, const std::string& path, Tensor* out);

 private:
  Status entry(const std::string& name, const Value& x, const std::string& path, Node* out,
               std::map<std::string, std::vector<std::string>>* lists, int depth);
  void skip(const std::string& name, const std::string& path, const std::string& why,
            std::map<std::string, std::vector<std::string>>* lists);

  TensorFetch fetch_;
  const std::map<const Value*, std::string>* moved_;
  EncodeTally* tally_;
};

// A key as it appears in a reported path: itself when it is valid UTF-8, otherwise ASCII with
// every other byte as \xNN.
std::string printable(const std::string& key);

// A source path as reported: "(top level)" for "", "file.pt" for "file.pt:".
std::string path_text(const std::string& path);

// "a pickled collections.Counter object", "a set", ... for values that are not state-dict data.
std::string why_unmappable(const Value& v);

}  // namespace ckpt::verify::convert
