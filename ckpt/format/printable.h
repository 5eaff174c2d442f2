// Text made safe to print. Names that reach a message or a JSON document come from the file
// system or from untrusted files, so they may hold newlines, terminal control bytes or bytes that
// are not UTF-8. Two promises, one escaping scheme:
//   - printable_line(): one diagnostic line. Every control character (C0, DEL, C1) becomes \n, \r,
//     \t or \xNN, every byte that is not part of valid UTF-8 becomes \xNN; valid UTF-8 (non-ASCII
//     names included) and backslashes are kept as they are.
//   - json_text(): a JSON document whose strings and keys are valid UTF-8: bytes that are not
//     become the four characters \xNN (JSON then writes the backslash as \\), so nothing is lost
//     and the writer never throws. Control characters are JSON's own to escape (\n, \u0001).
// Every output of the `ckpt` executable goes through one of them.
//
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace ckpt {

std::string printable_line(std::string_view text);

// `text` with every byte that is not part of a valid UTF-8 sequence written as \xNN.
std::string valid_utf8(std::string_view text);

// j.dump(indent) after valid_utf8() on every string and key; indent -1 is one line.
std::string json_text(const nlohmann::json& j, int indent = 2);

}  // namespace ckpt
