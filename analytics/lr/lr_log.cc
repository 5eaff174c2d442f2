#include "analytics/lr/lr_log.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "analytics/input/json_text.h"
#include "ckpt/base/text.h"

namespace ckpt::analytics {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_tag(const std::string& tag) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t slash = tag.find('/', begin);
    parts.push_back(tag.substr(begin, slash == std::string::npos ? slash : slash - begin));
    if (slash == std::string::npos) return parts;
    begin = slash + 1;
  }
}

bool all_digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

bool is_group_component(const std::string& c) {
  for (const char* prefix : {"pg", "group_", "group", "param_group_", "param_group", ""}) {
    const std::string p = prefix;
    if (c.compare(0, p.size(), p) == 0 && all_digits(c, p.size())) return true;
  }
  return false;
}

bool is_lr_component(const std::string& c) {
  if (c == "lr" || c == "learning_rate" || c == "learning-rate" || c == "learningrate") return true;
  if (c.size() > 3 && c.compare(0, 3, "lr-") == 0) return true;
  return c.size() > 3 && c.compare(0, 3, "lr_") == 0 &&
         (all_digits(c, 3) || is_group_component(c.substr(3)));
}

// Splits one launch's samples of a tag where the step goes backwards (a relaunch into the same
// file or metric).
std::vector<std::vector<ScalarSample>> split_on_rewind(std::vector<ScalarSample> mine) {
  std::vector<std::vector<ScalarSample>> out(1);
  for (auto& s : mine) {
    if (!out.back().empty() && s.step < out.back().back().step) out.emplace_back();
    out.back().push_back(std::move(s));
  }
  return out;
}

// Steps right after a wall-time gap far beyond the launch's cadence (step 3 of lr_log.h).
std::vector<int64_t> gap_restarts(const std::vector<ScalarSample>& samples) {
  std::vector<double> gaps;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (samples[i].wall_time > 0 && samples[i - 1].wall_time > 0) {
      gaps.push_back(samples[i].wall_time - samples[i - 1].wall_time);
    }
  }
  if (gaps.size() < kMinGapsForCadence) return {};
  std::vector<double> sorted = gaps;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double cadence = std::max(sorted[sorted.size() / 2], 0.0);
  const double threshold = std::max(kGapFactor * cadence, kMinGapSeconds);
  std::vector<int64_t> out;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (samples[i].wall_time > 0 && samples[i - 1].wall_time > 0 &&
        samples[i].wall_time - samples[i - 1].wall_time > threshold) {
      out.push_back(samples[i].step);
    }
  }
  return out;
}

// Adds one launch (the samples of one tag) to the merged series: steps 2 and 3 of lr_log.h.
void add_launch(const std::string& source, double start_wall_time,
                const std::vector<ScalarSample>& mine, std::map<int64_t, double>* merged,
                LrSeries* out) {
  const int index = static_cast<int>(out->launches.size());
  LrLaunch info{source, mine.front().step, mine.front().step, start_wall_time};
  for (const auto& s : mine) info.last_step = std::max(info.last_step, s.step);
  if (index > 0) {
    const int64_t restart = info.first_step;
    out->restarts.push_back(restart);
    auto from = merged->lower_bound(restart);
    if (from != merged->end()) {
      out->redone.push_back({index, restart, merged->rbegin()->first,
                             static_cast<int64_t>(std::distance(from, merged->end()))});
      merged->erase(from, merged->end());
    }
  }
  for (const auto& s : mine) (*merged)[s.step] = s.value;
  for (int64_t r : gap_restarts(mine)) out->inferred_restarts.push_back(r);
  out->launches.push_back(info);
}

// One tag's samples, launch by launch (only the launches that logged it), in the order written.
struct TagSamples {
  std::vector<std::pair<size_t, std::vector<ScalarSample>>> launches;  // (launch index, samples)
};

LrSeries build_series(const ScalarLog& log, const std::string& tag, TagSamples&& samples) {
  LrSeries out;
  out.source = log.source;
  out.format = log.format;
  out.tag = tag;
  out.warnings = log.warnings;
  std::map<int64_t, double> merged;
  for (auto& [index, mine] : samples.launches) {
    const ScalarLaunch& launch = log.launches[index];
    bool first_part = true;
    for (const auto& part : split_on_rewind(std::move(mine))) {
      add_launch(launch.source, first_part ? launch.start_wall_time : part.front().wall_time, part,
                 &merged, &out);
      first_part = false;
    }
  }
  for (const auto& [step, lr] : merged) out.points.push_back({step, lr});
  std::sort(out.restarts.begin(), out.restarts.end());
  out.restarts.erase(std::unique(out.restarts.begin(), out.restarts.end()), out.restarts.end());
  std::sort(out.inferred_restarts.begin(), out.inferred_restarts.end());
  return out;
}

std::string tag_list(
    const std::set<std::string, bool (*)(const std::string&, const std::string&)>& tags,
    size_t max) {
  std::string s;
  size_t n = 0;
  for (const auto& t : tags) {
    if (n == max) {
      s += ", ... (" + std::to_string(tags.size() - max) + " more)";
      break;
    }
    s += (n++ ? ", \"" : "\"") + escape_bytes(t, 80) + "\"";
  }
  return s.empty() ? std::string("none") : s;
}

}  // namespace

bool is_lr_tag(const std::string& tag) {
  const auto parts = split_tag(lower(tag));
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!is_lr_component(parts[i])) continue;
    bool groups_only = true;
    for (size_t k = i + 1; k < parts.size(); ++k) groups_only &= is_group_component(parts[k]);
    if (groups_only) return true;
  }
  return false;
}

bool lr_tag_order(const std::string& a, const std::string& b) {
  if ((a == "lr") != (b == "lr")) return a == "lr";
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i]));
    const bool db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      const size_t za = na.find_first_not_of('0'), zb = nb.find_first_not_of('0');
      const std::string ta = za == std::string::npos ? "" : na.substr(za);
      const std::string tb = zb == std::string::npos ? "" : nb.substr(zb);
      if (ta.size() != tb.size()) return ta.size() < tb.size();
      if (ta != tb) return ta < tb;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;
}

Result<std::vector<LrSeries>> lr_series_from_log(const ScalarLog& log, const std::string& tag) {
  // Distinct tags by hash first (a log of many rows repeats each tag once per row), sorted once.
  std::unordered_set<std::string> distinct;
  for (const auto& launch : log.launches) {
    for (const auto& s : launch.samples) distinct.insert(s.tag);
  }
  std::set<std::string, bool (*)(const std::string&, const std::string&)> all(lr_tag_order),
      lr(lr_tag_order);
  for (const auto& t : distinct) {
    all.insert(t);
    if (is_lr_tag(t)) lr.insert(t);
  }
  std::vector<std::string> chosen;
  if (!tag.empty()) {
    if (all.count(tag) == 0) {
      return invalid_argument(log.source + ": no series tagged \"" + escape_bytes(tag, 80) +
                              "\" (learning-rate tags found: " + tag_list(lr, 20) + ")");
    }
    chosen.push_back(tag);
  } else {
    chosen.assign(lr.begin(), lr.end());
  }
  if (chosen.empty()) {
    return corrupt(log.source + ": no learning-rate series (tags found: " + tag_list(all, 12) +
                   "); name one with --tag");
  }
  // Each sample goes to its series in one pass over the log: the cost is linear in the samples
  // whatever the number of series (a CSV with 20,000 LR columns).
  std::unordered_map<std::string, size_t> series_of;
  for (size_t i = 0; i < chosen.size(); ++i) series_of.emplace(chosen[i], i);
  std::vector<TagSamples> grouped(chosen.size());
  for (size_t li = 0; li < log.launches.size(); ++li) {
    for (const auto& s : log.launches[li].samples) {
      auto it = series_of.find(s.tag);
      if (it == series_of.end()) continue;
      auto& launches = grouped[it->second].launches;
      if (launches.empty() || launches.back().first != li)
        launches.emplace_back(li, std::vector<ScalarSample>{});
      launches.back().second.push_back(s);
    }
  }
  std::vector<LrSeries> out;
  out.reserve(chosen.size());
  for (size_t i = 0; i < chosen.size(); ++i) {
    out.push_back(build_series(log, chosen[i], std::move(grouped[i])));
  }
  return out;
}

}  // namespace ckpt::analytics
