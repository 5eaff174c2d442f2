// ckpt convert: every tensor of a foreign checkpoint comes back bit for bit through
// store::read_rank, under its source path; optimizers, schedulers, RNG and counters land in their
// components; what cannot be represented is listed; damaged input and a non-empty OUT_DIR are
// refused. Fixtures: fixtures/foreign (the audit's, real libraries) and fixtures/convert
// (make_convert_fixtures.py: values.pt plus the tensor bytes torch itself laid out).
#define CKPT_TEST_WITH_OURS_READER
#include "verify/convert/convert.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "ckpt/base/hash.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_readers.h"
#include "tests/common/test_util.h"
#include "verify/audit/audit.h"
#include "verify/convert/encode.h"
#include "verify/convert/sources.h"
#include "verify/ours/ours_reader.h"

namespace fs = std::filesystem;
using namespace ckpt;
using namespace ckpt::verify;
using ckpt::testing::TempDir;

namespace convert_test {
namespace {

const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";

struct Bytes {
  DType dtype;
  std::vector<int64_t> shape;
  std::string data;
};

Bytes bytes_of(const Tensor& t) {
  return {t.dtype, t.shape, std::string(static_cast<const char*>(t.data), t.nbytes)};
}

std::string child_path(const std::string& prefix, bool labelled_root, const std::string& key,
                       bool list) {
  if (prefix.empty()) return key;
  if (labelled_root) return prefix + ":" + key;
  return list ? prefix + "[" + key + "]" : prefix + "." + key;
}

// Every tensor of a source tree, by the path convert reports ("model.fc.weight", "a[0]",
// "optimizer.pt:state.0.exp_avg"), read by the verify readers. Opaque objects are not entered.
void source_tensors(const Value* v, const std::string& path, bool labelled_root,
                    const TensorFetch& fetch, std::map<std::string, Bytes>* out, int depth) {
  if (v == nullptr || depth > 64) return;
  if (v->kind == Kind::kTensor) {
    auto t = fetch(*v->tensor);
    if (t.is_ok()) (*out)[path] = bytes_of(*t);
    return;
  }
  if (v->kind == Kind::kDict) {
    for (const auto& [k, x] : v->entries) {
      const std::string key =
          k->kind == Kind::kStr ? convert::printable(k->s) : std::to_string(k->i);
      source_tensors(x, child_path(path, labelled_root, key, false), false, fetch, out, depth + 1);
    }
  } else if (v->kind == Kind::kList || v->kind == Kind::kTuple) {
    for (size_t i = 0; i < v->items.size(); ++i)
      source_tensors(v->items[i], child_path(path, labelled_root, std::to_string(i), true), false,
                     fetch, out, depth + 1);
  }
}

// Every tensor of an output group, by the source path it came from.
void output_tensors(const Node& n, const std::string& prefix, bool labelled_root,
                    std::map<std::string, Bytes>* out) {
  const std::string kind = n.get_string("ckpt.kind", "dict");
  const bool list = kind == "list" || kind == "tuple";
  const auto bytes_names = n.get_strings("ckpt.bytes");
  const std::set<std::string> raw(bytes_names.begin(), bytes_names.end());
  const bool plain = n.get_bool("ckpt.plain");  // {"value": v} stands for v itself
  for (const auto& [k, t] : n.tensors) {
    if (raw.count(k) != 0) continue;
    (*out)[plain ? prefix : child_path(prefix, labelled_root, k, list)] = bytes_of(t);
  }
  for (const auto& [k, c] : n.children)
    output_tensors(c, child_path(prefix, labelled_root, k, list), false, out);
}

struct Converted {
  convert::ConvertReport report;
  Node root;  // read back through the store, hashes verified
};

Converted convert_ok(const fs::path& in, const std::string& out) {
  auto r = convert::convert_checkpoint(Env::posix(), test::all_readers(), in.string(), out);
  INFO(in.string() << ": " << (r.is_ok() ? "" : r.status().to_string()));
  REQUIRE(r.is_ok());
  auto latest = store::find_latest(Env::posix(), out);
  REQUIRE(latest.is_ok());
  auto root = store::read_rank(Env::posix(), latest->dir, 0);
  REQUIRE(root.is_ok());
  return {*r, std::move(*root)};
}

const Node* group_at(const Node& root, const std::string& to) {
  const Node* n = &root;
  std::string rest = to.substr(1);
  while (n != nullptr && !rest.empty()) {
    const size_t s = rest.find('/');
    n = n->find_child(rest.substr(0, s));
    rest = s == std::string::npos ? "" : rest.substr(s + 1);
  }
  return n;
}

// numpy's uint32[624] keys arrive widened to int64 (the Python package's layout); Python's
// state is 625 ints.
void numpy_rng_checked(const Node& root, const std::string& to,
                       const std::map<std::string, Bytes>& want, const std::string& prefix) {
  const Node* g = group_at(root, to);
  REQUIRE(g != nullptr);
  if (to == "/rng/python") {
    CHECK(g->get_ints("state").size() == 625);
    CHECK(g->get_int("version") == 3);
    return;
  }
  auto src = want.find(prefix + "[1]");
  REQUIRE(src != want.end());
  const Tensor* keys = g->find_tensor("keys");
  REQUIRE(keys != nullptr);
  REQUIRE(src->second.dtype == DType::kUInt32);
  REQUIRE(keys->nbytes == src->second.data.size() * 2);
  for (size_t i = 0; i < src->second.data.size() / 4; ++i) {
    uint32_t k;
    std::memcpy(&k, src->second.data.data() + 4 * i, 4);
    CHECK(static_cast<const int64_t*>(keys->data)[i] == static_cast<int64_t>(k));
  }
  CHECK(g->get_string("kind") == "MT19937");
}

// The check of the issue: every source tensor that is not listed as unmapped is in the
// checkpoint under its path with the same dtype, shape and bytes, and nothing else is.
void check_bit_exact(const fs::path& in, const Converted& c) {
  auto src = convert::open_source(Env::posix(), test::all_readers(), in.string());
  REQUIRE(src.is_ok());
  const bool labelled = src->trees.size() > 1;
  std::map<std::string, Bytes> want, got;
  for (size_t i = 0; i < src->trees.size(); ++i)
    source_tensors(src->trees[i].root, src->trees[i].label, labelled, src->fetch[i], &want, 0);
  for (const auto& m : c.report.mapped) {
    const bool whole_tree = m.to == "/extra/" + m.path;
    if (m.to != "/model" && m.to != "/optimizer" && m.to != "/scheduler" && m.to != "/extra" &&
        m.to.rfind("/rng/", 0) != 0 && !(labelled && whole_tree))
      continue;  // a part of /extra (a second optimizer...) or /train: walked with its tree
    const std::string prefix = m.path == "(top level)" ? "" : m.path;
    if (m.to == "/rng/python" || m.to == "/rng/numpy") {
      numpy_rng_checked(c.root, m.to, want, prefix);
      for (auto it = want.begin(); it != want.end();)  // keys are widened, not copied
        it = it->first.rfind(prefix, 0) == 0 ? want.erase(it) : std::next(it);
      continue;
    }
    if (m.to.rfind("/rng/", 0) == 0) {
      const Tensor* t = store::find_tensor(const_cast<Node*>(&c.root), m.to);
      REQUIRE(t != nullptr);
      got[prefix] = bytes_of(*t);
      continue;
    }
    const Node* g = group_at(c.root, m.to);
    REQUIRE(g != nullptr);
    output_tensors(*g, prefix, labelled && m.path.find(':') == std::string::npos, &got);
  }
  for (const auto& u : c.report.unmapped) {
    for (auto it = want.begin(); it != want.end();) {
      it = it->first.rfind(u.path, 0) == 0 ? want.erase(it) : std::next(it);
    }
  }
  std::set<std::string> want_names, got_names;
  for (const auto& [k, v] : want) want_names.insert(k);
  for (const auto& [k, v] : got) got_names.insert(k);
  INFO(in.string());
  CHECK(want_names == got_names);
  for (const auto& [k, w] : want) {
    auto it = got.find(k);
    if (it == got.end()) continue;
    INFO(k);
    CHECK(it->second.dtype == w.dtype);
    CHECK(it->second.shape == w.shape);
    CHECK(it->second.data == w.data);
  }
  CHECK(c.report.tensors >= want.size());
}

std::vector<fs::path> torch_save_fixtures() {
  std::vector<fs::path> out;
  for (const char* dir :
       {"foreign/torch", "foreign/torch2", "foreign/real", "foreign/lightning", "convert"}) {
    for (const auto& e : fs::directory_iterator(kFixtures / dir)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".pt" || ext == ".ckpt")) out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("every torch.save fixture converts and reads back bit for bit", "[verify][convert]") {
  size_t converted = 0;
  for (const fs::path& p : torch_save_fixtures()) {
    TempDir tmp;
    const std::string out = tmp.path() + "/run";
    auto r = convert::convert_checkpoint(Env::posix(), test::all_readers(), p.string(), out);
    if (!r.is_ok()) {
      // Refused, never half-done: TorchScript archives are programs, not state.
      INFO(p.string() << ": " << r.status().to_string());
      CHECK(p.filename() == "torchscript.pt");
      CHECK(!fs::exists(out));
      continue;
    }
    Converted c = convert_ok(p, tmp.path() + "/run2");
    check_bit_exact(p, c);
    CHECK(store::verify_checkpoint(Env::posix(), path_join(out, r->checkpoint)).problems.empty());
    ++converted;
  }
  CHECK(converted >= 30);
}

TEST_CASE("values.pt matches the bytes torch itself wrote", "[verify][convert]") {
  TempDir tmp;
  Converted c = convert_ok(kFixtures / "convert" / "values.pt", tmp.path() + "/run");
  CHECK(c.report.unmapped.empty());
  CHECK(c.report.step == 3);
  CHECK(c.report.components ==
        std::vector<std::string>{"model", "optimizer", "scheduler", "rng", "train", "extra"});
  const std::string blob =
      ckpt::testing::read_file((kFixtures / "convert" / "values.bin").string());
  const auto index = nlohmann::json::parse(
      ckpt::testing::read_file((kFixtures / "convert" / "values.index.json").string()));
  // values.index.json names: model.<key>, optimizer.state.<id>.<key>, rng.
  std::map<std::string, std::string> where = {
      {"model.", "/model/"}, {"optimizer.state.", "/optimizer/state/"}, {"rng", "/rng/cpu/state"}};
  size_t checked = 0;
  for (const auto& [name, e] : index.items()) {
    std::string path;
    for (const auto& [from, to] : where) {
      if (name.rfind(from, 0) == 0) path = to + name.substr(from.size());
    }
    // optimizer.state.0.exp_avg → /optimizer/state/0/exp_avg (the model keys keep their dots).
    if (path.rfind("/optimizer/", 0) == 0) {
      const size_t dot = path.find('.', std::strlen("/optimizer/state/"));
      path[dot] = '/';
    }
    INFO(name << " -> " << path);
    const Tensor* t = store::find_tensor(&c.root, path);
    REQUIRE(t != nullptr);
    CHECK(dtype_name(t->dtype) == e["dtype"].get<std::string>());
    CHECK(t->shape == e["shape"].get<std::vector<int64_t>>());
    REQUIRE(t->nbytes == e["nbytes"].get<size_t>());
    CHECK(std::memcmp(t->data, blob.data() + e["offset"].get<size_t>(), t->nbytes) == 0);
    ++checked;
  }
  CHECK(checked == index.size());
  CHECK(checked >= 20);
  // Counters and the scheduler as typed attributes; the optimizer in torch's layout.
  const Node* train = c.root.find_child("train");
  REQUIRE(train != nullptr);
  CHECK(train->get_int("global_step", -1) == 3);
  CHECK(train->get_int("epoch", -1) == 1);
  const Node* sched = c.root.find_child("scheduler");
  REQUIRE(sched != nullptr);
  CHECK(sched->get_int("last_epoch", -1) == 3);
  CHECK(sched->get_int("step_size", -1) == 2);
  const Node* groups = group_at(c.root, "/optimizer/param_groups");
  REQUIRE(groups != nullptr);
  CHECK(groups->get_string("ckpt.kind") == "list");
  CHECK(groups->find_child("0")->get_double("lr", -1) > 0);
  CHECK(groups->find_child("0")->get_ints("params") == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(group_at(c.root, "/optimizer/state")->get_string("ckpt.kind") == "intdict");
}

TEST_CASE("an HF Trainer folder converts with its optimizer, scheduler, RNG and counters",
          "[verify][convert]") {
  TempDir tmp;
  const fs::path in = kFixtures / "foreign" / "hf" / "checkpoint-6";
  Converted c = convert_ok(in, tmp.path() + "/run");
  CHECK(std::string(verify::format_name(c.report.format)) == "hf-trainer");
  CHECK(c.report.step == 6);
  CHECK(c.report.checkpoint == "step-000000000006");
  check_bit_exact(in, c);
  const Node* state = group_at(c.root, "/optimizer/state");
  REQUIRE(state != nullptr);
  REQUIRE_FALSE(state->children.empty());
  for (const auto& [id, ps] : state->children) {
    CHECK(ps.find_tensor("exp_avg") != nullptr);
    CHECK(ps.find_tensor("exp_avg_sq") != nullptr);
  }
  CHECK(c.root.find_child("scheduler") != nullptr);
  CHECK(group_at(c.root, "/rng/cpu") != nullptr);
  CHECK(group_at(c.root, "/rng/python") != nullptr);  // checked in check_bit_exact
  CHECK(group_at(c.root, "/rng/numpy") != nullptr);
  CHECK(c.root.find_child("train")->get_int("global_step", -1) == 6);
  // trainer_state.json stays whole, as typed attributes.
  CHECK(group_at(c.root, "/extra/trainer_state.json")->get_int("global_step", -1) == 6);
  // training_args.bin is a pickled TrainingArguments object: listed, never constructed.
  bool args = false;
  for (const auto& u : c.report.unmapped) args = args || u.path.rfind("training_args.bin", 0) == 0;
  CHECK(args);
  // The auditor reads the result as our format, with the optimizer present.
  auto audit = audit_path(test::all_readers(), Env::posix(), tmp.path() + "/run", {});
  REQUIRE(audit.is_ok());
  CHECK(audit->format == verify::CheckpointFormat::kCkptH5);
  CHECK(audit->find(AuditComponent::kOptimizer)->status == ComponentStatus::kPresent);
  CHECK(audit->find(AuditComponent::kModel)->status == ComponentStatus::kPresent);
  CHECK(audit->find(AuditComponent::kScheduler)->status == ComponentStatus::kPresent);
}

TEST_CASE("a Lightning .ckpt converts with its optimizer mapped", "[verify][convert]") {
  for (const fs::path& in : {kFixtures / "foreign" / "lightning" / "epoch_end.ckpt",
                             kFixtures / "foreign" / "real" / "lightning_manual.ckpt"}) {
    TempDir tmp;
    Converted c = convert_ok(in, tmp.path() + "/run");
    CHECK(std::string(verify::format_name(c.report.format)) == "lightning");
    const Node* state = group_at(c.root, "/optimizer/state");
    REQUIRE(state != nullptr);
    CHECK_FALSE(state->children.empty());
    CHECK(c.root.find_child("model") != nullptr);
    CHECK(c.root.find_child("train") != nullptr);
    bool from_list = false;
    for (const auto& m : c.report.mapped)
      from_list = from_list || (m.to == "/optimizer" && m.path == "optimizer_states[0]");
    CHECK(from_list);
  }
}

// The path a report maps to `to`, or "" when none does.
std::string mapped_from(const Converted& c, const std::string& to) {
  for (const auto& m : c.report.mapped)
    if (m.to == to) return m.path;
  return "";
}

TEST_CASE("library dicts convert with their own step counter and their model and not its EMA",
          "[verify][convert]") {
  struct Case {
    fs::path in;
    int64_t step;
    std::string model;  // the source of /model
  };
  const fs::path f = kFixtures / "foreign";
  for (const Case& k : {Case{f / "composer" / "ep0-ba3-rank0.pt", 3, "state.model"},
                        Case{f / "torchvision" / "amp_ema.pth", 0, "model"},
                        Case{f / "knowledge" / "nanogpt_t2.pt", 6, "model"},
                        Case{f / "knowledge" / "mmengine_iter.pth", 6, "state_dict"}}) {
    INFO(k.in);
    TempDir tmp;
    Converted c = convert_ok(k.in, tmp.path() + "/run");
    CHECK(c.report.step == k.step);
    CHECK(mapped_from(c, "/model") == k.model);
  }
}

TEST_CASE("a DCP folder converts with its optimizer mapped", "[verify][convert]") {
  for (const fs::path& in : {kFixtures / "foreign" / "dcp" / "step-6",
                             kFixtures / "foreign" / "real" / "torchtitan" / "step-8"}) {
    TempDir tmp;
    Converted c = convert_ok(in, tmp.path() + "/run");
    CHECK(std::string(verify::format_name(c.report.format)) == "dcp");
    check_bit_exact(in, c);
    const Node* state = group_at(c.root, "/optimizer/state");
    REQUIRE(state != nullptr);
    CHECK_FALSE(state->children.empty());
    CHECK(c.root.find_child("model") != nullptr);
  }
}

TEST_CASE("a DCP Hugging Face shard folder converts to its global tensors, as torch reads them",
          "[verify][convert]") {
  const fs::path dir = kFixtures / "hf_dcp_shards";
  TempDir tmp;
  Converted c = convert_ok(dir / "shards", tmp.path() + "/run");
  CHECK(std::string(verify::format_name(c.report.format)) == "dcp-hf-shards");
  const Node* model = group_at(c.root, "/model");
  REQUIRE(model != nullptr);
  std::ifstream in(dir / "FACTS.json");
  const nlohmann::json facts = nlohmann::json::parse(in);  // torch's own HuggingFaceStorageReader
  REQUIRE(model->tensors.size() == facts["tensors"].size());
  for (const auto& [name, t] : facts["tensors"].items()) {
    INFO(name);
    auto it = model->tensors.find(name);
    REQUIRE(it != model->tensors.end());
    CHECK(it->second.shape == t["size"].get<std::vector<int64_t>>());
    const auto want = t["values"].get<std::vector<float>>();
    REQUIRE(it->second.nbytes == want.size() * sizeof(float));
    CHECK(std::memcmp(it->second.data, want.data(), it->second.nbytes) == 0);
  }
  SECTION("a deleted shard file is refused, naming it, and nothing is written") {
    const fs::path copy = tmp.path() + "/shards";
    fs::copy(dir / "shards", copy);
    fs::remove(copy / "shard-00002-model-00001-of-00003.safetensors");
    auto r = convert::convert_checkpoint(Env::posix(), test::all_readers(), copy.string(),
                                         tmp.path() + "/out");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kCorrupt);
    CHECK(r.status().message().find("shard-00002-model-00001-of-00003.safetensors") !=
          std::string::npos);
    CHECK(!fs::exists(tmp.path() + "/out"));
  }
}

TEST_CASE("what cannot be represented is listed, and the rest is written", "[verify][convert]") {
  TempDir tmp;
  Converted c = convert_ok(kFixtures / "convert" / "unmappable.pt", tmp.path() + "/run");
  std::map<std::string, std::string> why;
  for (const auto& u : c.report.unmapped) why[u.path] = u.why;
  CHECK(why.count("user_object") == 1);
  CHECK(why["user_object"].find("__main__.Opaque") != std::string::npos);
  CHECK(why.count("tags") == 1);
  CHECK(why.count("huge") == 1);
  CHECK(why.count("meta") == 1);
  CHECK(why.size() == 4);
  CHECK(group_at(c.root, "/model")->find_tensor("w") != nullptr);
  const Node* extra = c.root.find_child("extra");
  REQUIRE(extra != nullptr);
  CHECK(extra->get_string("note") == "kept");
  const auto skipped = extra->get_strings("ckpt.skipped");
  CHECK(std::set<std::string>(skipped.begin(), skipped.end()) ==
        std::set<std::string>{"user_object", "tags", "huge", "meta"});
}

TEST_CASE("a file holding one tensor converts as a plain value", "[verify][convert]") {
  TempDir tmp;
  const fs::path in = kFixtures / "convert" / "plain_tensor.pt";
  Converted c = convert_ok(in, tmp.path() + "/run");
  CHECK(c.report.unmapped.empty());
  check_bit_exact(in, c);
  const Node* extra = c.root.find_child("extra");
  REQUIRE(extra != nullptr);
  CHECK(extra->get_bool("ckpt.plain"));
  const Tensor* t = extra->find_tensor("value");
  REQUIRE(t != nullptr);
  CHECK(t->shape == std::vector<int64_t>{3, 3});
  // arange(12).reshape(3, 4)[:, 1:]: a strided view, gathered in C order.
  const float* f = static_cast<const float*>(t->data);
  CHECK(std::vector<float>(f, f + 9) == std::vector<float>{1, 2, 3, 5, 6, 7, 9, 10, 11});
}

TEST_CASE("damaged and foreign input is refused with one message", "[verify][convert]") {
  struct Case {
    fs::path in;
    Code code;
  };
  const fs::path d = kFixtures / "foreign" / "damaged";
  for (const Case& k :
       {Case{d / "truncated.pt", Code::kCorrupt}, Case{d / "random_bytes.pt", Code::kCorrupt},
        Case{d / "bitflip.pt", Code::kCorrupt}, Case{d / "zip_slip.pt", Code::kCorrupt},
        Case{d / "not_a_checkpoint.txt", Code::kCorrupt},
        Case{kFixtures / "foreign" / "torch" / "torchscript.pt", Code::kUnsupported},
        Case{kFixtures / "nonexistent.pt", Code::kNotFound}}) {
    TempDir tmp;
    auto r = convert::convert_checkpoint(Env::posix(), test::all_readers(), k.in.string(),
                                         tmp.path() + "/run");
    INFO(k.in.string() << ": " << (r.is_ok() ? "converted" : r.status().to_string()));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == k.code);
    CHECK(r.status().message().find('\n') == std::string::npos);
    CHECK(!fs::exists(tmp.path() + "/run"));
  }
}

TEST_CASE("an OUT_DIR that is not empty is refused and left alone", "[verify][convert]") {
  TempDir tmp;
  const std::string out = tmp.path() + "/run";
  const fs::path in = kFixtures / "convert" / "values.pt";
  Converted first = convert_ok(in, out);
  auto before = store::list_checkpoints(Env::posix(), out);
  REQUIRE(before.is_ok());
  auto again = convert::convert_checkpoint(Env::posix(), test::all_readers(), in.string(), out);
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.status().code() == Code::kInvalidArgument);
  CHECK(again.status().message().find("not empty") != std::string::npos);
  auto after = store::list_checkpoints(Env::posix(), out);
  REQUIRE(after.is_ok());
  CHECK(after->size() == before->size());
  // A file is refused too; an empty directory is accepted.
  ckpt::testing::write_file(tmp.path() + "/file", "x");
  CHECK(convert::convert_checkpoint(Env::posix(), test::all_readers(), in.string(),
                                    tmp.path() + "/file")
            .status()
            .code() == Code::kInvalidArgument);
  fs::create_directory(tmp.path() + "/empty");
  CHECK(convert::convert_checkpoint(Env::posix(), test::all_readers(), in.string(),
                                    tmp.path() + "/empty")
            .is_ok());
}

TEST_CASE("Accelerate folders, sharded and single safetensors convert bit for bit",
          "[verify][convert]") {
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {kFixtures / "foreign" / "accelerate" / "plain", "accelerate"},
      {kFixtures / "foreign" / "accelerate" / "with_cursor", "accelerate"},
      {kFixtures / "foreign" / "real" / "sharded", "hf-model"},
      {kFixtures / "foreign" / "safetensors" / "mlp.safetensors", "safetensors"}};
  for (const auto& [in, format] : cases) {
    TempDir tmp;
    Converted c = convert_ok(in, tmp.path() + "/run");
    INFO(in.string());
    CHECK(std::string(verify::format_name(c.report.format)) == format);
    CHECK(c.report.unmapped.empty());
    check_bit_exact(in, c);
    REQUIRE(c.root.find_child("model") != nullptr);
    CHECK_FALSE(c.root.find_child("model")->tensors.empty());
    if (format == "accelerate") CHECK(group_at(c.root, "/optimizer/state") != nullptr);
  }
}

namespace {

// Every string attribute value anywhere under `n` (arrays of strings included).
void collect_strings(const Node& n, std::set<std::string>* out) {
  for (const auto& [k, v] : n.attrs) {
    if (const auto* s = std::get_if<std::string>(&v)) out->insert(*s);
    if (const auto* l = std::get_if<std::vector<std::string>>(&v))
      out->insert(l->begin(), l->end());
  }
  for (const auto& [k, c] : n.children) collect_strings(c, out);
}

}  // namespace

TEST_CASE("convert reads NaN / Infinity in trainer_state.json as null, never inside strings",
          "[verify][convert]") {
  TempDir tmp;
  const fs::path in = fs::path(tmp.path()) / "checkpoint-6";
  fs::copy(kFixtures / "foreign" / "hf" / "checkpoint-6", in, fs::copy_options::recursive);
  testing::write_file((in / "trainer_state.json").string(),
                      "{\"global_step\": 6, \"epoch\": 1.5, \"run_name\": \"runs/NaN-sweep\",\n"
                      " \"note\": \"Infinity and -Infinity \\\"NaN\\\"\",\n"
                      " \"log_history\": [{\"step\": 2, \"loss\": NaN, \"grad_norm\": Infinity},\n"
                      "                   {\"step\": 4, \"loss\": -Infinity}]}\n");
  Converted c = convert_ok(in, tmp.path() + "/run");
  CHECK(c.report.step == 6);
  std::set<std::string> strings;
  collect_strings(c.root, &strings);
  CHECK(strings.count("runs/NaN-sweep") == 1);
  CHECK(strings.count("Infinity and -Infinity \"NaN\"") == 1);
  CHECK(strings.count("runs/null-sweep") == 0);
}

}  // namespace convert_test
