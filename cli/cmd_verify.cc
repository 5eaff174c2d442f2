// `ckpt verify PATH [--json]`: full integrity check of a checkpoint in ckpt's own format — the
// commit record, every file's size and XXH3, every manifest rule, the HDF5 structure against the
// manifest, every tensor hash. PATH is a step directory or a run directory (then every committed
// checkpoint is checked, and uncommitted ones are listed). Exit 0 intact, 2 damaged, 65 not a
// ckpt checkpoint, 66 cannot open.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ckpt/format/manifest.h"
#include "ckpt/store/run_dir.h"
#include "cli/command.h"
#include "cli/exit_codes.h"

namespace ckpt::cli {

struct VerifyOptions {
  std::string path;
  bool json = false;
};

int run_verify(const VerifyOptions& o) {
  Env* env = Env::posix();
  if (!env->exists(o.path)) {
    auto kind = env->entry_kind(o.path);  // EACCES on a parent is not "no such file"
    std::cerr << "ckpt verify: "
              << (kind.is_ok() ? o.path + ": no such file or directory" : kind.status().message())
              << "\n";
    return kExitNoInput;
  }
  std::vector<std::string> dirs;
  std::vector<std::string> uncommitted;
  if (env->exists(path_join(o.path, "COMMIT.json"))) {
    dirs.push_back(o.path);
  } else if (env->is_dir(o.path)) {
    auto all = store::list_checkpoints(env, o.path);
    if (!all.is_ok()) {
      std::cerr << "ckpt verify: " << all.status().message() << "\n";
      return exit_code_for(all.status());
    }
    for (const auto& e : *all) {  // a damaged commit record is a finding, not a skipped save
      (e.committed || e.damaged ? dirs : uncommitted).push_back(e.dir);
    }
    if (dirs.empty() && uncommitted.empty()) {
      std::cerr << "ckpt verify: " << o.path
                << ": not a ckpt checkpoint (no COMMIT.json, no step-NNNNNNNNNNNN directories)\n";
      return kExitDataErr;
    }
  } else {
    std::cerr << "ckpt verify: " << o.path
              << ": expected a checkpoint directory (step-NNNNNNNNNNNN) or a run directory\n";
    return kExitDataErr;
  }
  nlohmann::json out = {
      {"path", o.path}, {"checkpoints", nlohmann::json::array()}, {"uncommitted", uncommitted}};
  bool ok = uncommitted.empty() || !dirs.empty();
  for (const auto& d : dirs) {
    store::VerifyReport rep = store::verify_checkpoint(env, d);
    ok = ok && rep.problems.empty();
    out["checkpoints"].push_back({{"dir", d},
                                  {"ok", rep.problems.empty()},
                                  {"files", rep.files},
                                  {"tensors", rep.tensors},
                                  {"bytes", rep.bytes},
                                  {"problems", rep.problems}});
    if (!o.json) {
      std::cout << (rep.problems.empty() ? "ok       " : "DAMAGED  ") << d << "  (" << rep.files
                << " files, " << rep.tensors << " tensors, " << rep.bytes << " bytes)\n";
      for (const auto& p : rep.problems) std::cout << "  - " << p << "\n";
    }
  }
  if (!o.json) {
    for (const auto& u : uncommitted) {
      std::cout << "skipped  " << u << "  (no COMMIT.json: an interrupted save)\n";
    }
  }
  out["ok"] = ok && !dirs.empty();
  if (o.json) std::cout << out.dump(2) << "\n";
  return (ok && !dirs.empty()) ? kExitOk : kExitFindings;
}

Runner setup_verify(CLI::App& root, CLI::App*& sub) {
  auto o = std::make_shared<VerifyOptions>();
  sub = root.add_subcommand("verify",
                            "Check every byte of a ckpt checkpoint: commit record, file hashes, "
                            "manifests, tensor hashes");
  sub->add_option("path", o->path, "A step directory, or a run directory (checks all)")->required();
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->footer(
      "Exit codes: 0 intact; 2 damaged or incomplete; 65 not a ckpt checkpoint; 66 cannot "
      "open.");
  return [o] { return run_verify(*o); };
}

}  // namespace ckpt::cli
