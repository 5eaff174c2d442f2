// Rendering of a ScanReport: the text lines and the `--json` object (docs/cli.md).
#include <set>
#include <sstream>

#include "ckpt/base/text.h"
#include "verify/scan/scan.h"

namespace ckpt::verify {
namespace {

// Names and messages come from the file: control and non-ASCII bytes are shown as \xNN so the
// terminal only ever receives text.
std::string printable(const std::string& s) {
  return escape_bytes(s, std::string::npos, Backslash::kKeep);
}

struct WeightsOnlySummary {
  bool loads = false;
  std::vector<std::string> needs;
};

WeightsOnlySummary weights_only(const ScanReport& r) {
  WeightsOnlySummary w;
  std::set<std::string> needs;
  bool any = false, all = true;
  for (const auto& f : r.files) {
    if (!f.torch_load_input) continue;
    any = true;
    all = all && f.weights_only_loads;
    needs.insert(f.weights_only_needs.begin(), f.weights_only_needs.end());
  }
  // A raw pickle is no torch.load input, but what it names is still what one would allow.
  if (!any) {
    for (const auto& f : r.files)
      needs.insert(f.weights_only_needs.begin(), f.weights_only_needs.end());
  }
  w.loads = any && all;
  w.needs.assign(needs.begin(), needs.end());
  return w;
}

int count(const FileScan& f, Risk r) {
  int n = 0;
  for (const auto& g : f.globals) n += g.risk == r;
  return n;
}

std::string verdict_line(const FileScan& f) {
  std::ostringstream o;
  const std::string file = printable(f.file);
  const int dangerous = count(f, Risk::kDangerous);
  const int framework = count(f, Risk::kFramework);
  if (dangerous > 0) {
    o << "UNSAFE     " << file << " (" << f.format << "): " << dangerous << " dangerous global"
      << (dangerous > 1 ? "s" : "")
      << " — torch.load(weights_only=False) / pickle.load would run code";
  } else if (framework > 0) {
    o << "FRAMEWORK  " << file << " (" << f.format << "): " << framework << " framework object"
      << (framework > 1 ? "s" : "") << ", nothing dangerous";
  } else {
    o << "SAFE       " << file << " (" << f.format << "): " << f.globals.size() << " global"
      << (f.globals.size() == 1 ? "" : "s") << ", nothing dangerous";
  }
  if (f.torch_load_input) {
    if (f.weights_only_loads) {
      o << "; weights_only=True loads it";
    } else if (!f.weights_only_needs.empty()) {
      o << "; weights_only=True needs " << f.weights_only_needs.size() << " allowed global"
        << (f.weights_only_needs.size() > 1 ? "s" : "");
    } else {
      o << "; weights_only=True refuses it";
    }
  }
  return o.str();
}

}  // namespace

std::string scan_report_to_text(const ScanReport& r) {
  std::ostringstream o;
  for (const auto& f : r.files) o << verdict_line(f) << "\n";
  if (r.files.empty())
    o << "SAFE       " << printable(r.path) << ": no file that can carry a pickle\n";
  for (Risk risk : {Risk::kDangerous, Risk::kFramework, Risk::kUnknown}) {
    for (const auto& f : r.files) {
      for (const auto& g : f.globals) {
        if (g.risk != risk) continue;
        o << "  " << risk_name(g.risk) << "  " << printable(g.module + "." + g.name) << "  "
          << (g.called ? "called" : "referenced") << "  " << printable(g.where) << "\n";
      }
    }
  }
  WeightsOnlySummary w = weights_only(r);
  if (!w.needs.empty()) {
    o << "  weights_only: torch.serialization.add_safe_globals needs";
    for (const auto& n : w.needs) o << " " << printable(n);
    o << "\n";
  }
  for (const auto& f : r.files) {
    for (const auto& e : f.errors) o << "  error: " << printable(e) << "\n";
  }
  return o.str();
}

nlohmann::json scan_report_to_json(const ScanReport& r) {
  nlohmann::json globals = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& f : r.files) {
    for (const auto& g : f.globals) {
      globals.push_back({{"module", g.module},
                         {"name", g.name},
                         {"risk", risk_name(g.risk)},
                         {"called", g.called},
                         {"where", g.where}});
    }
    for (const auto& e : f.errors) errors.push_back(e);
  }
  WeightsOnlySummary w = weights_only(r);
  return {{"path", r.path},
          {"format", r.format},
          {"safe", r.safe()},
          {"globals", globals},
          {"weights_only", {{"loads", w.loads}, {"needs", w.needs}}},
          {"errors", errors}};
}

}  // namespace ckpt::verify
