// The auditor's reader for ckpt's own HDF5 format. It lives apart from the foreign-format readers
// because it links the store (and so HDF5); whoever wants `ckpt audit` to read our runs adds it to
// the ReaderSet it builds (cli/main.cc does, after verify::builtin_readers()).
#pragma once

#include <memory>

#include "verify/formats/format_reader.h"

namespace ckpt::verify {

std::unique_ptr<FormatReader> make_ours_reader();

}  // namespace ckpt::verify
