// The body of `ckpt verify` (cli/commands.h): every committed checkpoint of a step or run
// directory checked by store::verify_checkpoint, and what its problems mean.
//
// A live run keeps saving while it is checked, and retention removes old checkpoints (COMMIT.json
// first, ckpt/store/retention.cc): a checkpoint whose commit record is gone once its check failed
// was removed while verifying — reported as such, never as damage. A file that exists but cannot
// be opened (EACCES) is not damage either: it is named, and the exit code is 66.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "ckpt/store/run_dir.h"
#include "cli/commands.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "verify/formats/path_hint.h"
#include "verify/ours/index_check.h"

namespace ckpt::cli {

namespace {

enum class Outcome { kIntact, kDamaged, kRemoved, kUnreadable };

// Why a checkpoint whose check found problems may not be damaged: it is gone (kRemoved), or one
// of its entries cannot be opened (kUnreadable, `why` naming it). kDamaged otherwise.
Outcome explain_problems(Env* env, const std::string& dir, Status* why) {
  auto commit = env->entry_kind(path_join(dir, "COMMIT.json"));
  if (commit.is_ok() && *commit == FileKind::kMissing) return Outcome::kRemoved;
  auto names = env->list_dir(dir);
  if (!names.is_ok()) {
    if (names.status().code() == Code::kNotFound) return Outcome::kRemoved;
    *why = names.status();
    return Outcome::kUnreadable;
  }
  for (const auto& n : *names) {
    const std::string p = path_join(dir, n);
    auto kind = env->entry_kind(p);
    if (!kind.is_ok() || *kind != FileKind::kRegular) continue;
    auto f = env->open_random(p);
    if (!f.is_ok() && f.status().code() == Code::kIoError) {
      *why = f.status();
      return Outcome::kUnreadable;
    }
  }
  return Outcome::kDamaged;
}

// A sharded checkpoint's INDEX (verify/ours/index_check.h): its problems join the report's, and
// its summary is the "index" object of --json (null for a version-1 checkpoint).
nlohmann::json check_sharded(Env* env, const std::string& dir, store::VerifyReport* rep) {
  auto rec = store::read_commit(env, dir);
  if (!rec.is_ok()) return nullptr;
  const verify::IndexCheck ic =
      verify::check_index(env, dir, *rec, verify::rank_files_named(rep->problems));
  if (!ic.present) return nullptr;
  for (const std::string& p : ic.problems) {
    if (std::find(rep->problems.begin(), rep->problems.end(), p) == rep->problems.end())
      rep->problems.push_back(p);
  }
  nlohmann::json lost = nlohmann::json::array();
  for (const store::LostTensor& t : ic.loss.tensors) {
    nlohmann::json ranges = nlohmann::json::array();
    for (const store::Extent& e : t.ranges) ranges.push_back(store::extent_string(e));
    lost.push_back({{"tensor", t.tensor},
                    {"lost_elements", t.lost_elements},
                    {"total_elements", t.total_elements},
                    {"ranges", ranges},
                    {"files", t.files}});
  }
  return {{"decoded", ic.decoded}, {"tiled", ic.tiled}, {"tensors", ic.tensors},
          {"boxes", ic.boxes},     {"files", ic.files}, {"damaged_files", ic.damaged_files},
          {"lost", lost}};
}

std::string index_line(const nlohmann::json& index) {
  if (!index.value("decoded", false)) return "  index: not usable (see below)\n";
  return "  index: " + std::to_string(index["tensors"].get<uint64_t>()) + " tensors, " +
         std::to_string(index["boxes"].get<uint64_t>()) + " boxes in " +
         std::to_string(index["files"].get<uint64_t>()) + " rank files; " +
         (index["tiled"].get<bool>() ? "the boxes of every tensor tile it exactly"
                                     : "boxes that do not tile (see below)") +
         "\n";
}

// For a path that is no ckpt checkpoint: what `ckpt audit` makes of it ("" when nothing).
std::string audit_hint(const verify::ReaderSet* readers, Env* env, const std::string& path) {
  if (const std::string piece = verify::dcp_piece_hint(env, path); !piece.empty())
    return "; it is " + piece + " to `ckpt audit`";
  if (readers == nullptr) return "";
  const verify::FormatReader* r = readers->best(env, path);
  if (r != nullptr && r->format() != verify::CheckpointFormat::kCkptH5) {
    return std::string("; it is a ") + verify::format_name(r->format()) +
           " checkpoint: `ckpt audit " + path + "` checks that format";
  }
  if (const std::string parent = verify::dcp_parent_hint(env, path); !parent.empty())
    return "; `ckpt audit` checks DCP checkpoints: " + parent;
  return "";
}

}  // namespace

int run_verify_command(const VerifyCommandOptions& o, Env* env, std::ostream& out,
                       std::ostream& err, const verify::ReaderSet* readers) {
  if (!env->exists(o.path)) {
    auto kind = env->entry_kind(o.path);  // EACCES on a parent is not "no such file"
    print_diagnostic(
        err, "verify",
        kind.is_ok() ? o.path + ": no such file or directory" : kind.status().message());
    return kExitNoInput;
  }
  std::vector<std::string> dirs;
  std::vector<std::string> uncommitted;
  if (env->exists(path_join(o.path, "COMMIT.json"))) {
    dirs.push_back(o.path);
  } else if (env->is_dir(o.path)) {
    auto all = store::list_checkpoints(env, o.path);
    if (!all.is_ok()) {
      print_diagnostic(err, "verify", all.status().message());
      return exit_code_for(all.status());
    }
    for (const auto& e : *all) {  // a damaged commit record is a finding, not a skipped save
      (e.committed || e.damaged ? dirs : uncommitted).push_back(e.dir);
    }
    if (dirs.empty() && uncommitted.empty()) {
      print_diagnostic(err, "verify",
                       o.path +
                           ": not a ckpt checkpoint (no COMMIT.json, no step-NNNNNNNNNNNN "
                           "directories)" +
                           audit_hint(readers, env, o.path));
      return kExitDataErr;
    }
  } else {
    print_diagnostic(
        err, "verify",
        o.path + ": expected a checkpoint directory (step-NNNNNNNNNNNN) or a run directory" +
            audit_hint(readers, env, o.path));
    return kExitDataErr;
  }
  nlohmann::json doc = {{"path", o.path},
                        {"checkpoints", nlohmann::json::array()},
                        {"uncommitted", uncommitted},
                        {"removed", nlohmann::json::array()},
                        {"unreadable", nlohmann::json::array()}};
  size_t intact = 0, damaged = 0, unreadable = 0;
  for (const auto& d : dirs) {
    store::VerifyReport rep = store::verify_checkpoint(env, d);
    const nlohmann::json index = check_sharded(env, d, &rep);
    Status why;
    const Outcome outcome =
        rep.problems.empty() ? Outcome::kIntact : explain_problems(env, d, &why);
    if (outcome == Outcome::kRemoved) {
      doc["removed"].push_back(d);
      if (!o.json) out << "removed  " << printable_line(d) << "  (removed while verifying)\n";
      continue;
    }
    if (outcome == Outcome::kUnreadable) {
      ++unreadable;
      doc["unreadable"].push_back({{"dir", d}, {"error", why.message()}});
      print_diagnostic(err, "verify", why.message());
      if (!o.json) out << "unread   " << printable_line(d) << "  (cannot open a file)\n";
      continue;
    }
    (outcome == Outcome::kIntact ? intact : damaged) += 1;
    doc["checkpoints"].push_back({{"dir", d},
                                  {"ok", rep.problems.empty()},
                                  {"files", rep.files},
                                  {"tensors", rep.tensors},
                                  {"bytes", rep.bytes},
                                  {"index", index},
                                  {"problems", rep.problems}});
    if (!o.json) {
      out << (rep.problems.empty() ? "ok       " : "DAMAGED  ") << printable_line(d) << "  ("
          << rep.files << " files, " << rep.tensors << " tensors, " << rep.bytes << " bytes)\n";
      if (!index.is_null()) out << index_line(index);
      for (const auto& p : rep.problems) out << "  - " << printable_line(p) << "\n";
    }
  }
  if (!o.json) {
    for (const auto& u : uncommitted) {
      out << "skipped  " << printable_line(u) << "  (no COMMIT.json: an interrupted save)\n";
    }
  }
  // Only interrupted saves, nothing committed: the run holds no checkpoint to restore.
  const bool only_interrupted = dirs.empty() && !uncommitted.empty();
  const bool ok = damaged == 0 && unreadable == 0 && !only_interrupted && intact > 0;
  doc["ok"] = ok;
  if (o.json) out << json_text(doc) << "\n";
  if (damaged > 0 || only_interrupted) return kExitFindings;
  if (unreadable > 0) return kExitNoInput;
  if (intact == 0) {  // every checkpoint went while it was checked
    print_diagnostic(err, "verify", o.path + ": every checkpoint was removed while verifying");
    return kExitNoInput;
  }
  return kExitOk;
}

}  // namespace ckpt::cli
