// [dist] tests of ProcessGroupContext and the checkpoint barrier: W ranks as threads of this
// process, each with its own TCPStore client and Gloo group on loopback.
#include "ckpt/dist/process_group.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <thread>

#include "ckpt/dist/checkpoint_sync.h"
#include "tests/dist/launcher.h"

namespace {

using ckpt::dist::ProcessGroupContext;
using ckpt::dist::ProcessGroupOptions;

ProcessGroupOptions options_for(const std::string& port_file, int rank, int world, int timeout_ms) {
  ProcessGroupOptions o;
  o.rank = rank;
  o.world_size = world;
  o.port_file = port_file;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

// Runs body(rank, group) on `world` threads, each with its own group; returns each rank's failure
// text ("" when the body ran and returned normally). Catch2's assertions are not thread-safe: the
// bodies only record what they saw, the test checks it afterwards on the main thread.
std::vector<std::string> on_ranks(int world, int timeout_ms,
                                  const std::function<void(int, ProcessGroupContext&)>& body) {
  static int launches = 0;
  const std::string dir = ckpt::dist_test::make_temp_dir("ckpt-dist-pg");
  const std::string port_file = dir + "/port-" + std::to_string(launches++);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto group = ProcessGroupContext::create(options_for(port_file, r, world, timeout_ms));
      if (!group.is_ok()) {
        errors[static_cast<size_t>(r)] = group.status().to_string();
        return;
      }
      body(r, **group);
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("allreduce_mean is the exact mean, bit-identical on every rank", "[dist]") {
  constexpr int kWorld = 3;
  std::vector<std::vector<torch::Tensor>> results(kWorld);
  std::vector<std::string> statuses(kWorld);
  std::vector<int> ports(kWorld, -1);
  std::vector<int> identity(kWorld, -1);
  auto errors = on_ranks(kWorld, 5000, [&](int r, ProcessGroupContext& g) {
    ports[static_cast<size_t>(r)] = g.port();
    identity[static_cast<size_t>(r)] = g.rank() * 100 + g.world_size();
    // Values whose sums are exact in float: the mean is known in closed form.
    std::vector<torch::Tensor> ts = {torch::full({2, 3}, 1.0f + r),
                                     torch::arange(5).to(torch::kFloat) * (r + 1),
                                     torch::full({1}, 0.25f * r)};
    statuses[static_cast<size_t>(r)] = g.allreduce_mean(ts).to_string();
    results[static_cast<size_t>(r)] = ts;
  });
  for (int r = 0; r < kWorld; ++r) {
    INFO("rank " << r << ": " << errors[r] << statuses[r]);
    REQUIRE(errors[r].empty());
    REQUIRE(statuses[r] == "ok");
    REQUIRE(identity[r] == r * 100 + kWorld);
    REQUIRE(ports[r] > 0);
    REQUIRE(ports[r] == ports[0]);
  }
  CHECK(torch::equal(results[0][0], torch::full({2, 3}, 2.0f)));  // (1 + 2 + 3) / 3
  CHECK(torch::equal(results[0][1], torch::arange(5).to(torch::kFloat) * 2));
  CHECK(results[0][2].item<float>() == 0.25f);  // (0 + 0.25 + 0.5) / 3
  for (int r = 1; r < kWorld; ++r) {
    for (size_t i = 0; i < results[0].size(); ++i) {
      const auto& a = results[0][i];
      const auto& b = results[static_cast<size_t>(r)][i];
      REQUIRE(std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0);
    }
  }
}

TEST_CASE("allreduce_mean of inexact sums agrees bitwise across ranks and repeated runs",
          "[dist]") {
  constexpr int kWorld = 3;
  auto run_once = [&] {
    std::vector<torch::Tensor> out(kWorld);
    auto errors = on_ranks(kWorld, 5000, [&](int r, ProcessGroupContext& g) {
      auto gen = at::detail::createCPUGenerator(100 + r);
      std::vector<torch::Tensor> ts = {torch::randn({4099}, gen)};
      if (g.allreduce_mean(ts).is_ok()) out[static_cast<size_t>(r)] = ts[0];
    });
    for (const auto& e : errors) REQUIRE(e.empty());
    for (const auto& t : out) REQUIRE(t.defined());
    return out;
  };
  auto first = run_once();
  auto second = run_once();
  for (int r = 0; r < kWorld; ++r) {
    REQUIRE(torch::equal(first[static_cast<size_t>(r)], first[0]));
    REQUIRE(torch::equal(second[static_cast<size_t>(r)], first[0]));
  }
}

TEST_CASE("allreduce_mean refuses mixed dtypes before touching the network", "[dist]") {
  const std::string dir = ckpt::dist_test::make_temp_dir("ckpt-dist-pg1");
  auto group = ProcessGroupContext::create(options_for(dir + "/port", 0, 1, 2000));
  REQUIRE(group.is_ok());
  ProcessGroupContext& g = **group;
  std::vector<torch::Tensor> ts = {torch::zeros({2}), torch::zeros({2}, torch::kDouble)};
  auto s = g.allreduce_mean(ts);
  CHECK(s.code() == ckpt::Code::kInvalidArgument);
  CHECK(s.message().find("tensor 1 is Double") != std::string::npos);
  std::vector<torch::Tensor> ints = {torch::zeros({2}, torch::kLong)};
  CHECK(g.allreduce_mean(ints).code() == ckpt::Code::kInvalidArgument);
  CHECK(g.barrier().is_ok());  // the group is still usable
}

TEST_CASE("allgather returns every rank's values, lengths may differ", "[dist]") {
  constexpr int kWorld = 3;
  std::vector<std::vector<std::vector<int64_t>>> got(kWorld);
  auto errors = on_ranks(kWorld, 5000, [&](int r, ProcessGroupContext& g) {
    std::vector<int64_t> mine(static_cast<size_t>(r), int64_t{10} * r);
    mine.push_back(INT64_MIN + r);
    auto rows = g.allgather(mine);
    if (rows.is_ok()) got[static_cast<size_t>(r)] = *rows;
  });
  for (const auto& e : errors) REQUIRE(e.empty());
  const std::vector<std::vector<int64_t>> expected = {
      {INT64_MIN}, {10, INT64_MIN + 1}, {20, 20, INT64_MIN + 2}};
  for (const auto& g : got) CHECK(g == expected);
}

TEST_CASE("check_agreement names the field and every rank's value", "[dist]") {
  using ckpt::dist::check_agreement;
  CHECK(check_agreement({{1, 2}, {1, 2}}, {"a", "b"}, "x").is_ok());
  CHECK(check_agreement({}, {}, "x").is_ok());
  auto s = check_agreement({{5, 320}, {5, 288}, {5, 320}}, {"step", "position"}, "save barrier");
  CHECK(s.code() == ckpt::Code::kMismatch);
  CHECK(s.message() ==
        "save barrier: ranks disagree on position: rank 0 = 320, rank 1 = 288, rank 2 = 320");
  CHECK(check_agreement({{1}, {1, 2}}, {}, "x").message() ==
        "x: rank 1 reported 2 values, rank 0 reported 1");
  CHECK(check_agreement({{1, 2}, {1, 3}}, {}, "x").message() ==
        "x: ranks disagree on value 1: rank 0 = 2, rank 1 = 3");
}

TEST_CASE("the checkpoint barrier fails on every rank when the ranks disagree", "[dist]") {
  constexpr int kWorld = 2;
  std::vector<std::string> agree(kWorld), disagree(kWorld), plain(kWorld);
  auto errors = on_ranks(kWorld, 5000, [&](int r, ProcessGroupContext& g) {
    auto same = ckpt::dist::checkpoint_barrier(&g,
                                               [] {
                                                 return std::vector<int64_t>{7, 0, 64};
                                               },
                                               {"global_step", "epoch", "position"});
    agree[static_cast<size_t>(r)] = same().to_string();
    auto differ = ckpt::dist::checkpoint_barrier(&g,
                                                 [r] {
                                                   return std::vector<int64_t>{7, 0, 64 + r};
                                                 },
                                                 {"global_step", "epoch", "position"});
    disagree[static_cast<size_t>(r)] = differ().to_string();
    plain[static_cast<size_t>(r)] = ckpt::dist::checkpoint_barrier(&g)().to_string();
  });
  for (int r = 0; r < kWorld; ++r) {
    REQUIRE(errors[r].empty());
    CHECK(agree[r] == "ok");
    CHECK(plain[r] == "ok");
    CHECK(disagree[r].find("ranks disagree on position: rank 0 = 64, rank 1 = 65") !=
          std::string::npos);
  }
}

TEST_CASE("a peer that leaves breaks the group: a bounded error, then the same error at once",
          "[dist]") {
  std::string joined[2], first, second;
  double second_seconds = -1;
  auto errors = on_ranks(2, 2000, [&](int r, ProcessGroupContext& g) {
    joined[r] = g.barrier().to_string();
    if (r == 1) return;  // leaves: its group is destroyed
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    first = g.barrier().to_string();
    const auto t0 = std::chrono::steady_clock::now();
    second = g.barrier().to_string();
    second_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  REQUIRE(joined[0] == "ok");
  REQUIRE(joined[1] == "ok");
  CHECK(first.find("barrier failed on rank 0 of 2") != std::string::npos);
  CHECK(second == first);
  CHECK(second_seconds < 0.5);  // no second wait on the network
}

TEST_CASE("bad process group options are refused", "[dist]") {
  ProcessGroupOptions o;
  o.rank = 2;
  o.world_size = 2;
  o.port_file = "/tmp/unused";
  CHECK(ProcessGroupContext::create(o).status().code() == ckpt::Code::kInvalidArgument);
  o.rank = 0;
  o.port_file.clear();
  auto s = ProcessGroupContext::create(o).status();
  CHECK(s.code() == ckpt::Code::kInvalidArgument);
  CHECK(s.message().find("port file") != std::string::npos);
  o.port_file = "/tmp/unused";
  o.timeout = std::chrono::milliseconds(0);
  CHECK(ProcessGroupContext::create(o).status().code() == ckpt::Code::kInvalidArgument);
}

TEST_CASE("a rank whose rank 0 never publishes a port gives up after the timeout", "[dist]") {
  const std::string dir = ckpt::dist_test::make_temp_dir("ckpt-dist-noport");
  auto s = ProcessGroupContext::create(options_for(dir + "/never", 1, 2, 300)).status();
  CHECK(s.code() == ckpt::Code::kIoError);
  CHECK(s.message().find("did not appear within 300 ms") != std::string::npos);
}
