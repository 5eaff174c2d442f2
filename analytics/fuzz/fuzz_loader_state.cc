// libFuzzer: what `ckpt coverage` reads from a Lightning / StatefulDataLoader run beyond the
// torch.save pickle (verify's fuzzers cover that): a saved generator state (the first 5056 bytes,
// then a few randperm draws from it) and the rest as a CSVLogger metrics.csv.
#include <cstddef>
#include <cstdint>
#include <string>

#include "analytics/coverage/loader_run.h"
#include "analytics/coverage/torch_randperm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::analytics;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string csv = bytes;
  if (bytes.size() >= TorchCpuGenerator::kStateBytes) {
    auto gen = TorchCpuGenerator::from_state(bytes.substr(0, TorchCpuGenerator::kStateBytes));
    if (gen) {
      for (int i = 0; i < 3; ++i) (void)torch_randperm(700, *gen);
    }
    csv = bytes.substr(TorchCpuGenerator::kStateBytes);
  }
  (void)launch_from_csv_text(csv, "metrics.csv");
  return 0;
}
