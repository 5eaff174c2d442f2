// `ckpt`: the command-line front door. Parses argv with CLI11, dispatches to one subcommand, and
// maps every failure to a documented exit code (cli/exit_codes.h).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "ckpt/format/printable.h"
#include "ckpt/format/rank_root.h"
#include "ckpt/io/env.h"
#include "ckpt/io/location.h"
#include "cli/command.h"
#include "cli/exit_codes.h"
#include "verify/formats/builtin_readers.h"
#include "verify/ours/ours_reader.h"

namespace ckpt::cli {

namespace {

// The subcommands, in the order `ckpt --help` lists them; those that read through the Env get
// `ctx`.
std::vector<Setup> commands(const Context& ctx) {
  auto with = [&ctx](Runner (*setup)(CLI::App&, CLI::App*&, const Context&)) -> Setup {
    return [setup, &ctx](CLI::App& root, CLI::App*& sub) { return setup(root, sub, ctx); };
  };
  return {with(setup_audit),  with(setup_convert), with(setup_coverage),   with(setup_diff),
          with(setup_export), with(setup_inspect), with(setup_load_bench), with(setup_lr),
          setup_profile,      with(setup_report),  with(setup_scan),       with(setup_verify)};
}

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
  app.set_version_flag("--version", std::string("ckpt ") + ckpt::kVersion);

  // Every checkpoint is read through the real file system, by the foreign-format readers and
  // then our own format's.
  ckpt::verify::ReaderSet readers = ckpt::verify::builtin_readers();
  readers.add(ckpt::verify::make_ours_reader());
  // Every path goes to the storage it names: local, or s3:// (any other URL is refused).
  const Context ctx{ckpt::routing_env(ckpt::Env::posix()), &readers};
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Setup& setup : commands(ctx)) {
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

  // A URL argument must name storage ckpt serves: gs://… or a typo like s3:/b is one line and
  // exit 64 here, never read as a local path (and an s3:// store that cannot keep one commit per
  // step is refused before anything runs).
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!ckpt::looks_like_url(arg)) continue;
    const auto env = ckpt::env_for_location(arg);
    if (!env.is_ok()) {
      std::cerr << "ckpt: " << ckpt::printable_line(env.status().message()) << "\n";
      return exit_code_for(env.status());
    }
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
