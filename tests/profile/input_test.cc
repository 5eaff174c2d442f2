// The profiler's inputs: gzip traces, a directory of per-rank traces, caps, non-regular files, and
// the importer's per-step accounting (autograd phases, GPU intervals); synthetic multi-rank
// series for the straggler, tail and sawtooth rules.
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>

#include "profile/analyze/analyzer.h"
#include "profile/analyze/report_render.h"
#include "profile/analyze/series_stats.h"
#include "profile/history/env_info.h"
#include "profile/history/layout.h"
#include "profile/import/input_file.h"
#include "profile/import/trace_import.h"

namespace ckpt::profile::input_test {
namespace {

struct Scratch {
  std::string path;
  Scratch() {
    char tmpl[] = "/tmp/ckpt-profile-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~Scratch() { std::system(("rm -rf '" + path + "'").c_str()); }
};

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

const char* kTrace =
    R"({"distributedInfo":{"rank":0},"traceEvents":[{"ph":"X","name":"ProfilerStep#1","ts":0,"dur":100}]})";

TEST_CASE("gzip traces are read, a damaged or oversized one is one clear line", "[profile]") {
  Scratch d;
  write(d.path + "/rank0.json.gz", gzip(kTrace));
  auto t = load_traces({d.path + "/rank0.json.gz"});
  REQUIRE(t.is_ok());
  REQUIRE(t->at(0).steps.size() == 1);
  std::string gz = gzip(kTrace);
  write(d.path + "/cut.json.gz", gz.substr(0, gz.size() / 2));
  auto cut = load_traces({d.path + "/cut.json.gz"});
  REQUIRE(cut.status().code() == Code::kCorrupt);
  REQUIRE(cut.status().message().find("cut.json.gz: damaged gzip") != std::string::npos);
  // A bomb: 64 MiB of zeros in a few KB, read with a 1 MiB cap, stops at the cap.
  write(d.path + "/bomb.json.gz", gzip(std::string(64 << 20, '\0')));
  auto bomb = read_bounded_file(d.path + "/bomb.json.gz", 1 << 20);
  REQUIRE(bomb.status().code() == Code::kCorrupt);
  REQUIRE(bomb.status().message().find("more than 1 MiB") != std::string::npos);
  auto big = read_bounded_file(d.path + "/rank0.json.gz", 8);
  REQUIRE(big.status().code() == Code::kCorrupt);
  REQUIRE(big.status().message().find("cap") != std::string::npos);
}

TEST_CASE("a directory of per-rank traces is one argument", "[profile]") {
  Scratch d;
  for (int r = 0; r < 3; ++r) {
    std::string text = std::string(kTrace);
    text.replace(text.find("\"rank\":0"), 8, "\"rank\":" + std::to_string(r));
    write(d.path + "/worker" + std::to_string(r) + ".pt.trace.json.gz", gzip(text));
  }
  write(d.path + "/notes.txt", "not a trace");
  auto t = load_traces({d.path});
  REQUIRE(t.is_ok());
  REQUIRE(t->size() == 3);
  REQUIRE(t->at(2).rank == 2);
  Scratch empty;
  auto none = load_traces({empty.path});
  REQUIRE(none.status().code() == Code::kCorrupt);
  REQUIRE(none.status().message().find("no trace files") != std::string::npos);
}

TEST_CASE("non-regular inputs are refused without blocking: FIFO, /dev/zero", "[profile]") {
  Scratch d;
  std::string fifo = d.path + "/trace.json";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto f = load_traces({fifo});  // would block forever on a plain open
  REQUIRE(f.status().code() == Code::kCorrupt);
  REQUIRE(f.status().message() == fifo + ": not a regular file");
  auto z = read_bounded_file("/dev/zero", kMaxSnapshotBytes);
  REQUIRE(z.status().code() == Code::kCorrupt);
  REQUIRE(z.status().message() == "/dev/zero: not a regular file");
  auto missing = read_bounded_file(d.path + "/nope.json", kMaxSnapshotBytes);
  REQUIRE(missing.status().code() == Code::kNotFound);
}

TEST_CASE("forward is the time before the first backward op, GPU busy, NCCL, exposed",
          "[profile]") {
  auto t = import_pytorch_trace_text(R"J({"traceEvents":[
    {"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","ts":0,"dur":1000},
    {"ph":"X","name":"ProfilerStep#1","cat":"gpu_user_annotation","ts":0,"dur":2000},
    {"ph":"X","name":"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__","ts":0,"dur":100},
    {"ph":"X","name":"aten::linear","cat":"cpu_op","ts":100,"dur":300},
    {"ph":"X","name":"autograd::engine::evaluate_function: AddmmBackward0","cat":"cpu_op","ts":500,"dur":100},
    {"ph":"X","name":"autograd::engine::evaluate_function: TBackward0","cat":"cpu_op","ts":700,"dur":100},
    {"ph":"X","name":"Optimizer.step#SGD.step","ts":850,"dur":100},
    {"ph":"X","name":"cudaStreamSynchronize","cat":"cuda_runtime","ts":950,"dur":40},
    {"ph":"X","name":"void gemm_kernel","cat":"kernel","pid":0,"tid":7,"ts":200,"dur":300},
    {"ph":"X","name":"ncclKernel_AllReduce_RING_LL_Sum_float","cat":"kernel","pid":0,"tid":20,"ts":400,"dur":400},
    {"ph":"X","name":"Memcpy HtoD (Pageable -> Device)","cat":"gpu_memcpy","pid":0,"tid":7,"ts":50,"dur":20}]})J",
                                     "t.json");
  REQUIRE(t.is_ok());
  REQUIRE(t->has_gpu);
  REQUIRE(t->loader_iter == "_MultiProcessingDataLoaderIter");
  REQUIRE(t->steps.size() == 1);  // the GPU's copy of the step window is not a second step
  const auto& s = t->steps[0];
  // [0,100) data wait, then forward until the first backward op at 500 (the nccl kernel from 400
  // is a collective by the classification's priority), backward 500..800.
  REQUIRE(s.phase_s[index(Phase::kDataWait)] == Approx(100e-6));
  REQUIRE(s.phase_s[index(Phase::kForward)] > 0);
  REQUIRE(s.phase_s[index(Phase::kOptimizer)] == Approx(100e-6));
  REQUIRE(s.gpu.busy_s == Approx((20 + 300 + 300) * 1e-6));  // 50..70, 200..500, 500..800
  REQUIRE(s.gpu.comm_s == Approx(400e-6));
  REQUIRE(s.gpu.exposed_comm_s == Approx(300e-6));  // 400..500 overlaps the gemm
  REQUIRE(s.gpu.idle_in_data_wait_s == Approx(80e-6));
  REQUIRE(s.gpu.sync_s == Approx(40e-6));
  REQUIRE(s.gpu.pageable_h2d_s == Approx(20e-6));
}

// A synchronous job: every rank's own time, then the all-reduce, which ends when the last rank
// arrives (+ a fixed transfer); each rank's collective time is its wait plus the transfer.
std::vector<RankTrace> synchronous(const std::vector<std::vector<double>>& own,
                                   const std::vector<std::vector<double>>& data_wait,
                                   double transfer) {
  size_t ranks = own.size(), steps = own[0].size();
  std::vector<RankTrace> out(ranks);
  std::vector<double> now(ranks, 0);
  for (size_t k = 0; k < steps; ++k) {
    double arrive = 0;
    for (size_t r = 0; r < ranks; ++r) arrive = std::max(arrive, own[r][k]);
    for (size_t r = 0; r < ranks; ++r) {
      StepRecord s;
      s.step = static_cast<int64_t>(k);
      s.start_s = now[r];
      s.duration_s = arrive + transfer;
      s.phase_s[index(Phase::kDataWait)] = data_wait[r][k];
      s.phase_s[index(Phase::kForward)] = 0.4 * (own[r][k] - data_wait[r][k]);
      s.phase_s[index(Phase::kBackward)] = 0.6 * (own[r][k] - data_wait[r][k]);
      s.phase_s[index(Phase::kCollective)] = arrive - own[r][k] + transfer;
      now[r] += s.duration_s;
      out[r].steps.push_back(s);
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    out[r].rank = static_cast<int>(r);
    out[r].world_size = static_cast<int>(ranks);
    out[r].end_s = now[r];
  }
  return out;
}

const Verdict* find(const Report& r, const std::string& id) {
  for (const auto& v : r.verdicts) {
    if (v.id() == id) return &v;
  }
  return nullptr;
}

TEST_CASE("noise does not hide a straggler: last in 15 of 20 steps, 16 ms behind", "[profile]") {
  std::mt19937 gen(7);
  std::normal_distribution<double> noise(0, 0.004);
  std::vector<std::vector<double>> own(4, std::vector<double>(20)), dw(4, std::vector<double>(20));
  for (size_t k = 0; k < 20; ++k) {
    for (size_t r = 0; r < 4; ++r) own[r][k] = 0.200 + noise(gen);
    own[1][k] = k % 4 == 3 ? 0.190 : 0.216 + noise(gen) * 0.25;
  }
  auto rep = analyze(synchronous(own, dw, 0.010));
  REQUIRE(rep.is_ok());
  REQUIRE(rep->per_rank[1].last_fraction == Approx(0.75));
  const Verdict* v = find(*rep, "straggler");
  REQUIRE(v != nullptr);
  REQUIRE(v->rank == 1);
  REQUIRE(v->evidence["kind"] == "consistent");
}

TEST_CASE("the seed's 8 ranks: rank 5 +3 s on 5% of steps under an alternating sawtooth",
          "[profile]") {
  std::mt19937 gen(11);
  std::normal_distribution<double> noise(0, 0.003);
  size_t n = 200;
  std::vector<std::vector<double>> own(8, std::vector<double>(n)), dw(8, std::vector<double>(n));
  for (size_t k = 0; k < n; ++k) {
    for (size_t r = 0; r < 8; ++r) {
      dw[r][k] = k % 2 == 1 ? 0.060 + noise(gen) : 0.0;
      own[r][k] = 0.100 + dw[r][k] + noise(gen);
    }
  }
  // A tail, not a period: 10 irregular steps of 200.
  for (size_t k : {7, 26, 38, 61, 85, 102, 127, 149, 163, 188}) own[5][k] += 3.0;
  auto rep = analyze(synchronous(own, dw, 0.005));
  REQUIRE(rep.is_ok());
  const Verdict* s = find(*rep, "straggler");
  REQUIRE(s != nullptr);
  REQUIRE(s->rank == 5);
  REQUIRE(s->evidence["kind"] == "tail");
  REQUIRE(s->evidence["culprit_steps"] == 10);
  REQUIRE(find(*rep, "input_bound") != nullptr);
  const Verdict* p = find(*rep, "periodic_stall");
  REQUIRE(p != nullptr);
  REQUIRE(p->period_steps == 2);
  // The per-rank table is not barrier-equalised: only rank 5's own time is slow, 5% of steps.
  for (const auto& r : rep->per_rank) {
    REQUIRE(r.own_slow_fraction == Approx(r.rank == 5 ? 0.05 : 0.0));
  }
  // 1 − (1 − p)^N with p from own times predicts what is observed: 5% of steps slow.
  REQUIRE(rep->scale.observed_any_slow == Approx(0.05));
  REQUIRE(rep->scale.predicted_now == Approx(0.05));
  REQUIRE(rep->scale.agrees);
}

TEST_CASE("two-level periodicity: an alternating series has period 2, noise has none",
          "[profile]") {
  std::vector<double> alt;
  for (int i = 0; i < 40; ++i) alt.push_back(i % 2 ? 0.0587 + 0.001 * (i % 3) : 0.0001 * (i % 2));
  auto p = detect_two_level_period(alt, 0.01);
  REQUIRE(p.found);
  REQUIRE(p.period_steps == 2);
  REQUIRE(detect_periodic_spikes(alt, 0.01).found == false);  // why the spike rule missed it
  std::mt19937 gen(3);
  std::normal_distribution<double> nd(0.05, 0.01);
  std::vector<double> noise;
  for (int i = 0; i < 200; ++i) noise.push_back(nd(gen));
  REQUIRE_FALSE(detect_two_level_period(noise, 0.01).found);
}

TEST_CASE("invalid UTF-8 in env variables and file names never breaks --json", "[profile]") {
  ::setenv("CKPT_TEST_BAD_UTF8", "caf\xe9 \xff\xfe", 1);
  auto e = capture_env("");
  ::unsetenv("CKPT_TEST_BAD_UTF8");
  REQUIRE(e.is_ok());
  REQUIRE(e->fields.count("env.CKPT_TEST_BAD_UTF8") == 1);
  std::string j;
  REQUIRE_NOTHROW(j = json_text(env_json(*e)));
  REQUIRE(j.find("caf\xef\xbf\xbd") != std::string::npos);  // U+FFFD
  REQUIRE(nlohmann::json::parse(j).is_object());            // and it is valid JSON again
  Scratch d;
  write(d.path + "/shard\xff.b\xe9n", std::string(100, 'x'));
  auto s = scan_layout(d.path);
  REQUIRE(s.is_ok());
  REQUIRE_NOTHROW(j = json_text(layout_json(*s)));
  REQUIRE(nlohmann::json::parse(j).is_object());
}

}  // namespace
}  // namespace ckpt::profile::input_test
