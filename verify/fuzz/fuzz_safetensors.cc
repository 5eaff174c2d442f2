// libFuzzer: safetensors length prefix + JSON header validation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "verify/formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  using namespace ckpt::verify;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto h = parse_safetensors(*memory_file("fuzz.safetensors", bytes));
  if (h.is_ok()) {
    uint64_t end = 0;
    for (const auto& t : h->tensors) {
      if (t.begin != end || t.end < t.begin) __builtin_trap();  // validation promised contiguity
      end = t.end;
    }
  }
  return 0;
}
