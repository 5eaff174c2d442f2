// `ckpt profile`: the step profiler's command line.
//   analyze FILES|DIR... [--json] [--svg FILE]   verdicts from recorder files and PyTorch traces
//   budget --gpus G --per-gpu RATE --loader-cap RATE   the throughput-budget model
//   layout DIR [--json]; layout-diff A.json B.json     dataset layout and what changed
//   env [--json] [--config FILE]; env-diff A.json B.json   environment snapshot and diff
// Exit codes: 0 analysed (verdicts are findings, not failures; diffs with changes also exit 0),
// 64 usage, 65 unreadable/malformed input (also: not a regular file, over its size cap — see
// profile/import/input_file.h), 66 cannot open. The logic lives in profile/; this file binds flags
// and prints.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "profile/analyze/analyzer.h"
#include "profile/analyze/budget.h"
#include "profile/analyze/report_render.h"
#include "profile/history/env_info.h"
#include "profile/history/layout.h"
#include "profile/import/input_file.h"
#include "profile/import/trace_import.h"

namespace ckpt::cli {

namespace {

struct ProfileOptions {
  std::vector<std::string> files;
  bool json = false;
  bool one_rank = false;
  std::string svg;
  double gpus = 0, per_gpu = 0, loader_cap = 0;
  std::string dir, a, b, config;
};

int fail(const Status& s) {
  print_diagnostic(std::cerr, "profile", s.message());
  return exit_code_for(s);
}

// JSON out: bytes that are not UTF-8 (file names, environment variables, trace strings) are
// replaced with U+FFFD instead of making dump() throw.
std::string dump_json(const nlohmann::json& j) { return profile::json_text(j); }

// An `env --json` / `layout --json` snapshot: at most kMaxSnapshotBytes, regular files only.
Result<nlohmann::json> read_json(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(std::string text,
                        profile::read_bounded_file(path, profile::kMaxSnapshotBytes));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return corrupt(path + ": not valid JSON (" + std::string(e.what()) + ")");
  }
}

}  // namespace

int run_profile_analyze(const ProfileOptions& o) {
  profile::LoadOptions load;
  load.one_rank = o.one_rank;
  std::vector<std::string> warnings;
  auto traces = profile::load_traces(o.files, load, &warnings);
  if (!traces.is_ok()) return fail(traces.status());
  // How the files became ranks, when it had to be decided: on stderr as well as in the notes.
  for (const auto& w : warnings) std::cerr << "ckpt profile: warning: " << w << "\n";
  auto report = profile::analyze(*traces);
  if (!report.is_ok()) return fail(report.status());
  if (!o.svg.empty()) {
    std::ofstream out(o.svg, std::ios::binary);
    out << profile::report_svg(*report);
    if (!out) return fail(io_error(o.svg + ": cannot write the SVG"));
  }
  if (o.json) {
    std::cout << dump_json(profile::report_json(*report));
  } else {
    std::cout << profile::report_text(*report);
  }
  return kExitOk;
}

int run_profile_budget(const ProfileOptions& o) {
  auto b = profile::budget_model(o.gpus, o.per_gpu, o.loader_cap);
  if (!b.is_ok()) return fail(b.status());
  if (o.json) {
    nlohmann::json j = {{"model", "throughput budget (a model, not a measurement)"},
                        {"gpus", b->gpus},
                        {"per_gpu_rate", b->per_gpu_rate},
                        {"loader_cap", b->loader_cap},
                        {"demand", b->demand},
                        {"supply", b->supply},
                        {"predicted_utilisation", b->predicted_utilisation},
                        {"gpus_to_saturate", b->gpus_to_saturate},
                        {"bound", b->bound}};
    std::cout << dump_json(j);
  } else {
    std::cout << profile::render_budget_text(*b);
  }
  return kExitOk;
}

int run_profile_layout(const ProfileOptions& o) {
  auto s = profile::scan_layout(o.dir);
  if (!s.is_ok()) return fail(s.status());
  std::cout << (o.json ? dump_json(profile::layout_json(*s)) : profile::layout_text(*s));
  return kExitOk;
}

int run_profile_layout_diff(const ProfileOptions& o) {
  auto ja = read_json(o.a);
  if (!ja.is_ok()) return fail(ja.status());
  auto jb = read_json(o.b);
  if (!jb.is_ok()) return fail(jb.status());
  auto a = profile::layout_from_json(*ja, o.a);
  if (!a.is_ok()) return fail(a.status());
  auto b = profile::layout_from_json(*jb, o.b);
  if (!b.is_ok()) return fail(b.status());
  auto changes = profile::diff_layouts(*a, *b);
  if (o.json) {
    std::cout << dump_json(nlohmann::json{{"changes", changes}});
  } else if (changes.empty()) {
    std::cout << "no layout change between " << o.a << " and " << o.b << "\n";
  } else {
    for (const auto& c : changes) std::cout << c << "\n";
  }
  return kExitOk;
}

int run_profile_env(const ProfileOptions& o) {
  auto e = profile::capture_env(o.config);
  if (!e.is_ok()) return fail(e.status());
  e->fields["lib.cli11"] = CLI11_VERSION;
  std::cout << (o.json ? dump_json(profile::env_json(*e)) : profile::env_text(*e));
  return kExitOk;
}

int run_profile_env_diff(const ProfileOptions& o) {
  auto ja = read_json(o.a);
  if (!ja.is_ok()) return fail(ja.status());
  auto jb = read_json(o.b);
  if (!jb.is_ok()) return fail(jb.status());
  auto a = profile::env_from_json(*ja, o.a);
  if (!a.is_ok()) return fail(a.status());
  auto b = profile::env_from_json(*jb, o.b);
  if (!b.is_ok()) return fail(b.status());
  auto changes = profile::diff_env(*a, *b);
  if (o.json) {
    std::cout << dump_json(nlohmann::json{{"changes", changes}});
  } else if (changes.empty()) {
    std::cout << "no environment change between " << o.a << " and " << o.b << "\n";
  } else {
    for (const auto& c : changes) std::cout << c << "\n";
  }
  return kExitOk;
}

Runner setup_profile(CLI::App& root, CLI::App*& sub) {
  auto o = std::make_shared<ProfileOptions>();
  sub = root.add_subcommand("profile",
                            "Step profiler: analyze traces, throughput budget, dataset layout, "
                            "environment");
  sub->require_subcommand(1);
  auto* analyze = sub->add_subcommand(
      "analyze",
      "Name why training is slow from recorder files and/or PyTorch profiler traces "
      "(one file per rank)");
  analyze
      ->add_option("files", o->files,
                   "trace or recorder files, one per rank (.json, .json.gz, .jsonl), or a "
                   "directory of them")
      ->required();
  analyze->add_flag("--json", o->json, "machine-readable output");
  analyze->add_option("--svg", o->svg, "write a chart of step time and data wait per rank");
  analyze->add_flag("--one-rank", o->one_rank,
                    "all files are captures of one process: analyse them as consecutive windows "
                    "of one rank");

  auto* budget = sub->add_subcommand(
      "budget", "Throughput-budget MODEL: predicted GPU utilisation from rates");
  budget->add_option("--gpus", o->gpus, "number of GPUs")->required();
  budget->add_option("--per-gpu", o->per_gpu, "samples/s one GPU consumes")->required();
  budget->add_option("--loader-cap", o->loader_cap, "samples/s the loader can supply")->required();
  budget->add_flag("--json", o->json, "machine-readable output");

  auto* layout = sub->add_subcommand("layout", "File count, sizes and formats of a dataset");
  layout->add_option("dir", o->dir, "dataset directory")->required();
  layout->add_flag("--json", o->json, "machine-readable output (input of layout-diff)");

  auto* layout_diff = sub->add_subcommand("layout-diff", "What changed between two layouts");
  layout_diff->add_option("a", o->a, "older `layout --json` output")->required();
  layout_diff->add_option("b", o->b, "newer `layout --json` output")->required();
  layout_diff->add_flag("--json", o->json, "machine-readable output");

  auto* env = sub->add_subcommand("env", "Library versions, compiler, CUDA, host, env vars");
  env->add_flag("--json", o->json, "machine-readable output (input of env-diff)");
  env->add_option("--config", o->config, "training config file to digest (XXH3)");

  auto* env_diff = sub->add_subcommand("env-diff", "What changed between two env snapshots");
  env_diff->add_option("a", o->a, "older `env --json` output")->required();
  env_diff->add_option("b", o->b, "newer `env --json` output")->required();
  env_diff->add_flag("--json", o->json, "machine-readable output");

  return [o, analyze, budget, layout, layout_diff, env, env_diff]() -> int {
    if (analyze->parsed()) return run_profile_analyze(*o);
    if (budget->parsed()) return run_profile_budget(*o);
    if (layout->parsed()) return run_profile_layout(*o);
    if (layout_diff->parsed()) return run_profile_layout_diff(*o);
    if (env->parsed()) return run_profile_env(*o);
    if (env_diff->parsed()) return run_profile_env_diff(*o);
    std::cerr << "ckpt profile: choose a subcommand (see ckpt profile --help)\n";
    return kExitUsage;
  };
}

}  // namespace ckpt::cli
