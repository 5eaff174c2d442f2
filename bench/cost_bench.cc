// cost_bench: issue 27's cost cases, each at a base size and at 4x, through the `ckpt`
// executable. Prints wall time and the child's peak RSS per run and asserts the bounds:
//   - linear: time(4x) / time(1x) <= 6 (quadratic code shows ~16; small inputs are floored at
//     50 ms so start-up noise does not count);
//   - the case's own bound on time (5 s at 4x) and on peak RSS (documented in docs/cli.md:
//     64 MiB plus 12x the input for JSON read into a document, 40x for a CSV of LR columns,
//     128x for logs whose every point is a discontinuity — the --json output holds each one).
// Then `convert` of a NaN-filled trainer_state.json at 1, 2 and 6 MB (every log_history entry an
// HDF5 group): CPU time per MB (the child's user + system time, steadier than wall time on a
// shared machine), asserted linear — time(6 MB) / time(1 MB) <= 9, where quadratic code shows
// ~36 — with peak RSS <= 64 MiB + 48x the JSON and a rank file of <= 1 KiB per entry.
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
  double cpu_seconds = 0;  // the child's user + system time
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
  m.cpu_seconds = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
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

// `convert` of the HF fixture with a NaN-filled trainer_state.json of 1, 2 and 6 MB (see the top);
// the number of bounds missed.
int convert_series(const std::string& ckpt, const fs::path& fixtures, const fs::path& root) {
  const size_t mbs[] = {1, 2, 6};
  Measured m[3];
  int failures = 0;
  for (int i = 0; i < 3; ++i) {
    const fs::path dir = root / ("convert-" + std::to_string(mbs[i]));
    fs::create_directories(dir);
    fs::copy(fixtures / "foreign" / "hf" / "checkpoint-6", dir / "checkpoint-6",
             fs::copy_options::recursive);
    const std::string s = pi::hf_trainer_state_with_nans(mbs[i] << 20);
    size_t entries = 0;
    for (size_t at = s.find("\"step\""); at != std::string::npos; at = s.find("\"step\"", at + 1))
      ++entries;
    write(dir / "checkpoint-6" / "trainer_state.json", s);
    m[i] = run({ckpt, "convert", (dir / "checkpoint-6").string(), (dir / "run").string()});
    const fs::path rank = dir / "run" / "step-000000000006" / "rank-00000.h5";
    const uintmax_t rank_bytes = fs::exists(rank) ? fs::file_size(rank) : 0;
    const double rss_bound = 64.0 + 48.0 * double(s.size()) / (1 << 20);
    const bool ok = m[i].code == 2 && rank_bytes > 0 && rank_bytes <= entries * 1024 &&
                    m[i].rss_mb <= rss_bound;
    std::printf(
        "  convert, trainer_state.json of NaN, %zu MB (%zu entries): %.2f s CPU (%.2f s/MB), "
        "%.2f s wall, %.1f MB RSS (bound %.0f), rank file %.1f MB (%.0f B/entry, bound 1024), "
        "exit %d  %s\n",
        mbs[i], entries, m[i].cpu_seconds, m[i].cpu_seconds / double(mbs[i]), m[i].seconds,
        m[i].rss_mb, rss_bound, double(rank_bytes) / 1e6, double(rank_bytes) / double(entries),
        m[i].code, ok ? "ok" : "OVER");
    if (!ok) ++failures;
    fs::remove_all(dir);
  }
  const double ratio = std::max(m[2].cpu_seconds, 0.05) / std::max(m[0].cpu_seconds, 0.05);
  const bool linear = ratio <= 9.0;
  std::printf("  convert, 6 MB / 1 MB CPU time: %.2f (linear: 6; bound 9)  %s\n", ratio,
              linear ? "ok" : "OVER");
  return failures + (linear ? 0 : 1);
}

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
  failures += convert_series(ckpt, fixtures, root);
  fs::remove_all(root);
  return failures == 0 ? 0 : 1;
}
