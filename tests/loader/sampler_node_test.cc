#include "ckpt/loader/sampler_node.h"

#include <catch2/catch.hpp>
#include <string>

namespace ckpt::loader::sampler_node_test {
namespace {

SamplerSpec sample_spec() {
  SamplerSpec s;
  s.dataset_size = 1000000000;
  s.dataset_fingerprint = "xxh3:0123456789abcdef";
  s.seed = 0xfedcba9876543210ULL;  // above INT64_MAX: must survive the signed attribute
  s.shuffle = true;
  s.drop_last = true;
  s.world_size = 8;
  s.batch_size = 32;
  return s;
}

TEST_CASE("Loader node: spec and cursor round trip", "[loader]") {
  Node node;
  const LoaderCursor cursor{3, 123456};
  sampler_to_node(sample_spec(), cursor, &node);
  REQUIRE(node.get_string("order") == kOrderAlgorithm);
  REQUIRE(node.find_attr("rank") == nullptr);
  auto back = sampler_from_node(node);
  REQUIRE(back.is_ok());
  REQUIRE(back->first == sample_spec());
  REQUIRE(back->second == cursor);
}

TEST_CASE("Loader node: missing, ill-typed and out-of-range attributes are named", "[loader]") {
  Node good;
  sampler_to_node(sample_spec(), {1, 10}, &good);

  Node missing = good;
  missing.attrs.erase("position");
  auto r = sampler_from_node(missing);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message() == "loader: attribute \"position\" is missing");

  Node typed = good;
  typed.attrs["epoch"] = std::string("three");
  r = sampler_from_node(typed);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message() == "loader: attribute \"epoch\" is a string, expected an int64");

  Node negative = good;
  negative.attrs["world_size"] = int64_t{-1};
  r = sampler_from_node(negative);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message().find("\"world_size\" = -1") != std::string::npos);

  Node beyond = good;
  beyond.attrs["position"] = int64_t{1000000001};
  r = sampler_from_node(beyond);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().message().find("beyond dataset_size") != std::string::npos);

  Node other_order = good;
  other_order.attrs["order"] = std::string("torch-randperm");
  r = sampler_from_node(other_order);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().code() == Code::kUnsupported);

  Node no_order = good;
  no_order.attrs.erase("order");
  REQUIRE(sampler_from_node(no_order).is_ok());
}

}  // namespace
}  // namespace ckpt::loader::sampler_node_test

namespace ckpt::loader::sampler_node_test {
namespace {

TEST_CASE("Loader node: a sampler restored from a node continues the uninterrupted run",
          "[loader]") {
  SamplerSpec spec;
  spec.dataset_size = 777;
  spec.dataset_fingerprint = "fixture";
  spec.seed = 3;
  spec.world_size = 3;
  spec.batch_size = 4;
  ResumableSampler uninterrupted(spec, 2), first(spec, 2);
  for (int i = 0; i < 90; ++i) {  // ~ 1.4 epochs
    const auto expected = uninterrupted.next_batch();
    if (i < 50) {
      REQUIRE(first.next_batch() == expected);
      continue;
    }
    if (i == 50) {
      Node node;
      sampler_to_node(first.spec(), first.cursor(), &node);
      auto restored = sampler_from_node(node);
      REQUIRE(restored.is_ok());
      auto s = ResumableSampler::create(restored->first, 2, restored->second);
      REQUIRE(s.is_ok());
      first = std::move(s).value();
    }
    REQUIRE(first.next_batch() == expected);
  }
}

TEST_CASE("Loader node: a spec that cannot drive a sampler is refused", "[loader]") {
  SamplerSpec spec;
  spec.dataset_size = 10;
  spec.world_size = 4;
  spec.batch_size = 4;
  spec.drop_last = true;  // G = 16 > N
  Node node;
  sampler_to_node(spec, {}, &node);
  auto r = sampler_from_node(node);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE(r.status().code() == Code::kCorrupt);
  REQUIRE(r.status().message().find("leaves no step in an epoch") != std::string::npos);
}

}  // namespace
}  // namespace ckpt::loader::sampler_node_test
