// The dispatch table of `ckpt` subcommands.
//
// Each subcommand lives in its own file cli/cmd_<name>.cc with an options struct, a
// `setup_<name>(CLI::App&)` that adds the subcommand and binds its flags, and `run_<name>(options)`
// that tests call without argv. The setup function returns the runner to call when the user chose
// that subcommand. Registration happens through one static CommandRegistrar per file; main() walks
// the table in name order.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ckpt::cli {

using Runner = std::function<int()>;
// Adds one subcommand to `root`; returns the subcommand and the runner to call when it is chosen.
using Setup = std::function<Runner(CLI::App& root, CLI::App*& sub)>;

struct CommandEntry {
  std::string name;
  Setup setup;
};

std::vector<CommandEntry>& command_table();

struct CommandRegistrar {
  CommandRegistrar(std::string name, Setup setup);
};

}  // namespace ckpt::cli
