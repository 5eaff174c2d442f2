// Reading JSON written by Python: `json.dumps` emits the non-standard literals NaN, Infinity and
// -Infinity (Hugging Face's trainer_state.json does, e.g. `"grad_norm": NaN`), which strict JSON
// parsers reject. parse_python_json() turns those bare literals into null — only outside string
// literals: a string such as "runs/NaN-sweep" is kept byte for byte — and parses the rest with
// nlohmann::json, so callers see null where Python had a non-finite number.
//
// Cost: one pass over the text (the copy with the literals replaced) and nlohmann's parse, both
// linear in the text's size. Memory: the copy (the text's size plus 1 byte per NaN) and the
// parsed document (nlohmann's DOM: about 16 bytes per value plus each string and object key,
// in practice at most ~8x the text for logs of numbers); callers cap the file size.
//
// Free functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ckpt/base/status.h"

namespace ckpt {

// `text` with NaN, Infinity and -Infinity outside strings replaced by null.
std::string strip_python_literals(std::string_view text);

// On success the parsed document. On failure corrupt("<where>: malformed JSON: <parser message>").
Result<nlohmann::json> parse_python_json(std::string_view text, const std::string& where);

}  // namespace ckpt
