// `ckpt coverage`: build the visits (journal or run spec), compute coverage, print text or JSON,
// optionally write the strip chart.
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

bool has_journal(Env* env, const std::string& dir) { return env->exists(dir + "/journal.jsonl"); }

// A Hugging Face Trainer output folder: the run spec derived from it (analytics/coverage/hf_run.h).
Result<analytics::DerivedRunSpec> derive_from_hf(const CoverageCommandOptions& o, Env* env) {
  CKPT_ASSIGN_OR_RETURN(analytics::HfRunFacts facts, analytics::scan_hf_output_dir(env, o.run_dir));
  CKPT_ASSIGN_OR_RETURN(analytics::HfTrainingArgs args,
                        read_hf_training_args(env, facts.newest_checkpoint + "/training_args.bin"));
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
Result<std::optional<LoaderRun>> derive_from_loader_states(const CoverageCommandOptions& o,
                                                           Env* env) {
  CKPT_ASSIGN_OR_RETURN(auto cks, read_loader_checkpoints(env, o.run_dir));
  if (cks.empty()) return std::optional<LoaderRun>();
  CKPT_ASSIGN_OR_RETURN(auto launches, analytics::launches_from_logs(env, o.run_dir));
  CKPT_ASSIGN_OR_RETURN(auto d,
                        analytics::derive_loader_run(cks, launches, o.dataset_size, o.batch_size));
  std::sort(cks.begin(), cks.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return std::optional<LoaderRun>(LoaderRun{std::move(cks), std::move(d)});
}

// Where the visits come from, once the input was recognised: a run spec derived from a Hugging
// Face folder, a loader run derived from checkpoints, our journal, or a run spec file.
struct Derivation {
  std::optional<analytics::DerivedRunSpec> hf;
  std::optional<LoaderRun> loader_run;
  std::vector<analytics::CheckpointCursorCheck> checkpoints;  // our runs: checkpoint cursors
};

// Step 1: recognise a Hugging Face folder or a folder of loader checkpoints (a folder with our
// journal is neither). On failure the exit code, the diagnostic printed (or, for --print-spec,
// the spec printed and kExitOk).
std::optional<int> derive(const CoverageCommandOptions& o, Env* env, Derivation* d,
                          std::ostream& out, std::ostream& err) {
  const bool foreign_dir = !o.run_dir.empty() && !has_journal(env, o.run_dir);
  if (foreign_dir && analytics::is_hf_output_dir(env, o.run_dir)) {
    auto spec = derive_from_hf(o, env);
    if (!spec.is_ok()) {
      print_diagnostic(err, "coverage", spec.status().message());
      return exit_code_for(spec.status());
    }
    d->hf = std::move(spec).value();
    if (o.print_spec) {
      out << analytics::run_spec_json(d->hf->spec) << "\n";
      return kExitOk;
    }
  } else if (o.print_spec) {
    err << "ckpt coverage: --print-spec needs a Hugging Face output folder (checkpoint-N/); a "
           "run spec cannot express the orders of Lightning or StatefulDataLoader runs (--json "
           "shows what was derived)\n";
    return kExitUsage;
  }
  if (!d->hf && foreign_dir) {
    auto l = derive_from_loader_states(o, env);
    if (!l.is_ok()) {
      print_diagnostic(err, "coverage", l.status().message());
      return exit_code_for(l.status());
    }
    d->loader_run = std::move(l).value();
  }
  return std::nullopt;
}

// Replays a run spec; its errors name `source`.
Result<analytics::CoverageInput> replayed(const analytics::RunSpec& spec,
                                          const std::string& source) {
  auto input = analytics::replay_run(spec);
  if (!input.is_ok()) return corrupt(source + ": " + input.status().message());
  return input;
}

// Our run: the journal's visits; the checkpoints' loader cursors are checked against it
// (warnings only).
Result<analytics::CoverageInput> journal_input(const std::string& run_dir, Env* env, Derivation* d,
                                               std::ostream& err) {
  CKPT_ASSIGN_OR_RETURN(analytics::RunJournal journal, analytics::read_journal(env, run_dir));
  for (const auto& w : journal.warnings) {
    print_diagnostic(err, "coverage", "warning: " + std::string(w));
  }
  auto checks = analytics::check_checkpoint_cursors(env, run_dir, journal);
  if (checks.is_ok()) {
    d->checkpoints = std::move(checks).value();
  } else {
    print_diagnostic(err, "coverage",
                     "warning: checkpoints not checked: " + checks.status().message());
  }
  return analytics::coverage_input_from_journal(journal);
}

// Step 2: the visits and restart marks, from whichever source step 1 found.
Result<analytics::CoverageInput> coverage_input(const CoverageCommandOptions& o, Env* env,
                                                Derivation* d, std::ostream& err) {
  if (d->loader_run) return d->loader_run->derived.input;
  if (d->hf) return replayed(d->hf->spec, o.run_dir);
  if (!o.run_dir.empty()) return journal_input(o.run_dir, env, d, err);
  CKPT_ASSIGN_OR_RETURN(analytics::RunSpec spec, analytics::read_run_spec(env, o.run_spec));
  return replayed(spec, o.run_spec);
}

// Step 4 (--json): the report, with what was derived and assumed for a foreign run.
nlohmann::json report_json(const analytics::CoverageReport& report,
                           const analytics::CoverageInput& input, const std::string& src,
                           const Derivation& d) {
  nlohmann::json j = analytics::coverage_to_json(report, input, src, d.checkpoints);
  if (d.hf) {
    j["derived_spec"] = nlohmann::json::parse(analytics::run_spec_json(d.hf->spec));
    j["assumptions"] = d.hf->assumptions;
    j["certainty"] = d.hf->certainty;
  }
  if (d.loader_run) {
    j["derived"] = loader_run_json(d.loader_run->derived, d.loader_run->checkpoints);
    j["restart_evidence"] = restart_evidence_json(d.loader_run->derived);
    j["assumptions"] = d.loader_run->derived.assumptions;
    j["certainty"] = d.loader_run->derived.certainty;
  }
  return j;
}

// Step 4 (text): the table, then what was derived and assumed for a foreign run.
void print_report_text(const analytics::CoverageReport& report,
                       const analytics::CoverageInput& input, const std::string& src,
                       const Derivation& d, std::ostream& out) {
  analytics::print_coverage_text(report, input, src, d.checkpoints, out);
  if (d.hf) {
    out << "\nrun spec derived from the Hugging Face folder (--print-spec shows it):\n";
    for (const auto& a : d.hf->assumptions) out << "  assumed: " << a << "\n";
    out << "  certainty: " << d.hf->certainty << "\n";
  }
  if (d.loader_run) {
    const auto& l = d.loader_run->derived;
    out << "\nderived from " << d.loader_run->checkpoints.size() << " checkpoints ("
        << (l.kind == "lightning" ? "Lightning .ckpt" : "StatefulDataLoader states") << ") and "
        << l.launches.size() << " launches:\n";
    for (const auto& r : l.restarts) {
      out << "  restart at step " << r.step << " from " << r.checkpoint << ": " << r.evidence
          << "\n";
    }
    for (const auto& a : l.assumptions) out << "  assumed: " << a << "\n";
    out << "  certainty: " << l.certainty << "\n";
  }
}

}  // namespace

int run_coverage_command(const CoverageCommandOptions& o, Env* env, std::ostream& out,
                         std::ostream& err) {
  if (o.run_dir.empty() == o.run_spec.empty()) {
    err << "ckpt coverage: give either a run directory or --run-spec FILE.json (exactly one)\n";
    return kExitUsage;
  }
  const std::string src = o.run_dir.empty() ? o.run_spec : o.run_dir;
  Derivation d;
  if (auto done = derive(o, env, &d, out, err)) return *done;
  auto input = coverage_input(o, env, &d, err);
  if (!input.is_ok()) {
    print_diagnostic(err, "coverage", input.status().message());
    return exit_code_for(input.status());
  }
  // Step 3: the coverage itself, and the chart when asked.
  analytics::CoverageOptions opts;
  opts.max_ids = o.max_ids;
  auto report = analytics::compute_coverage(*input, opts);
  if (!report.is_ok()) {
    print_diagnostic(err, "coverage", src + ": " + report.status().message());
    return exit_code_for(report.status());
  }
  if (!o.svg_path.empty()) {
    Status st = write_text_file(o.svg_path, analytics::coverage_chart_svg(*report, src));
    if (!st.is_ok()) {
      print_diagnostic(err, "coverage", st.message());
      return exit_code_for(st);
    }
  }
  if (o.json) {
    out << json_text(report_json(*report, *input, src, d)) << "\n";
  } else {
    print_report_text(*report, *input, src, d, out);
  }
  return kExitOk;
}

}  // namespace ckpt::cli
