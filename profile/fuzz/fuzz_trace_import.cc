// libFuzzer target for the trace importer: arbitrary bytes as a PyTorch chrome trace and as a
// recorder file. Any crash, hang, leak or sanitizer report is a bug; a Status is the only answer
// the importer may give to bad bytes. Built with -DCKPT_FUZZ=ON (clang), run by run_fuzzer.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "profile/analyze/analyzer.h"
#include "profile/import/trace_import.h"
#include "profile/recorder/recorder_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = ckpt::profile::import_pytorch_trace_text(text, "fuzz.json");
  if (t.is_ok()) {
    auto rep = ckpt::profile::analyze({*t});
    (void)rep;
  }
  auto r = ckpt::profile::decode_recorder_text(std::string(text), "fuzz.jsonl");
  (void)r;
  return 0;
}
