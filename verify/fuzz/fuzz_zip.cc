// libFuzzer: the zip directory reader and record reads, then the torch.save reader on top.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/io/env.h"
#include "verify/formats/torch_file.h"
#include "verify/zip/zip_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  using namespace ckpt::verify;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto f = memory_file("fuzz.pt", bytes);
  ZipLimits limits;
  limits.max_record_read = 1u << 20;
  auto z = ZipReader::open(*f, limits);
  if (z.is_ok()) {
    for (const auto& e : z->entries()) {
      auto r = z->read_record(e);
      if (r.is_ok() && r->size() != e.size) __builtin_trap();
    }
  }
  // The scanner's lenient directory and the streaming inflater with a small lifetime cap.
  limits.lenient = true;
  limits.max_total_inflated = 4u << 20;
  auto zl = ZipReader::open(*f, limits);
  if (zl.is_ok()) {
    for (const auto& e : zl->entries()) {
      uint64_t n = 0;
      Status s = zl->stream_record(e, [&n](const char*, size_t k) {
        n += k;
        return Status::ok();
      });
      if (s.is_ok() && n != e.size) __builtin_trap();
    }
  }
  auto tf = open_torch_file(memory_file("fuzz.pt", bytes));
  if (tf.is_ok()) {
    CheckpointView view;
    ReadOptions o;
    o.deep = true;
    add_torch_file_to_view(*tf, "fuzz.pt", &view, o);
    (void)deep_scan_torch(*tf, "fuzz.pt", &view, o);
  }
  return 0;
}
