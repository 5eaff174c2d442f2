// `ckpt coverage`: build the visits (journal or run spec), compute coverage, print text or JSON,
// optionally write the strip chart.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "analytics/checkpoint_cursors.h"
#include "analytics/commands.h"
#include "analytics/coverage.h"
#include "analytics/coverage_chart.h"
#include "analytics/coverage_from_journal.h"
#include "analytics/run_spec.h"
#include "analytics/svg_canvas.h"
#include "cli/exit_codes.h"

namespace ckpt::analytics {
namespace {

// Ranges printed per list in the text report; the JSON has the ids.
constexpr size_t kTextRanges = 12;

std::string ranges_text(const std::vector<PositionRange>& ranges, bool exclusive_end) {
  std::string s;
  for (size_t i = 0; i < ranges.size() && i < kTextRanges; ++i) {
    const auto& r = ranges[i];
    if (i) s += ", ";
    if (exclusive_end) {
      s += "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
    } else if (r.end - r.begin == 1) {
      s += std::to_string(r.begin);
    } else {
      s += std::to_string(r.begin) + "-" + std::to_string(r.end - 1);
    }
  }
  if (ranges.size() > kTextRanges) {
    s += ", ... (" + std::to_string(ranges.size() - kTextRanges) + " more ranges)";
  }
  return s;
}

nlohmann::json cursor_json(const std::optional<loader::LoaderCursor>& c) {
  if (!c) return nullptr;
  return {{"epoch", c->epoch}, {"position", c->position}};
}

std::string cursor_words(const std::optional<loader::LoaderCursor>& c) {
  if (!c) return "no loader";
  return "epoch " + std::to_string(c->epoch) + " position " + std::to_string(c->position);
}

nlohmann::json to_json(const CoverageReport& r, const CoverageInput& in, const std::string& src,
                       const std::vector<CheckpointCursorCheck>& checkpoints) {
  nlohmann::json j;
  j["source"] = src;
  j["dataset_size"] = r.dataset_size;
  j["sampler"] = r.sampler;
  j["epoch_length"] = r.epoch_length;
  j["steps_per_epoch"] = r.steps_per_epoch;
  auto& eps = j["epochs"] = nlohmann::json::array();
  for (const auto& e : r.epochs) {
    eps.push_back(
        {{"epoch", e.epoch},
         {"unique", e.unique},
         {"fraction", e.fraction},
         {"visits", e.visits},
         {"repeats", e.repeats},
         {"never_visited", e.never_visited_ids},
         {"never_visited_count", e.never_visited_count},
         {"never_visited_truncated", e.never_visited_ids.size() < e.never_visited_count}});
  }
  j["overall"] = {
      {"unique", r.overall_unique}, {"fraction", r.overall_fraction}, {"visits", r.total_visits}};
  auto& rs = j["restarts"] = nlohmann::json::array();
  for (const auto& m : in.restarts) {
    rs.push_back({{"step", m.step}, {"epoch", m.epoch}, {"position", m.position}});
  }
  if (!checkpoints.empty()) {
    auto& cs = j["checkpoints"] = nlohmann::json::array();
    for (const auto& c : checkpoints) {
      cs.push_back({{"step", c.step},
                    {"name", c.name},
                    {"ranks", c.ranks},
                    {"cursor", cursor_json(c.cursor)},
                    {"journal_cursor", cursor_json(c.journal_cursor)},
                    {"ok", c.ok()},
                    {"problem", c.problem}});
    }
  }
  return j;
}

void print_text(const CoverageReport& r, const CoverageInput& in, const std::string& src,
                const std::vector<CheckpointCursorCheck>& checkpoints, std::ostream& out) {
  const SamplerConfig& c = in.sampler;
  out << "ckpt coverage: " << src << "\n";
  out << "dataset: " << grouped(r.dataset_size) << " samples; sampler " << r.sampler
      << (c.shuffle ? " (shuffled, seed " + std::to_string(c.seed) + ")" : " (in order)")
      << (c.drop_last ? ", drop_last" : "") << "; " << grouped(c.step_positions())
      << " samples per step; " << grouped(r.epoch_length) << " positions and "
      << grouped(r.steps_per_epoch) << " steps per epoch\n";
  out << "restarts: " << in.restarts.size();
  for (size_t i = 0; i < in.restarts.size() && i < kTextRanges; ++i) {
    const auto& m = in.restarts[i];
    out << (i ? ", " : " (") << "step " << m.step << " -> epoch " << m.epoch << " position "
        << m.position;
  }
  if (in.restarts.size() > kTextRanges) out << ", ...";
  out << (in.restarts.empty() ? "" : ")") << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %16s %9s %16s %16s %16s\n", "epoch", "unique", "fraction",
                "visits", "repeats", "never visited");
  out << line;
  for (const auto& e : r.epochs) {
    std::snprintf(line, sizeof line, "%-8llu %16s %8.2f%% %16s %16s %16s\n",
                  static_cast<unsigned long long>(e.epoch), grouped(e.unique).c_str(),
                  100.0 * e.fraction, grouped(e.visits).c_str(), grouped(e.repeats).c_str(),
                  grouped(e.never_visited_count).c_str());
    out << line;
  }
  std::snprintf(line, sizeof line,
                "overall: %s of %s samples visited at least once (%.2f%%), %s "
                "visits\n",
                grouped(r.overall_unique).c_str(), grouped(r.dataset_size).c_str(),
                100.0 * r.overall_fraction, grouped(r.total_visits).c_str());
  out << line;
  for (const auto& e : r.epochs) {
    if (e.never_visited_count == 0) continue;
    out << "\nepoch " << e.epoch << ": " << grouped(e.never_visited_count)
        << " samples never visited\n";
    if (e.single_order) {
      out << "  epoch positions: " << ranges_text(e.never_visited_positions, true) << "\n";
    }
    out << "  sample ids"
        << (e.never_visited_ids.size() < e.never_visited_count
                ? " (the first " + grouped(e.never_visited_ids.size()) + ")"
                : std::string())
        << ": " << ranges_text(runs_of(e.never_visited_ids), false) << "\n";
  }
  if (checkpoints.empty()) return;
  size_t bad = 0;
  for (const auto& c : checkpoints) bad += c.ok() ? 0 : 1;
  out << "\ncheckpoints: " << checkpoints.size() << " committed; ";
  if (bad == 0) {
    out << "the loader cursor of every rank agrees with the journal\n";
    return;
  }
  out << bad << " with a loader problem\n";
  for (const auto& c : checkpoints) {
    if (!c.ok())
      out << "  " << c.name << " (" << cursor_words(c.cursor) << "): " << c.problem << "\n";
  }
}

}  // namespace

int run_coverage_command(const CoverageCommandOptions& o, std::ostream& out, std::ostream& err) {
  if (o.run_dir.empty() == o.run_spec.empty()) {
    err << "ckpt coverage: give either a run directory or --run-spec FILE.json (exactly one)\n";
    return cli::kExitUsage;
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
    return exit_code_for_status(input.status());
  }
  CoverageOptions opts;
  opts.max_ids = o.max_ids;
  auto report = compute_coverage(*input, opts);
  if (!report.is_ok()) {
    err << "ckpt coverage: " << src << ": " << report.status().message() << "\n";
    return exit_code_for_status(report.status());
  }
  if (!o.svg_path.empty()) {
    Status st = write_text_file(o.svg_path, coverage_chart_svg(*report, src));
    if (!st.is_ok()) {
      err << "ckpt coverage: " << st.message() << "\n";
      return exit_code_for_status(st);
    }
  }
  if (o.json) {
    out << to_json(*report, *input, src, checkpoints).dump(2) << "\n";
  } else {
    print_text(*report, *input, src, checkpoints, out);
  }
  return cli::kExitOk;
}

}  // namespace ckpt::analytics
