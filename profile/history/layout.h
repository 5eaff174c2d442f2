// Dataset layout scan and diff: "what did the re-export change?" (DOMAIN.md, check 6).
//
// scan_layout walks a directory tree (iteratively, through directory descriptors, at most
// kMaxLayoutDepth levels below the root: deeper directories are counted, not entered, so memory
// stays a few open directories whatever the nesting) and reports file count, total size, a size
// histogram, extensions, formats detected from magic bytes (sniffed on up to kSniffLimit files) and
// the layout class: "shards" (few large files), "loose files" (many small files: the storage
// metadata server becomes the bottleneck) or "mixed". The JSON form is what `layout --json`
// prints and what `layout-diff` reads back. Values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/base/status.h"

namespace ckpt::profile {

constexpr size_t kSniffLimit = 4000;
constexpr int kMaxLayoutDepth = 64;

struct LayoutScan {
  std::string root;
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t median_size = 0;
  std::vector<std::pair<std::string, uint64_t>> size_histogram;  // bucket label, file count
  std::map<std::string, uint64_t> extensions;                    // ".tar" -> count
  std::map<std::string, uint64_t> formats;                       // "tar", "jpeg", "gzip" ...
  std::vector<std::string> compression;                          // codecs seen
  uint64_t sniffed = 0;
  std::string layout;              // "shards", "loose files", "mixed", "empty"
  uint64_t skipped_deep_dirs = 0;  // directories more than kMaxLayoutDepth levels down
};

// NotFound/IoError when `dir` is missing or not a directory.
Result<LayoutScan> scan_layout(const std::string& dir);
// The format a file's first bytes announce ("" when unknown).
std::string sniff_format(const unsigned char* head, size_t n);

nlohmann::json layout_json(const LayoutScan& s);
// Corrupt, naming `source`, when the JSON is not a layout scan.
Result<LayoutScan> layout_from_json(const nlohmann::json& j, const std::string& source);
std::string layout_text(const LayoutScan& s);
// Human-readable changes from a to b, most consequential first; empty when nothing changed.
std::vector<std::string> diff_layouts(const LayoutScan& a, const LayoutScan& b);

}  // namespace ckpt::profile
