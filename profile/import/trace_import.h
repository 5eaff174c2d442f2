// Importers: turn profiler files into RankTraces for the analyzer.
//
// Two inputs are understood: the recorder's own "ckpt-profile" files and PyTorch profiler
// chrome traces (Kineto's object form {"traceEvents": [...], "distributedInfo": {...}} and the
// plain array form older or Kineto-less PyTorch writes). How a trace event becomes a phase:
//   ProfilerStep#N                                  a step window (N is the step number)
//   enumerate(DataLoader)#...__next__, enumerate(DataPipe)#..., *train_dataloader_next
//                                                   data_wait
//   c10d::*, gloo:*, nccl:*, nccl kernels, record_param_comms
//                                                   collective
//   Memcpy HtoD (Pageable -> Device) / (Pinned -> Device)
//                                                   h2d, counted as pageable / pinned copies
//   Optimizer.step#*, Optimizer.zero_grad#*          optimizer
//   autograd::engine::evaluate_function*, "backward" annotations
//                                                   backward
//   "forward" annotations                           forward
//   annotations naming checkpoint/save_checkpoint, eval/validation
//                                                   checkpoint, eval
// Overlapping events are attributed once, by priority checkpoint > eval > data_wait > collective >
// h2d > optimizer > backward > forward (the torch-tb-profiler idea: time goes to the most
// specific cause); step time claimed by none is left unattributed ("other").
// Which rank a file is, and which files are one rank (trace_files.cc; docs/cli.md "Input layouts"):
// distributedInfo.rank, else a number after "rank" in the file name; files without either are
// grouped by process — the worker name tensorboard_trace_handler puts before ".<ms>.pt.trace.json"
// or the OS pid of a Kineto trace — and each group gets the next free rank, with a note saying so;
// files that name nothing of the kind get a rank each, in the order given, with a warning and the
// way to say otherwise (LoadOptions::one_rank). Several files of one rank (schedule(repeat=N)
// cycles, several captures) are that rank's consecutive windows, ordered by step number.
// Stateless free functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"
#include "profile/recorder/step_record.h"

namespace ckpt::profile {

// Parses one PyTorch chrome trace held in memory. rank stays -1 when the trace does not say.
// On failure: Corrupt naming `source` (malformed, no steps, or parsing it would pass
// kMaxTraceParseBytes: the text plus 4 bytes per JSON token).
Result<RankTrace> import_pytorch_trace_text(std::string_view json, const std::string& source);
// The same on a buffer whose capacity holds simdjson's padding after the text: parsed in place.
Result<RankTrace> import_pytorch_trace_padded(std::string_view json, size_t capacity,
                                              const std::string& source);

struct LoadOptions {
  // Every file is a capture of one process: analysed as one rank's consecutive windows, whatever
  // ranks the files name (`ckpt profile analyze --one-rank`).
  bool one_rank = false;
};

// "run/trace_rank3.json" -> 3; nullopt when the name has no "rank<digits>".
std::optional<int> rank_from_file_name(const std::string& path);

// Reads each file (recorder file or PyTorch trace, detected from its first bytes), assigns ranks,
// joins the files of one rank, and returns one RankTrace per rank sorted by rank; what it had to
// decide is in the first trace's layout_notes and, when `warnings` is given, there too (the CLI
// prints them on stderr). On failure: NotFound/IoError when a file cannot be opened (exit 66),
// Corrupt when it is empty or malformed (exit 65); the message names the file.
Result<std::vector<RankTrace>> load_traces(const std::vector<std::string>& args,
                                           const LoadOptions& options = {},
                                           std::vector<std::string>* warnings = nullptr);

// Reads one file whole; IoError/NotFound naming it on failure.
Result<std::string> read_file_text(const std::string& path);

}  // namespace ckpt::profile
