// Reader of torch.save files (.pt, .pth, .bin, .ckpt; any archive prefix) without torch.
//
// A TorchFile is the zip directory plus the parsed data.pkl of one file; nothing else is read
// unless asked: `read_scalar` fetches the few bytes of a one-element tensor (optimizer `step`),
// `deep_scan` reads every data/<key> record (CRC-32, NaN/Inf, all-zero). TorchScript archives
// and legacy pre-1.6 streams are recognised and refused with a message saying what they are.
// The TorchFile owns its RandomAccessFile; not thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/io/env.h"
#include "verify/formats/view.h"
#include "verify/pickle/pickle_reader.h"
#include "verify/zip/zip_reader.h"

namespace ckpt::verify {

struct TorchFile {
  std::unique_ptr<RandomAccessFile> file;
  std::unique_ptr<ZipReader> zip;
  std::string prefix;
  std::unique_ptr<PickleDoc> doc;
  // Every storage the pickle references: key → record (dtype, location, size).
  std::map<std::string, TensorRecord> storages;
  // Legacy (pre-1.6) streams only, where zip is null: the storage keys pickle, where the raw
  // storage bytes start, and key → (offset, bytes) of each storage's data in the file.
  std::vector<std::string> legacy_keys;
  uint64_t legacy_data_offset = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> legacy_records;

  std::optional<double> read_scalar(const TensorRecord& t) const;
  // The bytes of a contiguous tensor (numel × element size from its storage offset) of at most
  // `max_bytes`: a generator state, a small buffer. nullopt when the record is absent,
  // compressed, too large or out of range.
  std::optional<std::string> read_bytes(const TensorRecord& t, uint64_t max_bytes) const;
  // read_bytes for a tensor whose strides are row-major (diff --deep): null for other views.
  std::shared_ptr<const std::string> read_elements(const TensorRecord& t, uint64_t cap) const;
};

// Magic-byte classification of a file's first bytes: "zip", "legacy", "legacy-tar", "".
std::string sniff_torch(const std::string& head);

// Opens and parses a torch.save zip or legacy stream. Unsupported for TorchScript and legacy tar
// files (exit 65 with a message naming what they are), Corrupt for damaged ones.
Result<TorchFile> open_torch_file(std::unique_ptr<RandomAccessFile> file);

// Legacy streams (torch_file_legacy.cc): the magic, protocol, sys-info, object and storage-keys
// pickles into tf->doc / tf->legacy_keys; then, once tf->storages is known, where each storage's
// bytes lie (an int64 element count, then the bytes, in key order).
Status read_legacy_pickles(TorchFile* tf);
Status locate_legacy_records(TorchFile* tf);

// Adds the file's components, devices, global findings and inspect tree to `view`. `label` names
// the file in evidence ("optimizer.pt").
void add_torch_file_to_view(const TorchFile& tf, const std::string& label, CheckpointView* view,
                            const ReadOptions& options);

// --deep: reads every storage record; CRC-32 against the central directory, NaN/Inf in floating
// tensors of the model and optimizer, all-zero optimizer moments. Findings go into `view`.
Status deep_scan_torch(const TorchFile& tf, const std::string& label, CheckpointView* view,
                       const ReadOptions& options);

// Registers the globals of `doc` as findings, with ckpt scan's verdict (verify/scan/risk.h):
// dangerous → error; unknown (outside every list, only referenced) → warning.
void add_global_findings(const PickleDoc& doc, const std::string& label, CheckpointView* view);

// A progress bar on stderr (only when enabled and stderr is a terminal).
class ProgressBar {
 public:
  ProgressBar(bool enabled, uint64_t total, std::string what);
  ~ProgressBar();
  void advance(uint64_t n);

 private:
  bool enabled_;
  uint64_t total_, done_ = 0;
  int last_percent_ = -1;
  std::string what_;
};

// One zip record of a torch.save file read whole: its CRC-32 against the central directory
// (crc_message says both when they differ) and, for a stored record, its NaN/Inf values as
// `dtype` (none when unknown) and whether every byte is zero. `bar` may be null.
struct RecordScan {
  bool crc_ok = true;
  uint32_t crc = 0;
  std::string crc_message;
  uint64_t nonfinite = 0;
  bool all_zero = true;
};
Result<RecordScan> scan_zip_record(const TorchFile& tf, const ZipEntry& e, const AnyDType& dtype,
                                   ProgressBar* bar);
// The dtype of the storage a data/<key> record holds; unknown for other records.
AnyDType record_dtype(const TorchFile& tf, const ZipEntry& e);

}  // namespace ckpt::verify
