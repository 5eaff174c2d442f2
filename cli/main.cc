// `ckpt`: the command-line front door. Parses argv with CLI11, dispatches to one subcommand, and
// maps every failure to a documented exit code (cli/exit_codes.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>

#include "cli/command.h"
#include "cli/exit_codes.h"

namespace ckpt::cli {

std::vector<CommandEntry>& command_table() {
  static std::vector<CommandEntry> table;
  return table;
}

CommandRegistrar::CommandRegistrar(std::string name, Setup setup) {
  command_table().push_back({std::move(name), std::move(setup)});
}

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

  auto& table = command_table();
  std::sort(table.begin(), table.end(),
            [](const CommandEntry& a, const CommandEntry& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (auto& entry : table) {
    CLI::App* sub = nullptr;
    Runner run = entry.setup(app, sub);
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
    app.exit(e);
    return kExitUsage;
  }

  try {
    for (auto& [sub, run] : runners) {
      if (sub != nullptr && sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::cerr << "ckpt: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  std::cerr << "ckpt: no subcommand chosen (see ckpt --help)\n";
  return kExitUsage;
}
