// The auditor's reader for ckpt's own HDF5 format. It lives apart from the foreign-format readers
// because it links the store (and so HDF5); whoever wants `ckpt audit` to read our runs registers
// it once, explicitly (cli/main.cc does; so does the HTML report).
#pragma once

#include <memory>

#include "verify/audit/reader_registry.h"

namespace ckpt::verify {

std::unique_ptr<FormatReader> make_ours_reader();
// Registers make_ours_reader() with the reader registry; idempotent and thread-safe.
void register_ours_reader();

}  // namespace ckpt::verify
