// `ckpt verify PATH [--json]`: full integrity check of a checkpoint in ckpt's own format — the
// commit record, every file's size and XXH3, every manifest rule, the HDF5 structure against the
// manifest, every tensor hash. PATH is a step directory or a run directory (then every committed
// checkpoint is checked, and uncommitted ones are listed). Exit 0 intact, 2 damaged, 65 not a
// ckpt checkpoint (naming `ckpt audit` for the other formats it reads), 66 cannot open (a file of
// a checkpoint included).
// The body is run_verify_command (cli/verify_command.cc, cli/commands.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace ckpt::cli {

Runner setup_verify(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto o = std::make_shared<VerifyCommandOptions>();
  sub = root.add_subcommand("verify",
                            "Check every byte of a ckpt checkpoint: commit record, file hashes, "
                            "manifests, tensor hashes");
  sub->add_option("path", o->path, "A step directory, or a run directory (checks all)")->required();
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->footer(
      "Exit codes: 0 intact; 2 damaged or incomplete; 65 not a ckpt checkpoint; 66 cannot "
      "open (a file of a checkpoint included, or every checkpoint removed while verifying).");
  return [o, ctx] { return run_verify_command(*o, ctx.env, std::cout, std::cerr, ctx.readers); };
}

}  // namespace ckpt::cli
