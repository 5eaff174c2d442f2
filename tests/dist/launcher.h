// Test-only process launcher for the [dist] tests: starts one ckpt-dist-demo process per rank with
// stdout/stderr in files, and waits for them with a hard deadline, killing whatever is still
// running then, so a test can fail but never hang. Single-threaded use; owns the child processes
// it starts (kills them in its destructor if they are still running).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ckpt::dist_test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.find_last_of('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

inline std::string make_temp_dir(const std::string& prefix) {
  std::string templ = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return "";
  return templ;
}

struct RankResult {
  int exit_code = -1;  // -1: killed at the deadline (or by a signal)
  std::string out, err;
  double seconds = 0;  // from launch to exit
};

class Launch {
 public:
  // Starts `argv_per_rank.size()` processes; stdout/stderr of rank r go to <prefix>-rR.out/.err.
  Launch(const std::vector<std::vector<std::string>>& argv_per_rank, const std::string& prefix)
      : start_(std::chrono::steady_clock::now()) {
    // argv arrays are built before forking: the child must not allocate.
    std::vector<std::vector<char*>> args(argv_per_rank.size());
    for (size_t r = 0; r < argv_per_rank.size(); ++r) {
      for (const auto& a : argv_per_rank[r]) args[r].push_back(const_cast<char*>(a.c_str()));
      args[r].push_back(nullptr);
    }
    for (size_t r = 0; r < argv_per_rank.size(); ++r) {
      const std::string out = prefix + "-r" + std::to_string(r) + ".out";
      const std::string err = prefix + "-r" + std::to_string(r) + ".err";
      paths_.push_back({out, err});
      const pid_t pid = fork();
      if (pid == 0) {
        // Only async-signal-safe calls between fork and exec (the parent may have threads).
        const int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(120);
        execv(args[r][0], args[r].data());
        _exit(127);
      }
      pids_.push_back(pid);
      results_.emplace_back();
      done_.push_back(pid <= 0);
    }
  }
  ~Launch() {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (!done_[r] && pids_[r] > 0) {
        kill(pids_[r], SIGKILL);
        waitpid(pids_[r], nullptr, 0);
      }
    }
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  pid_t pid(size_t rank) const { return pids_[rank]; }

  // Waits for every process until `limit` after launch; kills those still running then.
  std::vector<RankResult> wait_all(std::chrono::milliseconds limit) {
    std::vector<size_t> all;
    for (size_t r = 0; r < pids_.size(); ++r) all.push_back(r);
    wait_for(all, limit);
    return results_;
  }

  // Waits for `rank` alone until `limit` after launch (killing it then); the others keep running
  // until the next wait or the destructor.
  RankResult wait_one(size_t rank, std::chrono::milliseconds limit) {
    wait_for({rank}, limit);
    return results_[rank];
  }

 private:
  void wait_for(const std::vector<size_t>& ranks, std::chrono::milliseconds limit) {
    const auto deadline = start_ + limit;
    while (true) {
      bool all = true;
      for (size_t r : ranks) {
        if (done_[r]) continue;
        int st = 0;
        if (waitpid(pids_[r], &st, WNOHANG) == pids_[r]) {
          finish(r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        } else {
          all = false;
        }
      }
      if (all) return;
      if (std::chrono::steady_clock::now() >= deadline) {
        for (size_t r : ranks) {
          if (done_[r]) continue;
          kill(pids_[r], SIGKILL);
          waitpid(pids_[r], nullptr, 0);
          finish(r, -1);
        }
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void finish(size_t r, int exit_code) {
    done_[r] = true;
    results_[r].exit_code = exit_code;
    results_[r].seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    results_[r].out = read_text(paths_[r].first);
    results_[r].err = read_text(paths_[r].second);
  }

  std::chrono::steady_clock::time_point start_;
  std::vector<pid_t> pids_;
  std::vector<bool> done_;
  std::vector<RankResult> results_;
  std::vector<std::pair<std::string, std::string>> paths_;
};

}  // namespace ckpt::dist_test
