// Bounded reading of the profiler's inputs: every file the profile commands read (traces, recorder
// files, `env --json` / `layout --json` snapshots, training configs) comes through here, so that a
// hostile or careless argument (/dev/zero, a FIFO, a 50 GB file, a gzip bomb) costs one clear line
// instead of a hang or gigabytes of memory.
//
// Rules: only regular files are opened (the path is opened O_NONBLOCK and fstat'ed, so a FIFO never
// blocks); a file larger than its cap is refused before it is read; gzip input (magic 1f 8b, what
// tensorboard_trace_handler(use_gzip=True) writes) is inflated as a stream and refused as soon as
// its output passes the cap (a first pass counts, a second fills a buffer reserved to the exact
// size, so the text is held once and never regrown). Caps are documented in docs/cli.md.
//
// Memory bound of one trace (docs/cli.md "Input caps"): its text, at most kMaxTraceBytes after
// inflating, plus the JSON parser's index of 4 bytes per token, together at most
// kMaxTraceParseBytes; trace_import counts the tokens before parsing and refuses a trace over the
// bound. Free functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::profile {

constexpr uint64_t kMaxTraceBytes = uint64_t(1) << 30;       // one trace, after inflating: 1 GiB
constexpr uint64_t kMaxTraceParseBytes = uint64_t(2) << 30;  // its text + parse index: 2 GiB
constexpr uint64_t kMaxSnapshotBytes = uint64_t(64) << 20;   // env/layout JSON, configs: 64 MiB

// The file's bytes, inflated when it is gzip and `inflate` is set (a config digest wants the raw
// bytes). On failure: NotFound (no such file), IoError (cannot
// open or read, or a directory), Corrupt ("not a regular file", over the cap, damaged gzip); the
// message names the path.
Result<std::string> read_bounded_file(const std::string& path, uint64_t max_bytes,
                                      bool inflate = true);

// The files of a directory of per-rank traces, sorted by name: regular files whose names end in
// .json .json.gz or .jsonl (recorder files); sub-directories are not searched. Corrupt when
// there are none.
Result<std::vector<std::string>> list_trace_dir(const std::string& dir);

// Expands every directory argument into its trace files; files pass through.
Result<std::vector<std::string>> expand_trace_paths(const std::vector<std::string>& paths);

}  // namespace ckpt::profile
