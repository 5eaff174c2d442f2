// libFuzzer: our run journal parser (journal.jsonl), the segment marker's reader (a store's
// journal in segments, ckpt/store/journal.h) and the coverage input built from it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "analytics/coverage/coverage_from_journal.h"
#include "analytics/input/run_journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::analytics;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)ckpt::store::journal_segments_before(text);
  auto journal = parse_journal(text, "journal.jsonl");
  if (journal.is_ok()) (void)coverage_input_from_journal(*journal);
  return 0;
}
