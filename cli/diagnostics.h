// The one way a `ckpt` command writes a diagnostic: "ckpt <command>: <message>\n" on one line,
// whatever the message holds. Messages carry file names and bytes from untrusted files, so a
// newline or a terminal control byte in a name must not split or forge a line: the message goes
// through printable_line() (ckpt/format/printable.h), which escapes them as \n, \xNN.
#pragma once

#include <ostream>
#include <string_view>

#include "ckpt/format/printable.h"

namespace ckpt::cli {

inline void print_diagnostic(std::ostream& err, std::string_view command,
                             std::string_view message) {
  err << "ckpt " << command << ": " << printable_line(message) << "\n";
}

}  // namespace ckpt::cli
