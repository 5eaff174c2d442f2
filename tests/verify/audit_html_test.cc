// report_to_html_table: the audit section of `ckpt report` as a real table.
#include <catch2/catch.hpp>
#include <string>

#include "verify/audit/audit.h"

using namespace ckpt;
using namespace ckpt::verify;

namespace {
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("the audit renders as an HTML table with status badges and findings", "[verify]") {
  CheckpointView v;
  v.path = "run/<ckpt>&.pt";
  v.format = CheckpointFormat::kTorchSave;
  v.model.found = true;
  v.model.tensors.push_back({});
  v.model.evidence = "model: 1 tensor <script>alert(1)</script>";
  v.findings.push_back({Severity::kWarning, std::nullopt, "a \"quoted\" note", false});
  AuditReport r = apply_rules(v, {AuditComponent::kModel, AuditComponent::kOptimizer});
  const std::string h = report_to_html_table(r);
  CHECK(count(h, "<table class=\"audit\">") == 1);
  CHECK(count(h, "<th>") == 5);
  // One row per component of the contract.
  CHECK(count(h, "<tr><td>") == r.components.size());
  CHECK(h.find("<td>model</td><td><span class=\"badge ok\"") != std::string::npos);
  // optimizer is required and missing: red; loader is outside --require: amber.
  CHECK(h.find("<td>optimizer</td><td><span class=\"badge bad\"") != std::string::npos);
  CHECK(h.find("<td>loader</td><td><span class=\"badge warn\"") != std::string::npos);
  CHECK(h.find(">missing</span>") != std::string::npos);
  // The consequence and fix of a missing component are cells of their own.
  CHECK(h.find("<td>save optimizer.state_dict()") != std::string::npos);
  // Text from the checkpoint is escaped.
  CHECK(h.find("<script>") == std::string::npos);
  CHECK(h.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(h.find("a &quot;quoted&quot; note") != std::string::npos);
  CHECK(count(h, "<ul class=\"findings\">") == 1);
  CHECK(count(h, "<li>") == r.findings.size());
}

#include "verify/audit/diff.h"

TEST_CASE("diff_views lists dtype and shape changes and digests", "[verify]") {
  CheckpointView a, b;
  a.path = "a";
  b.path = "b";
  a.model.found = b.model.found = true;
  a.model.tensors.push_back({"w", DType::kFloat32, {8, 4}, "cpu", "", "", 128});
  a.model.tensors.push_back({"v", DType::kFloat32, {2}, "cpu", "", "", 8});
  b.model.tensors.push_back({"w", DType::kBFloat16, {8, 4}, "cpu", "", "", 64});
  b.model.tensors.push_back({"v", DType::kFloat32, {3}, "cpu", "", "", 12});
  b.model.tensors.push_back({"u", DType::kFloat32, {1}, "cpu", "", "", 4});
  a.config_digest = b.config_digest = "00ff";
  a.environment_digest = "01";
  b.environment_digest = "02";
  const CheckpointDiff d = diff_views(a, b);
  REQUIRE(d.changed.size() == 2);
  CHECK(d.changed[0].name == "v");
  CHECK(d.changed[0].a == "float32 [2]");
  CHECK(d.changed[0].b == "float32 [3]");
  CHECK(d.changed[1].b == "bfloat16 [8,4]");
  CHECK(d.only_b == std::vector<std::string>{"u"});
  CHECK(d.only_a.empty());
  CHECK(d.differences == 4);  // two changed, one only in B, the environment digest
  const auto j = diff_to_json(d);
  CHECK(j["digests"]["config"]["a"] == "00ff");
  CHECK(j["digests"]["environment"]["b"] == "02");
  CHECK(j["tensors"]["changed"][1]["a"] == "float32 [8,4]");
  const CheckpointDiff same = diff_views(a, a);
  CHECK(same.differences == 0);
  CHECK(diff_to_text(same).find("no differences") != std::string::npos);
}
