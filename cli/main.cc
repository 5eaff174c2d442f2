// `ckpt`: the command-line front door. Parses argv with CLI11, dispatches to one subcommand, and
// maps every failure to a documented exit code (cli/exit_codes.h).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "ckpt/format/printable.h"
#include "cli/command.h"
#include "cli/exit_codes.h"
#include "verify/ours/ours_reader.h"

namespace ckpt::cli {

namespace {

// The subcommands, in the order `ckpt --help` lists them.
const Setup kCommands[] = {setup_audit,   setup_convert,    setup_coverage, setup_diff,
                           setup_inspect, setup_load_bench, setup_lr,       setup_profile,
                           setup_report,  setup_scan,       setup_verify};

}  // namespace
}  // namespace ckpt::cli

int main(int argc, char** argv) {
  using namespace ckpt::cli;
  CLI::App app{
      "ckpt: complete training checkpoints, audits of any checkpoint, restart analytics and a "
      "step profiler.",
      "ckpt"};
  app.require_subcommand(1);
  app.footer(kExitCodeHelp);
  app.set_version_flag("--version", "ckpt 0.1.0");

  ckpt::verify::register_ours_reader();  // `audit`/`inspect` of our own runs
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Setup& setup : kCommands) {
    CLI::App* sub = nullptr;
    Runner run = setup(app, sub);
    runners.emplace_back(sub, std::move(run));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the offending argument: escaped, so that a name holding a newline stays on
    // its line (as app.exit() words it otherwise).
    std::cerr << ckpt::printable_line(e.what()) << "\nRun with --help for more information.\n";
    return kExitUsage;
  }

  try {
    for (auto& [sub, run] : runners) {
      if (sub != nullptr && sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::cerr << "ckpt: internal error: " << ckpt::printable_line(e.what()) << "\n";
    return kExitInternal;
  }
  std::cerr << "ckpt: no subcommand chosen (see ckpt --help)\n";
  return kExitUsage;
}
