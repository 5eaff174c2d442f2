// The dispatch table of `ckpt` subcommands.
//
// Each subcommand lives in its own file cli/cmd_<name>.cc with an options struct, a
// `setup_<name>(CLI::App&)` that adds the subcommand and binds its flags, and `run_<name>(options)`
// that tests call without argv. The setup function returns the runner to call when the user chose
// that subcommand. The table is explicit: main.cc lists every setup function, in name order.
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

// One per cli/cmd_<name>.cc.
Runner setup_audit(CLI::App& root, CLI::App*& sub);
Runner setup_convert(CLI::App& root, CLI::App*& sub);
Runner setup_coverage(CLI::App& root, CLI::App*& sub);
Runner setup_diff(CLI::App& root, CLI::App*& sub);
Runner setup_inspect(CLI::App& root, CLI::App*& sub);
Runner setup_load_bench(CLI::App& root, CLI::App*& sub);
Runner setup_lr(CLI::App& root, CLI::App*& sub);
Runner setup_profile(CLI::App& root, CLI::App*& sub);
Runner setup_report(CLI::App& root, CLI::App*& sub);
Runner setup_scan(CLI::App& root, CLI::App*& sub);
Runner setup_verify(CLI::App& root, CLI::App*& sub);

}  // namespace ckpt::cli
