// The component names (ckpt/format/component.h): one table per enum, and the parsers that take
// names from outside (flags, JSON, Python) through it.
#include "ckpt/format/component.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace ckpt::component_test {
namespace {

TEST_CASE("every component name round-trips through the one table", "[format]") {
  std::set<std::string> seen;
  for (Component c : kComponents) {
    const std::string name = component_name(c);
    INFO(name);
    REQUIRE(component_from_name(name) == c);
    REQUIRE(seen.insert(name).second);  // no two components share a name
  }
  CHECK(std::string(component_name(Component::kRng)) == "rng");  // the format's group name
  for (AuditComponent c : kAuditComponents) {
    const std::string name = component_name(c);
    INFO(name);
    REQUIRE(audit_component_from_name(name) == c);
  }
  CHECK(std::string(component_name(AuditComponent::kGradScaler)) == "grad_scaler");

  // parse_components and component_names are inverses over the whole set.
  auto all = parse_components(component_names({std::begin(kComponents), std::end(kComponents)}));
  REQUIRE(all.is_ok());
  CHECK(all->size() == std::size(kComponents));
}

TEST_CASE("an unknown component name is refused, naming it and the accepted ones", "[format]") {
  CHECK_FALSE(component_from_name("rngs").has_value());
  CHECK_FALSE(component_from_name("Model").has_value());    // names are exact
  CHECK_FALSE(component_from_name("rng_cpu").has_value());  // an audit name, not a group
  CHECK_FALSE(audit_component_from_name("rng").has_value());

  auto parsed = parse_components({"model", "optimiser"});
  REQUIRE(parsed.status().code() == Code::kInvalidArgument);
  const std::string msg = parsed.status().message();
  INFO(msg);
  CHECK(msg.find("unknown component \"optimiser\"") != std::string::npos);
  CHECK(msg.find("model, optimizer, scheduler, rng, loader, train, extra") != std::string::npos);
  CHECK(parse_audit_components({"counters", "train"}).status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace ckpt::component_test
