// The HDF5 datatype of each ckpt dtype (docs/format.md §3) and typed attribute I/O.
// Internal to ckpt/h5.
#pragma once

#include <string>

#include "ckpt/format/dtype.h"
#include "ckpt/format/tree.h"
#include "ckpt/h5/handle.h"

namespace ckpt::h5 {

// A new HDF5 type for the dtype; the caller owns it.
Handle make_type(DType t);

Status write_attr(hid_t obj, const std::string& name, const AttrValue& v, const std::string& where);
// Reads every attribute of `obj` into `out` except those named in `skip` (comma separated).
Status read_attrs(hid_t obj, std::map<std::string, AttrValue>* out, const std::string& where,
                  const std::string& skip);
// A string attribute, or an error naming it.
Result<std::string> read_string_attr(hid_t obj, const std::string& name, const std::string& where);

}  // namespace ckpt::h5
