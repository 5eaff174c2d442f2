// Internal to verify/scan: the per-file state the container readers share.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "verify/pickle/pickle_reader.h"
#include "verify/scan/scan.h"

namespace ckpt::verify::scan_detail {

struct FileContext {
  FileScan* out;
  const ScanOptions& options;
  std::map<std::string, size_t> seen;  // module.name + member → index in out->globals
};

// The pickles of one stream that torch.load(weights_only=True) would read, for the prediction.
struct WeightsOnlyInput {
  std::vector<std::unique_ptr<PickleDoc>> docs;
  bool complete = true;  // every pickle parsed to STOP
};

// Scans consecutive pickles of `bytes` from `offset` (at most `max_pickles`; 0 = until the
// bytes end or stop parsing); records globals and errors under `where`; nested pickles in bytes
// values are scanned down to options.max_nesting. When `keep` is given, the parsed docs go there.
// Returns the offset just past the last STOP.
uint64_t scan_pickles(const std::string& bytes, uint64_t offset, const std::string& where,
                      int max_pickles, int depth, FileContext* ctx, WeightsOnlyInput* keep);

// Fills out->weights_only_* from the pickles torch.load would read (`torch_file`: false for a
// raw pickle, which torch.load never loads because its first pickle is not the magic number).
void predict_weights_only(const WeightsOnlyInput& in, bool torch_file, FileContext* ctx);

// Container readers (scan_containers.cc). Each records into ctx; errors become ctx->out->errors.
void scan_zip(const RandomAccessFile& f, const std::string& label, int depth, FileContext* ctx);
void scan_npy(const std::string& bytes, const std::string& where, int depth, FileContext* ctx);
// True when a .npy's first bytes say its data is a pickle (object dtype), or do not parse.
bool npy_holds_pickle(const std::string& head);
void scan_legacy(const RandomAccessFile& f, const std::string& label, FileContext* ctx);
void scan_embedded_zips(const RandomAccessFile& f, const std::string& label, FileContext* ctx);
// Bytes that hold a pickle or a torch.save zip: scanned as nested content.
void scan_nested_bytes(const std::string& bytes, const std::string& where, int depth,
                       FileContext* ctx);

}  // namespace ckpt::verify::scan_detail
