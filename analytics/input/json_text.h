// Reading the analytics commands' inputs: JSON written by Python (parse_python_json, which is
// ckpt/format/python_json.h's: NaN / Infinity outside strings read as null), and whole files
// with a size cap (bytes made safe to echo are ckpt/base/text.h's escape_bytes).
//
// Free functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"

namespace ckpt::analytics {

// On success the parsed document. On failure corrupt("<where>: malformed JSON: <parser message>").
Result<nlohmann::json> parse_python_json(std::string_view text, const std::string& where);

// The default cap on one input file of the analytics commands (docs/cli.md lists the caps).
constexpr uint64_t kMaxInputFileBytes = 512ull << 20;

// The whole file as bytes, read through `env`. Only regular files are read (a FIFO, device or
// directory is refused before any read, so /dev/zero or a FIFO never blocks or grows); the bytes
// are those of the size the file had when opened. On failure not_found("<path>: cannot open: no
// such file"), the Env's io_error naming the path when it cannot be opened or read,
// corrupt("<path>: not a regular file") and corrupt("<path>: N bytes, over the M-byte limit")
// otherwise.
Result<std::string> read_text_file(Env* env, const std::string& path,
                                   uint64_t max_bytes = kMaxInputFileBytes);

bool json_number(const nlohmann::json& v, double* out);
// A non-negative integer (an integral float such as 12.0 is accepted, as Python may write it).
bool json_count(const nlohmann::json& v, int64_t* out);

}  // namespace ckpt::analytics
