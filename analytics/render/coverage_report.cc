#include "analytics/render/coverage_report.h"

#include <algorithm>
#include <cstdio>

#include "analytics/render/svg_canvas.h"

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

}  // namespace

nlohmann::json coverage_to_json(const CoverageReport& r, const CoverageInput& in,
                                const std::string& src,
                                const std::vector<CheckpointCursorCheck>& checkpoints) {
  nlohmann::json j;
  j["source"] = src;
  j["dataset_size"] = r.dataset_size;
  j["sampler"] = r.sampler;
  j["epoch_length"] = r.epoch_length;
  j["steps_per_epoch"] = r.steps_per_epoch;
  auto& eps = j["epochs"] = nlohmann::json::array();
  for (const auto& e : r.epochs) {
    nlohmann::json row = {{"epoch", e.epoch},
                          {"unique", e.unique},
                          {"fraction", e.fraction},
                          {"visits", e.visits},
                          {"repeats", e.repeats},
                          {"never_visited", e.never_visited_ids},
                          {"never_visited_count", e.never_visited_count},
                          {"never_visited_truncated",
                           e.ids_known && e.never_visited_ids.size() < e.never_visited_count}};
    if (!e.ids_known) row["ids_known"] = false;
    if (!e.exact) {
      row["exact"] = false;
      row["unique_max"] = e.unique_max;
      row["unique_expected"] = e.unique_expected;
    }
    eps.push_back(std::move(row));
  }
  j["overall"] = {
      {"unique", r.overall_unique}, {"fraction", r.overall_fraction}, {"visits", r.total_visits}};
  if (!r.overall_exact) {
    j["overall"]["exact"] = false;
    j["overall"]["unique_max"] = r.overall_unique_max;
    j["overall"]["unique_expected"] = r.overall_expected;
  }
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

void print_coverage_text(const CoverageReport& r, const CoverageInput& in, const std::string& src,
                         const std::vector<CheckpointCursorCheck>& checkpoints, std::ostream& out) {
  const SamplerConfig& c = in.sampler;
  out << "ckpt coverage: " << src << "\n";
  out << "dataset: " << grouped(r.dataset_size) << " samples; sampler " << r.sampler
      << (!c.shuffle        ? " (in order)"
          : in.orders_given ? " (shuffled; orders from the saved generator states, where saved)"
                            : " (shuffled, seed " + std::to_string(c.seed) + ")")
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
  bool bounded = false;
  for (const auto& e : r.epochs) {
    const std::string unique =
        e.exact ? grouped(e.unique) : "*" + grouped(e.unique) + "-" + grouped(e.unique_max);
    const std::string repeats =
        e.exact ? grouped(e.repeats)
                : "*" + grouped(e.visits - e.unique_max) + "-" + grouped(e.repeats);
    const std::string never = (e.exact ? "" : "*<=") + grouped(e.never_visited_count);
    bounded = bounded || !e.exact;
    std::snprintf(line, sizeof line, "%-8llu %16s %8.2f%% %16s %16s %16s\n",
                  static_cast<unsigned long long>(e.epoch), unique.c_str(), 100.0 * e.fraction,
                  grouped(e.visits).c_str(), repeats.c_str(), never.c_str());
    out << line;
  }
  if (bounded) {
    out << "* bounds: these epochs mix shuffles whose order is unknown (see below)\n";
  }
  if (r.overall_exact) {
    std::snprintf(line, sizeof line,
                  "overall: %s of %s samples visited at least once (%.2f%%), %s "
                  "visits\n",
                  grouped(r.overall_unique).c_str(), grouped(r.dataset_size).c_str(),
                  100.0 * r.overall_fraction, grouped(r.total_visits).c_str());
  } else {
    std::snprintf(line, sizeof line,
                  "overall: between %s and %s of %s samples visited at least once (about %.1f "
                  "if the unknown shuffles are independent), %s visits\n",
                  grouped(r.overall_unique).c_str(), grouped(r.overall_unique_max).c_str(),
                  grouped(r.dataset_size).c_str(), r.overall_expected,
                  grouped(r.total_visits).c_str());
  }
  out << line;
  for (const auto& e : r.epochs) {
    if (e.never_visited_count == 0) continue;
    if (!e.ids_known) {
      out << "\nepoch " << e.epoch << ": " << (e.exact ? "" : "at most ")
          << grouped(e.never_visited_count) << " samples never visited; their ids are unknown "
          << "(the epoch's shuffle order was not saved)\n";
      if (e.single_order) {
        out << "  epoch positions: " << ranges_text(e.never_visited_positions, true) << "\n";
      }
      continue;
    }
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

}  // namespace ckpt::analytics
