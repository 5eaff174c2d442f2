#include "demo_runs.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ckpt::testing {

DemoResult run_demo(const std::string& run_dir, const std::string& args) {
  const std::string cmd = std::string(CKPT_BINARY_DIR) + "/examples/ckpt-train-demo --run-dir '" +
                          run_dir + "' " + args + " 2>&1";
  DemoResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const std::string key = "final_params_xxh3 ";
  const size_t at = r.output.rfind(key);
  if (at != std::string::npos) r.final_digest = r.output.substr(at + key.size(), 16);
  return r;
}

std::vector<std::pair<int64_t, StepRecord>> read_all_progress(const std::string& run_dir) {
  std::vector<std::pair<int64_t, StepRecord>> out;
  std::ifstream in(run_dir + "/journal.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("event", "") != "progress") continue;
    StepRecord s;
    s.lr = j.at("lr").get<double>();
    s.loss = j.at("loss").get<double>();
    s.batch = j.value("batch_xxh3", "");
    s.epoch = j.at("epoch").get<uint64_t>();
    s.position = j.at("position").get<uint64_t>();
    out.emplace_back(j.at("step").get<int64_t>(), s);
  }
  return out;
}

std::map<int64_t, StepRecord> read_progress(const std::string& run_dir) {
  std::map<int64_t, StepRecord> out;
  for (auto& [step, rec] : read_all_progress(run_dir)) out[step] = rec;
  return out;
}

}  // namespace ckpt::testing
