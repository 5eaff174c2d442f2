// The dispatch table of `ckpt` subcommands.
//
// Each subcommand lives in its own file cli/cmd_<name>.cc with an options struct, a
// `setup_<name>(CLI::App&)` that adds the subcommand and binds its flags, and `run_<name>(options)`
// that tests call without argv. The setup function returns the runner to call when the user chose
// that subcommand. The table is explicit: main.cc lists every setup function, in name order.
// The commands that read checkpoints get the Context main built: the Env every byte goes through
// and the explicit set of checkpoint readers (verify/formats/format_reader.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}
namespace ckpt {
class Env;
namespace verify {
class ReaderSet;
}
}  // namespace ckpt

namespace ckpt::cli {

struct Context {
  Env* env = nullptr;
  const verify::ReaderSet* readers = nullptr;
};

using Runner = std::function<int()>;
// Adds one subcommand to `root`; returns the subcommand and the runner to call when it is chosen.
using Setup = std::function<Runner(CLI::App& root, CLI::App*& sub)>;

// One per cli/cmd_<name>.cc; the commands that read files through the Env take the Context.
Runner setup_audit(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_convert(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_coverage(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_diff(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_export(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_inspect(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_load_bench(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_lr(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_profile(CLI::App& root, CLI::App*& sub);
Runner setup_report(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_scan(CLI::App& root, CLI::App*& sub, const Context& ctx);
Runner setup_verify(CLI::App& root, CLI::App*& sub, const Context& ctx);

}  // namespace ckpt::cli
