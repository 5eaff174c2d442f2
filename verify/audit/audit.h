// The auditor's front door: audit a path, render the report. This is what `ckpt audit`,
// `ckpt inspect` and `ckpt report` call.
//
//   auto r = ckpt::verify::audit_path(readers, Env::posix(), "ckpt/checkpoint-500", {});
//   if (!r.is_ok()) { /* r.status(): NotFound/IoError → 66, Corrupt/Unsupported → 65 */ }
//   nlohmann::json j = ckpt::verify::report_to_json(*r);   // the documented --json object
//
// audit_path = ReaderSet::read (the set the program built, verify/formats/format_reader.h) through
// the Env it is given + apply_rules. Stateless; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "ckpt/base/status.h"
#include "verify/audit/rules.h"
#include "verify/formats/format_reader.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

struct AuditOptions {
  bool deep = false;
  bool progress = false;             // progress bar on stderr (only drawn on a terminal)
  std::set<AuditComponent> require;  // empty = every component of the contract
};

// Reads and judges `path`. Errors: NotFound/IoError (cannot open), Corrupt/Unsupported
// (unreadable, not a checkpoint), InvalidArgument (unknown component in `require`).
Result<AuditReport> audit_path(const ReaderSet& readers, Env* env, const std::string& path,
                               const AuditOptions& options);

// Parses "--require model,optimizer": InvalidArgument naming an unknown component.
Result<std::set<AuditComponent>> parse_component_list(const std::string& list);

// {"path", "format", "complete", "components": {NAME: {"status", "evidence", "consequence",
// "fix", "required"}}, "findings": [{"severity", "component", "message"}]}
nlohmann::json report_to_json(const AuditReport& report);
// `j` as indented JSON text that never throws: bytes from outside (pickle keys, file names) that
// are not UTF-8 are escaped as \xNN (ckpt::json_text, ckpt/format/printable.h).
std::string json_text(const nlohmann::json& j);

// The table for a person: component, status, evidence, consequence, fix; then findings.
std::string report_to_text(const AuditReport& report, bool color);

// `ckpt report`'s audit section: a <table class="audit"> (component, status as a coloured
// badge, evidence, consequence, fix) and a <ul class="findings">; all text HTML-escaped.
std::string report_to_html_table(const AuditReport& report);

// `ckpt inspect`: the tree of what is inside.
Result<CheckpointView> inspect_path(const ReaderSet& readers, Env* env, const std::string& path);
nlohmann::json inspect_to_json(const InspectNode& node);
// One line per node, `/key/sub  summary`; keys and summaries are escaped as printable_line
// does, and a key that holds '/', '"', '\\' or a control character is quoted (inspect_key_text),
// so that a line is one node and `/a/b` always means key b inside key a. JSON keeps keys raw.
std::string inspect_to_text(const InspectNode& node);
// A key as the text form writes it: as is, or "quoted" with '"' and '\\' escaped by a
// backslash and control characters as printable_line writes them (`"key/with/slash"`,
// `"weird key\n"`).
std::string inspect_key_text(const std::string& key);

}  // namespace ckpt::verify
