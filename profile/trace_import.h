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
// The rank is distributedInfo.rank, else a number after "rank" in the file name, else the position
// in the list given. Stateless free functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/base/status.h"
#include "profile/step_record.h"

namespace ckpt::profile {

// Parses one PyTorch chrome trace held in memory. rank stays -1 when the trace does not say.
Result<RankTrace> import_pytorch_trace_text(std::string_view json, const std::string& source);

// "run/trace_rank3.json" -> 3; nullopt when the name has no "rank<digits>".
std::optional<int> rank_from_file_name(const std::string& path);

// Reads each file (recorder file or PyTorch trace, detected from its first bytes), assigns ranks
// and returns the traces sorted by rank. On failure: NotFound/IoError when a file cannot be opened
// (exit 66), Corrupt when it is empty or malformed (exit 65); the message names the file.
Result<std::vector<RankTrace>> load_traces(const std::vector<std::string>& paths);

// Reads one file whole; IoError/NotFound naming it on failure.
Result<std::string> read_file_text(const std::string& path);

}  // namespace ckpt::profile
