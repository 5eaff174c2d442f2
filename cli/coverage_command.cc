// `ckpt coverage`: build the visits (journal or run spec), compute coverage, print text or JSON,
// optionally write the strip chart.
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "analytics/coverage/checkpoint_cursors.h"
#include "analytics/coverage/coverage.h"
#include "analytics/coverage/coverage_from_journal.h"
#include "analytics/coverage/hf_run.h"
#include "analytics/coverage/run_spec.h"
#include "analytics/render/coverage_chart.h"
#include "analytics/render/coverage_report.h"
#include "cli/commands.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "cli/hf_training_args.h"
#include "cli/loader_checkpoint.h"

namespace ckpt::cli {
namespace {

bool has_journal(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/journal.jsonl").c_str(), &st) == 0;
}

// A Hugging Face Trainer output folder: the run spec derived from it (analytics/coverage/hf_run.h).
Result<analytics::DerivedRunSpec> derive_from_hf(const CoverageCommandOptions& o) {
  CKPT_ASSIGN_OR_RETURN(analytics::HfRunFacts facts, analytics::scan_hf_output_dir(o.run_dir));
  CKPT_ASSIGN_OR_RETURN(analytics::HfTrainingArgs args,
                        read_hf_training_args(facts.newest_checkpoint + "/training_args.bin"));
  return analytics::derive_hf_run_spec(facts, args, o.dataset_size);
}

// A run whose checkpoints hold loader states (Lightning .ckpt, StatefulDataLoader): what was
// derived from them, for the JSON.
nlohmann::json loader_run_json(const analytics::DerivedLoaderRun& d,
                               const std::vector<analytics::LoaderCheckpoint>& cks) {
  nlohmann::json j;
  j["kind"] = d.kind;
  j["batch_size"] = d.input.sampler.batch_size;
  j["steps_per_epoch"] = d.input.sampler.steps_per_epoch();
  auto& cs = j["checkpoints"] = nlohmann::json::array();
  for (const auto& c : cks) {
    nlohmann::json e = {{"source", c.source},
                        {"step", c.step},
                        {"epoch", c.epoch ? nlohmann::json(*c.epoch) : nlohmann::json()},
                        {"loader_state", c.loader.has_value()},
                        {"generator_state", c.loader && !c.loader->generator_state.empty()}};
    if (c.batches_in_epoch) e["batches_in_epoch"] = *c.batches_in_epoch;
    if (c.loader) {
      e["loader_batches"] = c.loader->batches;
      e["loader_where"] = c.loader->where;
      e["workers"] = c.loader->workers;
    }
    cs.push_back(std::move(e));
  }
  auto& ls = j["launches"] = nlohmann::json::array();
  for (const auto& l : d.launches) {
    ls.push_back({{"source", l.source}, {"first_step", l.first_step}, {"last_step", l.last_step}});
  }
  return j;
}

nlohmann::json restart_evidence_json(const analytics::DerivedLoaderRun& d) {
  auto out = nlohmann::json::array();
  for (const auto& r : d.restarts) {
    out.push_back({{"step", r.step},
                   {"checkpoint", r.checkpoint},
                   {"loader_resumed", r.loader_resumed},
                   {"epoch", r.epoch},
                   {"position", r.position},
                   {"evidence", r.evidence}});
  }
  return out;
}

struct LoaderRun {
  std::vector<analytics::LoaderCheckpoint> checkpoints;
  analytics::DerivedLoaderRun derived;
};

// Lightning .ckpt series or StatefulDataLoader states under the folder; nullopt when none.
Result<std::optional<LoaderRun>> derive_from_loader_states(const CoverageCommandOptions& o) {
  CKPT_ASSIGN_OR_RETURN(auto cks, read_loader_checkpoints(o.run_dir));
  if (cks.empty()) return std::optional<LoaderRun>();
  CKPT_ASSIGN_OR_RETURN(auto launches, analytics::launches_from_logs(o.run_dir));
  CKPT_ASSIGN_OR_RETURN(auto d,
                        analytics::derive_loader_run(cks, launches, o.dataset_size, o.batch_size));
  std::sort(cks.begin(), cks.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return std::optional<LoaderRun>(LoaderRun{std::move(cks), std::move(d)});
}

}  // namespace

int run_coverage_command(const CoverageCommandOptions& o, std::ostream& out, std::ostream& err) {
  using namespace analytics;
  if (o.run_dir.empty() == o.run_spec.empty()) {
    err << "ckpt coverage: give either a run directory or --run-spec FILE.json (exactly one)\n";
    return kExitUsage;
  }
  const std::string src = o.run_dir.empty() ? o.run_spec : o.run_dir;
  std::vector<CheckpointCursorCheck> checkpoints;
  std::optional<DerivedRunSpec> derived;
  if (!o.run_dir.empty() && !has_journal(o.run_dir) && is_hf_output_dir(o.run_dir)) {
    auto d = derive_from_hf(o);
    if (!d.is_ok()) {
      print_diagnostic(err, "coverage", d.status().message());
      return exit_code_for(d.status());
    }
    derived = std::move(d).value();
    if (o.print_spec) {
      out << run_spec_json(derived->spec) << "\n";
      return kExitOk;
    }
  } else if (o.print_spec) {
    err << "ckpt coverage: --print-spec needs a Hugging Face output folder (checkpoint-N/); a "
           "run spec cannot express the orders of Lightning or StatefulDataLoader runs (--json "
           "shows what was derived)\n";
    return kExitUsage;
  }
  std::optional<LoaderRun> loader_run;
  if (!derived && !o.run_dir.empty() && !has_journal(o.run_dir)) {
    auto l = derive_from_loader_states(o);
    if (!l.is_ok()) {
      print_diagnostic(err, "coverage", l.status().message());
      return exit_code_for(l.status());
    }
    loader_run = std::move(l).value();
  }
  Result<CoverageInput> input = [&]() -> Result<CoverageInput> {
    if (loader_run) return loader_run->derived.input;
    if (derived) {
      auto replayed = replay_run(derived->spec);
      if (!replayed.is_ok()) return corrupt(o.run_dir + ": " + replayed.status().message());
      return replayed;
    }
    if (!o.run_dir.empty()) {
      CKPT_ASSIGN_OR_RETURN(RunJournal journal, read_journal(o.run_dir));
      for (const auto& w : journal.warnings)
        print_diagnostic(err, "coverage", "warning: " + std::string(w));
      auto checks = check_checkpoint_cursors(o.run_dir, journal);
      if (checks.is_ok()) {
        checkpoints = std::move(checks).value();
      } else {
        print_diagnostic(err, "coverage",
                         "warning: checkpoints not checked: " + checks.status().message());
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
    print_diagnostic(err, "coverage", input.status().message());
    return exit_code_for(input.status());
  }
  CoverageOptions opts;
  opts.max_ids = o.max_ids;
  auto report = compute_coverage(*input, opts);
  if (!report.is_ok()) {
    print_diagnostic(err, "coverage", src + ": " + report.status().message());
    return exit_code_for(report.status());
  }
  if (!o.svg_path.empty()) {
    Status st = write_text_file(o.svg_path, coverage_chart_svg(*report, src));
    if (!st.is_ok()) {
      print_diagnostic(err, "coverage", st.message());
      return exit_code_for(st);
    }
  }
  if (o.json) {
    nlohmann::json j = coverage_to_json(*report, *input, src, checkpoints);
    if (derived) {
      j["derived_spec"] = nlohmann::json::parse(run_spec_json(derived->spec));
      j["assumptions"] = derived->assumptions;
      j["certainty"] = derived->certainty;
    }
    if (loader_run) {
      j["derived"] = loader_run_json(loader_run->derived, loader_run->checkpoints);
      j["restart_evidence"] = restart_evidence_json(loader_run->derived);
      j["assumptions"] = loader_run->derived.assumptions;
      j["certainty"] = loader_run->derived.certainty;
    }
    out << json_text(j) << "\n";
  } else {
    print_coverage_text(*report, *input, src, checkpoints, out);
    if (derived) {
      out << "\nrun spec derived from the Hugging Face folder (--print-spec shows it):\n";
      for (const auto& a : derived->assumptions) out << "  assumed: " << a << "\n";
      out << "  certainty: " << derived->certainty << "\n";
    }
    if (loader_run) {
      const auto& d = loader_run->derived;
      out << "\nderived from " << loader_run->checkpoints.size() << " checkpoints ("
          << (d.kind == "lightning" ? "Lightning .ckpt" : "StatefulDataLoader states") << ") and "
          << d.launches.size() << " launches:\n";
      for (const auto& r : d.restarts) {
        out << "  restart at step " << r.step << " from " << r.checkpoint << ": " << r.evidence
            << "\n";
      }
      for (const auto& a : d.assumptions) out << "  assumed: " << a << "\n";
      out << "  certainty: " << d.certainty << "\n";
    }
  }
  return kExitOk;
}

}  // namespace ckpt::cli
