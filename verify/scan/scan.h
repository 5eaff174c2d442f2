// `ckpt scan`: is this file safe to load? A reader of every pickle-bearing format that never
// executes anything and says, for each global the pickles name, what loading would do.
//
// Reads raw pickles (protocols 0-5, several in a row, truncated or partly invalid: what was seen
// before the error is kept), torch.save zips (any folder name, flags, duplicate or odd directory
// entries; every .pkl member), legacy torch.save streams (magic, protocol, sys info, object,
// storage keys), numpy .npy (object arrays carry a pickle) and .npz, pickles nested as bytes in
// other pickles or as torch.save blobs inside DCP .distcp files, and folders file by file.
// Files of formats that hold no pickle (safetensors, numeric .npy) are safe. Each global gets a
// Risk (verify/scan/risk.h). The weights_only part predicts torch.load(weights_only=True) of
// PyTorch 2.x: whether it loads, and exactly the globals to pass to add_safe_globals (never a
// dangerous one). Stateless; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/scan/risk.h"

namespace ckpt::verify {

struct ScanGlobal {
  std::string module;  // as the pickle spells it
  std::string name;
  Risk risk = Risk::kUnknown;
  bool called = false;
  std::string where;  // "file[:member]@offset" (offset of the opcode in that pickle)
};

// One file's scan.
struct FileScan {
  std::string file;    // the label (the path relative to a scanned folder)
  std::string format;  // "pickle", "torch.save", "torch.save legacy", "torchscript",
                       // "numpy .npy", "numpy .npz", "safetensors", "zip", "dcp data"
  std::vector<ScanGlobal> globals;
  bool torch_load_input = false;  // torch.load reads it (a torch.save zip or legacy stream)
  bool weights_only_loads = false;
  std::vector<std::string> weights_only_needs;  // sorted, unique
  std::vector<std::string> errors;              // what could not be read, with where
};

struct ScanReport {
  std::string path;
  std::string format;  // the file's format, or "folder"
  std::vector<FileScan> files;

  bool safe() const;           // no dangerous global anywhere
  bool has_framework() const;  // some framework global (and nothing dangerous)
};

struct ScanOptions {
  uint64_t max_pickle_bytes = 1ull << 30;  // one pickle read into memory
  uint64_t max_search_bytes = 8ull << 30;  // bytes searched for embedded torch.save blobs
  uint64_t max_files = 100000;             // files scanned in one folder
  int max_nesting = 4;                     // pickles inside pickles inside ...
  size_t max_globals = 100000;             // entries reported per file
};

// Scans a file or a folder, read through `env` (links inside a folder are not followed).
// NotFound/IoError when it cannot be opened; Unsupported when a file is not a format scan reads
// (in a folder such files are skipped).
Result<ScanReport> scan_path(Env* env, const std::string& path, const ScanOptions& options = {});

// Scans one open file (audit calls this for the files it reads; the fuzzer with memory files).
Result<FileScan> scan_file(const RandomAccessFile& file, const std::string& label,
                           const ScanOptions& options = {});

// Report rendering: one line per file (SAFE / UNSAFE / framework objects), then the globals that
// matter, dangerous first; and the `--json` object of docs/cli.md.
std::string scan_report_to_text(const ScanReport& r);
nlohmann::json scan_report_to_json(const ScanReport& r);

}  // namespace ckpt::verify
