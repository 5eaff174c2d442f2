// cost_bench: issue 27's cost cases, each at a base size and at 4x, through the `ckpt`
// executable. Prints wall time and the child's peak RSS per run and asserts the bounds:
//   - linear: time(4x) / time(1x) <= 6 (quadratic code shows ~16; small inputs are floored at
//     50 ms so start-up noise does not count);
//   - the case's own bound on time (5 s at 4x) and on peak RSS (documented in docs/cli.md:
//     64 MiB plus 12x the input for JSON read into a document, 40x for a CSV of LR columns,
//     128x for logs whose every point is a discontinuity — the --json output holds each one).
// Exit 1 when a bound is missed. A program to run by hand or in CI, never a timed test.
// Usage: cost_bench [path/to/ckpt]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench/pathological_inputs.h"

namespace fs = std::filesystem;
namespace pi = ckpt::pathological;

namespace {

struct Measured {
  int code = -1;
  double seconds = 0;
  double rss_mb = 0;
};

// Runs argv with stdout and stderr to /dev/null; its exit code, wall time and peak RSS.
Measured run(const std::vector<std::string>& argv) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* null = std::fopen("/dev/null", "w");
    ::dup2(::fileno(null), 1);
    ::dup2(::fileno(null), 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.rss_mb = double(ru.ru_maxrss) / 1024.0;
  m.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return m;
}

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

struct Case {
  const char* name;
  // Writes the input of scale k (1 or 4) under `dir`; returns the command's arguments and the
  // input's size in bytes.
  std::function<std::vector<std::string>(const fs::path& dir, int k, size_t* bytes)> make;
  std::vector<int> ok_codes;
  double rss_per_input_byte;  // the memory bound: 64 MiB + this x the input
};

}  // namespace

int main(int argc, char** argv) {
  const std::string ckpt = argc > 1 ? argv[1] : std::string(CKPT_BINARY_DIR) + "/cli/ckpt";
  const fs::path fixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";
  const fs::path root = fs::temp_directory_path() / ("cost_bench." + std::to_string(::getpid()));
  const std::vector<Case> cases = {
      {"audit, HF trainer_state.json of NaN (1.5 MB)",
       [&](const fs::path& dir, int k, size_t* bytes) {
         fs::copy(fixtures / "foreign" / "hf" / "checkpoint-6", dir / "checkpoint-6",
                  fs::copy_options::recursive);
         const std::string s = pi::hf_trainer_state_with_nans(size_t(k) * (3u << 19));
         *bytes = s.size();
         write(dir / "checkpoint-6" / "trainer_state.json", s);
         return std::vector<std::string>{"audit", (dir / "checkpoint-6").string()};
       },
       {0, 2},
       12},
      // Still superlinear (every log_history entry becomes an HDF5 group): kept small.
      {"convert, HF trainer_state.json of NaN (256 KB)",
       [&](const fs::path& dir, int k, size_t* bytes) {
         fs::copy(fixtures / "foreign" / "hf" / "checkpoint-6", dir / "checkpoint-6",
                  fs::copy_options::recursive);
         const std::string s = pi::hf_trainer_state_with_nans(size_t(k) * (1u << 18));
         *bytes = s.size();
         write(dir / "checkpoint-6" / "trainer_state.json", s);
         return std::vector<std::string>{"convert", (dir / "checkpoint-6").string(),
                                         (dir / "run").string()};
       },
       {0, 2},
       12},
      {"lr, CSV with 5,000 LR columns (1 MB)",
       [&](const fs::path& dir, int k, size_t* bytes) {
         const std::string s = pi::csv_with_lr_columns(5000 * k, size_t(k) << 20);
         *bytes = s.size();
         write(dir / "metrics.csv", s);
         return std::vector<std::string>{"lr", "--json", (dir / "metrics.csv").string()};
       },
       {0},
       40},
      {"lr, 75k alternating TensorBoard records",
       [&](const fs::path& dir, int k, size_t* bytes) {
         const std::string s = pi::tb_alternating_lr(75000 * size_t(k));
         *bytes = s.size();
         write(dir / "events.out.tfevents.1.host", s);
         return std::vector<std::string>{"lr", "--json",
                                         (dir / "events.out.tfevents.1.host").string()};
       },
       {2},
       128},
      {"lr, 100k alternating MLflow lines",
       [&](const fs::path& dir, int k, size_t* bytes) {
         const std::string s = pi::mlflow_alternating_lr(100000 * size_t(k));
         *bytes = s.size();
         write(dir / "run" / "metrics" / "lr", s);
         write(dir / "run" / "meta.yaml", "name: run\n");
         return std::vector<std::string>{"lr", "--json", (dir / "run").string()};
       },
       {2},
       128},
      {"coverage, 21-line journal, dataset 10^17",
       [&](const fs::path& dir, int k, size_t* bytes) {
         // Scale the dataset, not the journal: the cost must not follow it at all.
         const std::string s = pi::journal_one_sample_per_epoch(100000000000000000ull * k, 20);
         *bytes = s.size();
         write(dir / "journal.jsonl", s);
         return std::vector<std::string>{"coverage", "--json", "--max-ids", "1000", dir.string()};
       },
       {0},
       0},
  };
  std::printf("cost_bench: %s\n", ckpt.c_str());
  int failures = 0;
  for (const auto& c : cases) {
    Measured m[2];
    size_t bytes[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const fs::path dir = root / (std::to_string(&c - cases.data()) + "-" + std::to_string(i));
      fs::create_directories(dir);
      std::vector<std::string> args = c.make(dir, i == 0 ? 1 : 4, &bytes[i]);
      args.insert(args.begin(), ckpt);
      m[i] = run(args);
      fs::remove_all(dir);
    }
    const double ratio = std::max(m[1].seconds, 0.05) / std::max(m[0].seconds, 0.05);
    const double rss_bound = 64.0 + c.rss_per_input_byte * double(bytes[1]) / (1 << 20);
    const bool codes_ok = std::count(c.ok_codes.begin(), c.ok_codes.end(), m[0].code) > 0 &&
                          std::count(c.ok_codes.begin(), c.ok_codes.end(), m[1].code) > 0;
    const bool ok = codes_ok && ratio <= 6.0 && m[1].seconds <= 5.0 && m[1].rss_mb <= rss_bound;
    std::printf(
        "  %-48s 1x: %.3f s %.1f MB | 4x: %.3f s %.1f MB (exit %d) | time ratio %.2f (bound 6), "
        "4x time bound 5 s, RSS bound %.0f MB  %s\n",
        c.name, m[0].seconds, m[0].rss_mb, m[1].seconds, m[1].rss_mb, m[1].code, ratio, rss_bound,
        ok ? "ok" : "OVER");
    if (!ok) ++failures;
  }
  fs::remove_all(root);
  return failures == 0 ? 0 : 1;
}
