// The recorder's file format ("ckpt-profile", JSON Lines, one file per rank): encode and decode.
//
// Line 1 is a header object {"format":"ckpt-profile","version":1,"rank","world_size","cpu_cores",
// "phases":[...],"start_unix_s"}; then, in any order, step lines {"s","t","d","p":[9],"g":[9]?,
// "n","tok","pg","pin"}, sampler lines {"c":[t,host_busy,host_iowait,process_busy,step,phase]}
// and, when the recorder closed cleanly, {"end":t}. docs/cli.md ("ckpt profile") is the full spec.
// Appending lines is what makes a killed or hung process's file still readable up to its last
// flush. Free functions, no shared state; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "ckpt/base/status.h"
#include "profile/recorder/step_record.h"

namespace ckpt::profile {

constexpr const char* kRecorderFormat = "ckpt-profile";
constexpr int kRecorderVersion = 1;

std::string encode_header(int rank, int world_size, int cpu_cores, double start_unix_s);
void append_step_line(std::string& out, const StepRecord& r);
void append_cpu_line(std::string& out, const CpuSample& c);
void append_end_line(std::string& out, double t_s);

// Decodes a whole recorder file. On failure: Corrupt, naming `source` and the line number.
Result<RankTrace> decode_recorder_text(std::string_view text, const std::string& source);

// True when the text starts like a recorder file (the header's format key).
bool looks_like_recorder_file(std::string_view head);

}  // namespace ckpt::profile
