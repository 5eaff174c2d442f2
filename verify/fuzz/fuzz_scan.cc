// libFuzzer: `ckpt scan` on one in-memory file: format sniffing, raw pickle sequences, zip (strict
// directory, lenient directory and local-header search), npy/npz, legacy streams, nested pickles,
// the weights_only prediction and both renderings.
#include <cstddef>
#include <cstdint>
#include <string>

#include "verify/scan/scan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::verify;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // The name picks a path through the sniffing: the first byte chooses an extension.
  static const char* kNames[] = {"f.pkl", "f.pt", "f.npy", "f.distcp", "f.bin", "f"};
  const char* name = kNames[size == 0 ? 0 : data[0] % 6];
  auto file = ckpt::memory_file(name, std::move(bytes));
  ScanOptions options;
  options.max_pickle_bytes = 1 << 20;
  options.max_search_bytes = 1 << 20;
  auto s = scan_file(*file, name, options);
  if (!s.is_ok()) return 0;
  ScanReport r;
  r.path = name;
  r.format = s->format;
  r.files.push_back(std::move(s).value());
  const std::string text = scan_report_to_text(r);
  const std::string json =
      scan_report_to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return static_cast<int>(text.size() + json.size() == 0);
}
