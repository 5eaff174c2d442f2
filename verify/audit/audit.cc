#include "verify/audit/audit.h"

#include <algorithm>
#include <sstream>

#include "ckpt/format/printable.h"
#include "verify/formats/format_reader.h"

namespace ckpt::verify {

Result<std::set<AuditComponent>> parse_component_list(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    names.push_back(item.substr(b, e - b + 1));
  }
  if (names.empty()) return invalid_argument("--require: empty component list");
  auto parsed = parse_audit_components(names);
  if (!parsed.is_ok()) return invalid_argument("--require: " + parsed.status().message());
  return parsed;
}

Result<AuditReport> audit_path(const ReaderSet& readers, Env* env, const std::string& path,
                               const AuditOptions& options) {
  ReadOptions ro;
  ro.deep = options.deep;
  ro.progress = options.progress;
  ro.inspect = false;
  CKPT_ASSIGN_OR_RETURN(CheckpointView view, readers.read(env, path, ro));
  return apply_rules(view, options.require);
}

Result<CheckpointView> inspect_path(const ReaderSet& readers, Env* env, const std::string& path) {
  ReadOptions ro;
  ro.inspect = true;
  return readers.read(env, path, ro);
}

nlohmann::json report_to_json(const AuditReport& r) {
  nlohmann::json j;
  j["path"] = r.path;
  j["format"] = format_name(r.format);
  j["complete"] = r.complete;
  nlohmann::json comps = nlohmann::json::object();
  for (const auto& c : r.components) {
    comps[component_name(c.component)] = {{"status", status_name(c.status)},
                                          {"evidence", c.evidence},
                                          {"consequence", c.consequence},
                                          {"fix", c.fix},
                                          {"required", c.required}};
  }
  j["components"] = comps;
  nlohmann::json f = nlohmann::json::array();
  for (const auto& x : r.findings) {
    f.push_back({{"severity", severity_name(x.severity)},
                 {"component", x.component ? nlohmann::json(component_name(*x.component))
                                           : nlohmann::json(nullptr)},
                 {"message", x.message}});
  }
  j["findings"] = f;
  return j;
}

std::string json_text(const nlohmann::json& j) { return ckpt::json_text(j, 2); }

namespace {

std::vector<std::string> wrap(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string word, line;
  while (in >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

std::string pad(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

}  // namespace

std::string report_to_text(const AuditReport& r, bool color) {
  std::ostringstream o;
  const char* red = color ? "\033[31m" : "";
  const char* green = color ? "\033[32m" : "";
  const char* yellow = color ? "\033[33m" : "";
  const char* reset = color ? "\033[0m" : "";
  o << r.path << "  (" << format_name(r.format) << ")  " << (r.complete ? green : red)
    << (r.complete ? "COMPLETE" : "INCOMPLETE") << reset << "\n\n";
  o << pad("COMPONENT", 13) << pad("STATUS", 16) << "EVIDENCE / CONSEQUENCE / FIX\n";
  for (const auto& c : r.components) {
    const bool ok = status_is_ok(c.status);
    const char* col = ok ? green : (c.required ? red : yellow);
    auto ev = wrap(c.evidence, 70);
    for (size_t i = 0; i < ev.size(); ++i) {
      if (i == 0) {
        o << pad(component_name(c.component), 13) << col << pad(status_name(c.status), 16) << reset
          << ev[i] << "\n";
      } else {
        o << std::string(29, ' ') << ev[i] << "\n";
      }
    }
    if (!c.consequence.empty()) {
      for (const auto& l : wrap("consequence: " + c.consequence, 70))
        o << std::string(29, ' ') << l << "\n";
      for (const auto& l : wrap("fix: " + c.fix, 70)) o << std::string(29, ' ') << l << "\n";
    }
  }
  bool header = false;
  for (const auto& f : r.findings) {
    if (f.severity == Severity::kInfo && f.component) continue;
    if (!header) {
      o << "\nFINDINGS\n";
      header = true;
    }
    const char* col = f.severity == Severity::kError     ? red
                      : f.severity == Severity::kWarning ? yellow
                                                         : "";
    o << "  " << col << pad(severity_name(f.severity), 8) << reset
      << (f.component ? "[" + std::string(component_name(*f.component)) + "] " : "") << f.message
      << "\n";
  }
  return o.str();
}

nlohmann::json inspect_to_json(const InspectNode& n) {
  nlohmann::json j = {{"name", n.name}, {"kind", n.kind}, {"summary", n.summary}};
  if (n.kind == "tensor") {
    j["dtype"] = n.dtype;
    j["shape"] = n.shape;
    j["nbytes"] = n.nbytes;
    j["device"] = n.device;
  }
  if (!n.children.empty()) {
    nlohmann::json c = nlohmann::json::array();
    for (const auto& ch : n.children) c.push_back(inspect_to_json(ch));
    j["children"] = c;
  }
  return j;
}

namespace {
void inspect_lines(const InspectNode& n, const std::string& path, std::ostringstream& o,
                   int depth) {
  if (depth > 64) return;
  o << pad(path.empty() ? "/" : path, 48) << " " << printable_line(n.summary) << "\n";
  for (const auto& c : n.children)
    inspect_lines(c, path + "/" + inspect_key_text(c.name), o, depth + 1);
}
}  // namespace

std::string inspect_key_text(const std::string& key) {
  const bool plain = !key.empty() && std::none_of(key.begin(), key.end(), [](char ch) {
    const auto u = static_cast<unsigned char>(ch);
    return ch == '/' || ch == '"' || ch == '\\' || u < 0x20 || u == 0x7f;
  });
  const std::string text = printable_line(key);
  if (plain && text == key) return key;  // no C1 control or invalid UTF-8 either
  std::string quoted = "\"";
  for (char ch : key) {
    if (ch == '"' || ch == '\\') quoted += '\\';
    quoted += ch;
  }
  return printable_line(quoted + "\"");
}

std::string inspect_to_text(const InspectNode& n) {
  std::ostringstream o;
  o << printable_line(n.name) << "\n";
  for (const auto& c : n.children) inspect_lines(c, "/" + inspect_key_text(c.name), o, 1);
  return o.str();
}

}  // namespace ckpt::verify
