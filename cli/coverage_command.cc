// `ckpt coverage`: build the visits (journal or run spec), compute coverage, print text or JSON,
// optionally write the strip chart.
#include "analytics/checkpoint_cursors.h"
#include "analytics/coverage.h"
#include "analytics/coverage_chart.h"
#include "analytics/coverage_from_journal.h"
#include "analytics/coverage_report.h"
#include "analytics/run_spec.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace ckpt::cli {

int run_coverage_command(const CoverageCommandOptions& o, std::ostream& out, std::ostream& err) {
  using namespace analytics;
  if (o.run_dir.empty() == o.run_spec.empty()) {
    err << "ckpt coverage: give either a run directory or --run-spec FILE.json (exactly one)\n";
    return kExitUsage;
  }
  const std::string src = o.run_dir.empty() ? o.run_spec : o.run_dir;
  std::vector<CheckpointCursorCheck> checkpoints;
  Result<CoverageInput> input = [&]() -> Result<CoverageInput> {
    if (!o.run_dir.empty()) {
      CKPT_ASSIGN_OR_RETURN(RunJournal journal, read_journal(o.run_dir));
      for (const auto& w : journal.warnings) err << "ckpt coverage: warning: " << w << "\n";
      auto checks = check_checkpoint_cursors(o.run_dir, journal);
      if (checks.is_ok()) {
        checkpoints = std::move(checks).value();
      } else {
        err << "ckpt coverage: warning: checkpoints not checked: " << checks.status().message()
            << "\n";
      }
      return coverage_input_from_journal(journal);
    }
    CKPT_ASSIGN_OR_RETURN(RunSpec spec, read_run_spec(o.run_spec));
    auto replayed = replay_run(spec);
    if (!replayed.is_ok()) {
      return corrupt(o.run_spec + ": " + replayed.status().message());
    }
    return replayed;
  }();
  if (!input.is_ok()) {
    err << "ckpt coverage: " << input.status().message() << "\n";
    return exit_code_for(input.status());
  }
  CoverageOptions opts;
  opts.max_ids = o.max_ids;
  auto report = compute_coverage(*input, opts);
  if (!report.is_ok()) {
    err << "ckpt coverage: " << src << ": " << report.status().message() << "\n";
    return exit_code_for(report.status());
  }
  if (!o.svg_path.empty()) {
    Status st = write_text_file(o.svg_path, coverage_chart_svg(*report, src));
    if (!st.is_ok()) {
      err << "ckpt coverage: " << st.message() << "\n";
      return exit_code_for(st);
    }
  }
  if (o.json) {
    out << coverage_to_json(*report, *input, src, checkpoints)
               .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
  } else {
    print_coverage_text(*report, *input, src, checkpoints, out);
  }
  return kExitOk;
}

}  // namespace ckpt::cli
