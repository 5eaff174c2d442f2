// Verdicts on real traces written by Debian's python3-torch profiler (fixtures/profile/,
// made by make_traces.py): each gets the right primary verdict and none of the wrong ones.
#include <catch2/catch.hpp>
#include <set>

#include "profile/analyze/analyzer.h"
#include "profile/analyze/report_render.h"
#include "profile/import/trace_import.h"

namespace ckpt::profile::traces_test {
namespace {

std::string fixture(const std::string& name) {
  return std::string(CKPT_SOURCE_DIR) + "/fixtures/profile/" + name;
}

Report analyze_files(const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const auto& n : names) paths.push_back(fixture(n));
  auto traces = load_traces(paths);
  REQUIRE(traces.is_ok());
  auto rep = analyze(*traces);
  REQUIRE(rep.is_ok());
  return *rep;
}

std::set<std::string> ids(const Report& r) {
  std::set<std::string> out;
  for (const auto& v : r.verdicts) out.insert(v.id());
  return out;
}

TEST_CASE("starved data loader: input_bound, highly", "[profile]") {
  Report r = analyze_files({"starved_loader.json"});
  REQUIRE(r.ranks == 1);
  REQUIRE(r.steps == 12);
  REQUIRE(r.verdicts.front().id() == "input_bound");
  REQUIRE(r.verdicts.front().evidence["level"] == "high");
  REQUIRE(r.breakdown[index(Phase::kDataWait)] > 0.8);
  auto got = ids(r);
  for (const char* wrong : {"compute_bound", "straggler", "periodic_stall", "hung"}) {
    INFO(wrong);
    REQUIRE(got.count(wrong) == 0);
  }
}

TEST_CASE("compute-bound loop: compute_bound only", "[profile]") {
  Report r = analyze_files({"compute_bound.json"});
  REQUIRE(r.verdicts.front().id() == "compute_bound");
  auto got = ids(r);
  for (const char* wrong : {"input_bound", "straggler", "periodic_stall", "hung"}) {
    INFO(wrong);
    REQUIRE(got.count(wrong) == 0);
  }
  REQUIRE(r.breakdown[index(Phase::kForward)] + r.breakdown[index(Phase::kBackward)] > 0.8);
}

TEST_CASE("periodic checkpoint: periodic_stall every 4 steps, caused by checkpoint", "[profile]") {
  Report r = analyze_files({"periodic_ckpt.json"});
  const Verdict& v = r.verdicts.front();
  REQUIRE(v.id() == "periodic_stall");
  REQUIRE(v.period_steps == 4);
  REQUIRE(v.evidence["cause"] == "checkpoint");
  auto got = ids(r);
  for (const char* wrong : {"input_bound", "compute_bound", "straggler", "hung"}) {
    INFO(wrong);
    REQUIRE(got.count(wrong) == 0);
  }
  auto j = report_json(r);
  REQUIRE(j["verdicts"][0]["period_steps"] == 4);
}

TEST_CASE("2-process gloo run: rank 1 is the straggler", "[profile]") {
  // Given in reverse order: the ranks come from distributedInfo, not from the order.
  Report r = analyze_files({"gloo_straggler_rank1.json", "gloo_straggler_rank0.json"});
  REQUIRE(r.ranks == 2);
  REQUIRE(r.per_rank[0].rank == 0);
  const Verdict& v = r.verdicts.front();
  REQUIRE(v.id() == "straggler");
  REQUIRE(v.rank == 1);
  REQUIRE(v.evidence["consistency"].get<double>() >= 0.75);
  auto got = ids(r);
  for (const char* wrong : {"input_bound", "compute_bound", "collective_bound", "hung"}) {
    INFO(wrong);
    REQUIRE(got.count(wrong) == 0);
  }
  auto j = report_json(r);
  REQUIRE(j["verdicts"][0]["rank"] == 1);
  REQUIRE(j.contains("breakdown"));
  REQUIRE(j["breakdown"]["collective"].get<double>() > 0.2);
}

TEST_CASE("rank from distributedInfo, then the file name, then the order", "[profile]") {
  REQUIRE(rank_from_file_name("/x/trace_rank12.json") == 12);
  REQUIRE(rank_from_file_name("run/RANK-3.pt.trace.json") == 3);
  REQUIRE_FALSE(rank_from_file_name("/rank7dir/trace.json").has_value());
  auto obj = import_pytorch_trace_text(
      R"({"distributedInfo":{"rank":5,"world_size":8},"traceEvents":[
          {"ph":"X","name":"ProfilerStep#3","ts":0,"dur":100}]})",
      "trace_rank1.json");
  REQUIRE(obj.is_ok());
  REQUIRE(obj->rank == 5);
  REQUIRE(obj->world_size == 8);
  auto arr = import_pytorch_trace_text(R"([{"ph":"X","name":"ProfilerStep#3","ts":0,"dur":100}])",
                                       "a.json");
  REQUIRE(arr.is_ok());
  REQUIRE(arr->rank == -1);
  REQUIRE(arr->steps.size() == 1);
  REQUIRE(arr->steps[0].step == 3);
}

TEST_CASE("trace events become phases, overlaps attributed once by priority", "[profile]") {
  auto t = import_pytorch_trace_text(R"J([
    {"ph":"X","name":"ProfilerStep#1","ts":1000,"dur":1000},
    {"ph":"X","name":"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__","ts":1000,"dur":300},
    {"ph":"X","name":"Memcpy HtoD (Pageable -> Device)","cat":"gpu_memcpy","ts":1250,"dur":100},
    {"ph":"X","name":"Memcpy HtoD (Pinned -> Device)","cat":"gpu_memcpy","ts":1400,"dur":50},
    {"ph":"X","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)","cat":"kernel","ts":1700,"dur":200},
    {"ph":"X","name":"aten::mm","cat":"cpu_op","ts":1500,"dur":100},
    {"ph":"X","name":"save_checkpoint","cat":"user_annotation","ts":1900,"dur":100}])J",
                                     "t.json");
  REQUIRE(t.is_ok());
  const auto& s = t->steps.at(0);
  REQUIRE(s.duration_s == Approx(1e-3));
  REQUIRE(s.phase_s[index(Phase::kDataWait)] == Approx(300e-6));
  REQUIRE(s.phase_s[index(Phase::kH2D)] == Approx(100e-6));  // 50 of the pageable copy overlap
  REQUIRE(s.phase_s[index(Phase::kCollective)] == Approx(200e-6));
  REQUIRE(s.phase_s[index(Phase::kCheckpoint)] == Approx(100e-6));
  REQUIRE(s.pageable_h2d == 1);
  REQUIRE(s.pinned_h2d == 1);
}

TEST_CASE("bad trace input: one-line errors naming the file", "[profile]") {
  auto empty = import_pytorch_trace_text("  \n", "empty.json");
  REQUIRE(empty.status().code() == Code::kCorrupt);
  REQUIRE(empty.status().message().find("empty.json") != std::string::npos);
  auto bad = import_pytorch_trace_text(R"({"traceEvents":[{"ph":"X",)", "bad.json");
  REQUIRE(bad.status().code() == Code::kCorrupt);
  REQUIRE(bad.status().message().find("bad.json") != std::string::npos);
  auto nosteps =
      import_pytorch_trace_text(R"([{"ph":"X","name":"aten::mm","ts":1,"dur":2}])", "n.json");
  REQUIRE(nosteps.status().code() == Code::kCorrupt);
  auto wrong_ts =
      import_pytorch_trace_text(R"([{"ph":"X","name":"ProfilerStep#1","ts":{}}])", "w.json");
  REQUIRE(wrong_ts.status().code() == Code::kCorrupt);
  // Durations no profiler writes: refused with the event, not summed into every figure.
  for (const char* dur : {"-5", "1e308", "2e12"}) {
    INFO(dur);
    auto junk = import_pytorch_trace_text(
        std::string(R"([{"ph":"X","name":"ProfilerStep#1","ts":10,"dur":)") + dur + "}]", "j.json");
    REQUIRE(junk.status().code() == Code::kCorrupt);
    CHECK(junk.status().message().find("j.json: event \"ProfilerStep#1\" has dur") !=
          std::string::npos);
  }
  auto far = import_pytorch_trace_text(R"([{"ph":"X","name":"ProfilerStep#1","ts":1e19,"dur":1}])",
                                       "f.json");
  REQUIRE(far.status().code() == Code::kCorrupt);
  // A byte order mark before the JSON (an editor's save) is read past.
  auto bom = import_pytorch_trace_text(
      "\xEF\xBB\xBF"
      R"([{"ph":"X","name":"ProfilerStep#1","ts":10,"dur":5}])",
      "bom.json");
  CHECK(bom.is_ok());
  auto missing = load_traces({"/nonexistent/trace.json"});
  REQUIRE(missing.status().code() == Code::kNotFound);
  REQUIRE(missing.status().message().find("/nonexistent/trace.json") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::profile::traces_test
