// `ckpt load-bench PATH [--device cpu|cuda:N] [--threads N] [--no-verify] [--json]`: loads every
// tensor of a ckpt checkpoint (a run directory → its LATEST, or a step directory) through the
// restore pipeline into memory on the device and reports bytes, seconds (in-process, excluding
// process start and the allocation of the memory read into, reported apart) and GB/s. Every
// byte is verified against the commit record unless --no-verify.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "cli/diagnostics.h"
#include "cli/exit_codes.h"
#include "cli/load_bench_cuda.h"
#include "resume/load_all.h"

namespace ckpt::cli {
namespace {

struct LoadBenchOptions {
  std::string path;
  std::string device = "cpu";
  unsigned threads = 0;
  bool no_verify = false;
  bool json = false;
};

// "cpu" → -1; "cuda" / "cuda:N" → N; anything else → nullopt.
std::optional<int> parse_device(const std::string& d) {
  if (d == "cpu") return -1;
  if (d == "cuda") return 0;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5 || d.size() > 9) return std::nullopt;
  int n = 0;
  for (size_t i = 5; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9') return std::nullopt;
    n = n * 10 + (d[i] - '0');
  }
  return n;
}

Result<resume::LoadAllStats> load(Env* env, const std::string& dir, int device,
                                  const resume::LoadAllOptions& lo) {
  if (device < 0) return resume::load_all_host(env, dir, lo);
  // Only here is the CUDA runtime loaded (cli/load_bench_cuda.h).
  return load_all_device_lazily(env, dir, device, lo);
}

int run_load_bench(const LoadBenchOptions& o, const Context& ctx) {
  const std::optional<int> device = parse_device(o.device);
  if (!device) {
    print_diagnostic(std::cerr, "load-bench",
                     "--device " + o.device + ": expected cpu, cuda or cuda:N");
    return kExitUsage;
  }
  Env* env = ctx.env;
  auto dir = resume::resolve_checkpoint(env, o.path);
  if (!dir.is_ok()) {
    print_diagnostic(std::cerr, "load-bench", dir.status().message());
    return exit_code_for(dir.status());
  }
  resume::LoadAllOptions lo;
  lo.io_threads = o.threads;
  lo.verify_hashes = !o.no_verify;
  auto stats = load(env, *dir, *device, lo);
  if (!stats.is_ok()) {
    print_diagnostic(std::cerr, "load-bench", stats.status().message());
    // No usable device is an input that cannot be opened, not a damaged checkpoint.
    return stats.status().code() == Code::kUnsupported ? kExitNoInput
                                                       : exit_code_for(stats.status());
  }
  const double gbps =
      stats->seconds > 0 ? static_cast<double>(stats->bytes) / stats->seconds / 1e9 : 0.0;
  const bool cuda = *device >= 0;
  if (o.json) {
    std::cout << nlohmann::json{{"bytes", stats->bytes},
                                {"seconds", stats->seconds},
                                {"gb_per_s", gbps},
                                {"alloc_seconds", stats->alloc_seconds},
                                {"path", cuda ? "cuda" : "cpu"},
                                {"threads", stats->threads},
                                {"verified", lo.verify_hashes}}
                     .dump(2)
              << "\n";  // numbers and fixed words only: always valid UTF-8
  } else {
    std::cout << "ckpt load-bench: " << *dir << ": " << stats->tensors << " tensors, "
              << stats->bytes << " bytes from " << stats->ranks << " rank file(s) into "
              << (cuda ? "cuda:" + std::to_string(*device) : std::string("host memory")) << " in "
              << stats->seconds << " s = " << gbps << " GB/s (" << stats->threads
              << " I/O threads, hashes " << (lo.verify_hashes ? "verified" : "not verified")
              << "); allocating the memory took " << stats->alloc_seconds << " s more\n";
  }
  return kExitOk;
}

}  // namespace

Runner setup_load_bench(CLI::App& root, CLI::App*& sub, const Context& ctx) {
  auto o = std::make_shared<LoadBenchOptions>();
  sub = root.add_subcommand("load-bench",
                            "Load every tensor of a ckpt checkpoint through the restore pipeline "
                            "and report bytes, seconds and GB/s");
  sub->add_option("path", o->path, "A run directory (its LATEST) or a step directory")->required();
  sub->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  sub->add_option("--threads", o->threads, "I/O threads (0 = the default for this machine)")
      ->capture_default_str();
  sub->add_flag("--no-verify", o->no_verify,
                "Skip the XXH3 checks (each tensor's, and the file's against COMMIT.json)");
  sub->add_flag("--json", o->json,
                "Print {\"bytes\", \"seconds\", \"gb_per_s\", \"alloc_seconds\", \"path\", "
                "\"threads\", \"verified\"}");
  sub->footer(
      "Exit codes: 0 loaded; 64 usage; 65 not a ckpt checkpoint, or corrupt (a hash mismatch "
      "names the tensor); 66 cannot open the input or the device.");
  return [o, ctx] { return run_load_bench(*o, ctx); };
}

}  // namespace ckpt::cli
