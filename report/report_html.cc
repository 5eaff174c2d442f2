#include "report/report_html.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <vector>

#include "analytics/coverage/coverage.h"
#include "analytics/coverage/coverage_from_journal.h"
#include "analytics/lr/lr_analysis.h"
#include "analytics/lr/lr_input.h"
#include "analytics/render/coverage_chart.h"
#include "analytics/render/lr_chart.h"
#include "analytics/render/svg_canvas.h"
#include "ckpt/base/text.h"
#include "ckpt/io/env.h"
#include "profile/analyze/analyzer.h"
#include "profile/analyze/report_render.h"
#include "profile/import/trace_import.h"
#include "verify/audit/audit.h"

namespace ckpt::report {
namespace {

using analytics::analyze_lr;
using analytics::compute_coverage;
using analytics::coverage_chart_svg;
using analytics::coverage_input_from_run;
using analytics::CoverageOptions;
using analytics::grouped;
using analytics::jump_kind_name;
using analytics::lr_chart_svg;
using analytics::lr_from_run;
using analytics::LrAnalysis;
using analytics::short_number;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// RUN/LATEST names the newest committed checkpoint; without it, the highest step-* directory.
std::string latest_checkpoint(Env* env, const std::string& run_dir) {
  if (auto latest = env->read_all(run_dir + "/LATEST", 4096); latest.is_ok()) {
    const std::string name = trim(latest->substr(0, latest->find('\n')));
    if (!name.empty()) return run_dir + "/" + name;
  }
  std::string best;
  for (const auto& n : env->list_dir_or_empty(run_dir)) {
    if (n.rfind("step-", 0) == 0 && env->is_dir(run_dir + "/" + n)) best = n;
  }
  return best.empty() ? std::string() : run_dir + "/" + best;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction);
  return buf;
}

std::string note(const std::string& text) {
  return "<p class=\"note\">" + html_escape(text) + "</p>\n";
}

std::string audit_section(Env* env, const verify::ReaderSet& readers, const std::string& run_dir,
                          bool* findings) {
  std::string s = "<section id=\"audit\"><h2>Audit of the latest checkpoint</h2>\n";
  const std::string ckpt = latest_checkpoint(env, run_dir);
  if (ckpt.empty())
    return s + note("No checkpoint in " + run_dir + " (no LATEST, no step-*).") + "</section>\n";
  auto report = verify::audit_path(readers, env, ckpt, {});
  if (!report.is_ok()) {
    *findings = true;
    return s + note("Cannot audit " + ckpt + ": " + report.status().message()) + "</section>\n";
  }
  if (!report->complete) *findings = true;
  s += "<p class=\"verdict " +
       std::string(report->complete ? "ok\">complete" : "bad\">incomplete") + "</p>\n" +
       verify::report_to_html_table(*report) + "</section>\n";
  return s;
}

std::string lr_section(Env* env, const std::string& run_dir, bool* findings) {
  std::string s = "<section id=\"lr\"><h2>Learning rate across restarts</h2>\n";
  auto series = lr_from_run(env, run_dir);
  if (!series.is_ok()) return s + note(series.status().message()) + "</section>\n";
  const LrAnalysis a = analyze_lr(*series, {});
  if (a.has_findings()) *findings = true;
  s += "<figure>" + lr_chart_svg(*series, a) + "</figure>\n<ul>\n";
  if (a.discontinuities.empty()) s += "<li>No discontinuity: the LR is continuous.</li>\n";
  for (const auto& d : a.discontinuities) {
    std::string line = "step " + std::to_string(d.step) + ": " + short_number(d.lr_before) + " → " +
                       short_number(d.lr_after) + " (" + jump_kind_name(d.kind) + ")";
    if (d.expected) line += ", expected " + short_number(*d.expected);
    s += "<li class=\"bad\">" + html_escape(line) + "</li>\n";
  }
  return s + "</ul></section>\n";
}

std::string coverage_section(Env* env, const std::string& run_dir) {
  std::string s = "<section id=\"coverage\"><h2>Dataset coverage</h2>\n";
  auto in = coverage_input_from_run(env, run_dir);
  if (!in.is_ok()) return s + note(in.status().message()) + "</section>\n";
  CoverageOptions opts;
  opts.max_ids = 0;  // the page shows counts; `ckpt coverage --json` lists ids
  auto report = compute_coverage(*in, opts);
  if (!report.is_ok()) return s + note(report.status().message()) + "</section>\n";
  s += "<figure>" + coverage_chart_svg(*report, run_dir) + "</figure>\n";
  s += "<table><tr><th>epoch</th><th>unique</th><th>fraction</th><th>repeats</th>"
       "<th>never visited</th></tr>\n";
  for (const auto& e : report->epochs) {
    s += "<tr><td>" + std::to_string(e.epoch) + "</td><td>" + grouped(e.unique) + "</td><td>" +
         percent(e.fraction) + "</td><td>" + grouped(e.repeats) + "</td><td>" +
         grouped(e.never_visited_count) + "</td></tr>\n";
  }
  s += "</table><p>Overall: " + grouped(report->overall_unique) + " of " +
       grouped(report->dataset_size) + " samples visited at least once (" +
       percent(report->overall_fraction) + ").</p></section>\n";
  return s;
}

std::string profile_section(Env* env, const std::string& run_dir) {
  std::vector<std::string> found;
  for (const auto& n : env->list_dir_or_empty(run_dir)) {
    if (n.rfind("profile-rank", 0) == 0) found.push_back(run_dir + "/" + n);
  }
  for (const auto& n : env->list_dir_or_empty(run_dir + "/profile"))
    found.push_back(run_dir + "/profile/" + n);
  if (found.empty()) return std::string();  // no profiler files: no section
  // Every process of a restarted run writes its own file per rank (names sort by start step):
  // analyse the latest process, one file per rank.
  std::map<int, std::string> latest_per_rank;
  std::vector<std::string> files;
  for (const auto& f : found) {
    if (auto rank = profile::rank_from_file_name(f)) {
      latest_per_rank[*rank] = f;
    } else {
      files.push_back(f);
    }
  }
  for (const auto& [rank, f] : latest_per_rank) files.push_back(f);
  std::string s = "<section id=\"profile\"><h2>Step profiler</h2>\n";
  auto traces = profile::load_traces(files);
  if (!traces.is_ok()) return s + note(traces.status().message()) + "</section>\n";
  auto report = profile::analyze(*traces);
  if (!report.is_ok()) return s + note(report.status().message()) + "</section>\n";
  s += "<p>" + std::to_string(files.size()) + " file(s) of the latest process analysed.</p><ol>\n";
  for (const auto& v : report->verdicts) {
    s += "<li><b>" + html_escape(v.id()) + "</b> (confidence " + short_number(v.confidence) +
         "): " + html_escape(v.summary) + "</li>\n";
  }
  s += "</ol>\n<figure>" + profile::report_svg(*report) + "</figure>\n";
  return s + "<pre>" + html_escape(profile::report_text(*report)) + "</pre></section>\n";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;max-width:980px;margin:24px auto;color:#222}"
    "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px}"
    "pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;"
    "text-align:right}.note{color:#666;font-style:italic}.bad{color:#b00}.ok{color:#070}"
    "figure{margin:8px 0}";

}  // namespace

Result<RunReport> build_run_report(Env* env, const verify::ReaderSet& readers,
                                   const std::string& run_dir) {
  if (!env->is_dir(run_dir)) return not_found(run_dir + ": not a run directory");
  RunReport out;
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::string& h = out.html;
  h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ckpt report: " +
      html_escape(run_dir) + "</title><style>" + kStyle + "</style></head><body>\n";
  h += "<h1>ckpt report: " + html_escape(run_dir) + "</h1>\n<p>Generated " + when + ".</p>\n";
  h += audit_section(env, readers, run_dir, &out.findings);
  h += lr_section(env, run_dir, &out.findings);
  h += coverage_section(env, run_dir);
  h += profile_section(env, run_dir);
  h += "</body></html>\n";
  return out;
}

}  // namespace ckpt::report
