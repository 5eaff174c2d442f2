// `ckpt scan`'s library: the exploit corpus of fixtures/scan/exploits (every file dangerous,
// nothing executed), no false alarm on the real checkpoints of fixtures/foreign, the weights_only
// prediction against what PyTorch 2.x really did (fixtures/scan/weights_only_observed.json), and
// the pickle reader's account of globals (called or referenced, offsets, truncated streams).
#include "verify/scan/scan.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/common/test_readers.h"
#include "verify/audit/audit.h"
#include "verify/pickle/pickle_reader.h"

using namespace ckpt;
using namespace ckpt::verify;
namespace fs = std::filesystem;
using namespace std::string_literals;

namespace {

const char* kMarker = "/tmp/ckpt-scan-marker-must-not-exist";  // make_exploits.py's MARKER

fs::path fixtures() { return fs::path(CKPT_SOURCE_DIR) / "fixtures"; }

bool any_dangerous(const ScanReport& r) {
  for (const auto& f : r.files)
    for (const auto& g : f.globals)
      if (g.risk == Risk::kDangerous) return true;
  return false;
}

std::string describe(const ScanReport& r) { return scan_report_to_text(r); }

ScanReport scan_bytes(const std::string& name, const std::string& bytes) {
  auto f = memory_file(name, bytes);
  auto s = scan_file(*f, name);
  INFO(s.status().to_string());
  REQUIRE(s.is_ok());
  ScanReport r;
  r.path = name;
  r.format = s->format;
  r.files.push_back(std::move(s).value());
  return r;
}

const ScanGlobal* find_global(const ScanReport& r, const std::string& qual) {
  for (const auto& f : r.files)
    for (const auto& g : f.globals)
      if (g.module + "." + g.name == qual) return &g;
  return nullptr;
}

}  // namespace

TEST_CASE("every exploit family in the corpus is dangerous, and nothing runs", "[verify]") {
  ::unlink(kMarker);
  int files = 0;
  for (const auto& e : fs::directory_iterator(fixtures() / "scan" / "exploits")) {
    auto r = scan_path(Env::posix(), e.path().string());
    INFO(e.path().string() << ": " << r.status().to_string());
    REQUIRE(r.is_ok());
    INFO(describe(*r));
    CHECK_FALSE(r->safe());
    CHECK(any_dangerous(*r));
    ++files;
  }
  CHECK(files >= 45);
  CHECK_FALSE(fs::exists(kMarker));  // the scanner executed nothing
}

TEST_CASE("no false alarm: every real checkpoint fixture is safe", "[verify]") {
  for (const char* dir : {"torch", "torch2", "hf", "accelerate", "lightning", "dcp", "safetensors",
                          "deepspeed", "real", "dcp_diff", "accelerate_ddp"}) {
    for (const auto& e : fs::recursive_directory_iterator(fixtures() / "foreign" / dir)) {
      if (!e.is_regular_file() || e.path().filename() == "malicious.pt") continue;
      auto r = scan_path(Env::posix(), e.path().string());
      if (!r.is_ok()) {
        // Files of no pickle-bearing format (config.json) are not scan's business.
        CHECK(r.status().code() == Code::kUnsupported);
        continue;
      }
      INFO(e.path().string() << "\n" << describe(*r));
      CHECK(r->safe());
      for (const auto& f : r->files) CHECK(f.errors.empty());
    }
  }
  auto folder = scan_path(Env::posix(), (fixtures() / "foreign" / "hf" / "checkpoint-6").string());
  REQUIRE(folder.is_ok());
  CHECK(folder->format == "folder");
  CHECK(folder->safe());
  CHECK(folder->has_framework());  // TrainingArguments in training_args.bin
  CHECK(folder->files.size() >= 5);
}

TEST_CASE("weights_only prediction matches what PyTorch 2.x did with each fixture", "[verify]") {
  std::ifstream in(fixtures() / "scan" / "weights_only_observed.json");
  REQUIRE(in.good());
  nlohmann::json observed = nlohmann::json::parse(in);
  REQUIRE(observed["files"].size() >= 25);
  for (const auto& [rel, want] : observed["files"].items()) {
    auto r = scan_path(Env::posix(), (fixtures() / "foreign" / rel).string());
    INFO(rel << ": " << r.status().to_string());
    REQUIRE(r.is_ok());
    INFO(describe(*r));
    nlohmann::json got = scan_report_to_json(*r)["weights_only"];
    CHECK(got["loads"] == want["loads"]);
    CHECK(got["needs"] == want["needs"]);
  }
}

TEST_CASE("scan --json has exactly the documented keys", "[verify]") {
  auto r =
      scan_path(Env::posix(), (fixtures() / "scan" / "exploits" / "os_system_p2.pkl").string());
  REQUIRE(r.is_ok());
  nlohmann::json j = scan_report_to_json(*r);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  CHECK(keys ==
        std::set<std::string>{"path", "format", "safe", "globals", "weights_only", "errors"});
  CHECK(j["safe"] == false);
  CHECK(j["format"] == "pickle");
  REQUIRE(j["globals"].size() == 1);
  const auto& g = j["globals"][0];
  CHECK(g["module"] == "posix");
  CHECK(g["name"] == "system");
  CHECK(g["risk"] == "dangerous");
  CHECK(g["called"] == true);
  CHECK(g["where"] == "os_system_p2.pkl@2");
  CHECK(j["weights_only"]["loads"] == false);
  CHECK(j["weights_only"]["needs"].empty());  // never suggests allowing posix.system
}

TEST_CASE("called vs referenced, and the risk of what is called", "[verify]") {
  // protocol 0: GLOBAL collections.OrderedDict referenced inside a list, colorsys called.
  std::string p = "(ccollections\nOrderedDict\nccolorsys\nrgb_to_hsv\n(I0\nI0\nI0\ntRl.";
  ScanReport r = scan_bytes("t.pkl", p);
  const ScanGlobal* od = find_global(r, "collections.OrderedDict");
  const ScanGlobal* cs = find_global(r, "colorsys.rgb_to_hsv");
  REQUIRE(od != nullptr);
  REQUIRE(cs != nullptr);
  CHECK_FALSE(od->called);
  CHECK(od->risk == Risk::kSafe);
  CHECK(cs->called);
  CHECK(cs->risk == Risk::kDangerous);  // a callable outside every list, called
  CHECK(cs->where == "t.pkl@26");

  // Referenced only, outside the lists: unknown, not dangerous.
  ScanReport u = scan_bytes("u.pkl", "ccolorsys\nrgb_to_hsv\n.");
  CHECK(find_global(u, "colorsys.rgb_to_hsv")->risk == Risk::kUnknown);
  CHECK(u.safe());

  // NEWOBJ with no arguments allocates; BUILD on the object calls __setstate__.
  std::string newobj =
      "\x80\x02"
      "cmymod\nThing\n)\x81.";
  CHECK_FALSE(find_global(scan_bytes("n.pkl", newobj), "mymod.Thing")->called);
  std::string build =
      "\x80\x02"
      "cmymod\nThing\n)\x81}b.";
  CHECK(find_global(scan_bytes("b.pkl", build), "mymod.Thing")->called);
}

TEST_CASE("io.BytesIO holds bytes: safe, and a pickle kept in one is still scanned", "[verify]") {
  // pickle.dumps({"a": io.BytesIO(b"hi")}, protocol=2) by CPython 3.11: NEWOBJ then BUILD.
  const std::string p2 =
      "\x80\x02}q\x00X\x01\x00\x00\x00"
      "aq\x01"
      "c_io\nBytesIO\nq\x02)\x81q\x03"
      "c_"
      "codecs\nencode\nq\x04X\x02\x00\x00\x00hiq\x05X\x06\x00\x00\x00latin1q\x06\x86q\x07Rq\x08K"
      "\x00N\x87q\x09"
      "bs."s;
  ScanReport r = scan_bytes("b.pkl", p2);
  INFO(describe(r));
  const ScanGlobal* g = find_global(r, "_io.BytesIO");
  REQUIRE(g != nullptr);
  CHECK(g->called);
  CHECK(g->risk == Risk::kSafe);
  CHECK(r.safe());
  CHECK(classify_use(GlobalUse{"io", "BytesIO", 0, true, "", ""}) == Risk::kSafe);
  CHECK(classify_use(GlobalUse{"io", "FileIO", 0, true, "", ""}) == Risk::kDangerous);
  CHECK(classify_use(GlobalUse{"_io", "open", 0, true, "", ""}) == Risk::kDangerous);

  // The same with protocol 4, the buffer holding a pickle that calls posix.system.
  const std::string nested =
      "\x80\x04\x95"
      "B\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01"
      "a\x94\x8c\x03_io\x94\x8c\x07"
      "BytesIO\x94\x93\x94)\x81\x94"
      "C\x1c\x80\x02"
      "cposix\nsystem\nX\x04\x00\x00\x00true\x85R.\x94K\x00N\x87\x94"
      "bs."s;
  ScanReport n = scan_bytes("n.pkl", nested);
  INFO(describe(n));
  CHECK_FALSE(n.safe());
  const ScanGlobal* sys = find_global(n, "posix.system");
  REQUIRE(sys != nullptr);
  CHECK(sys->where.find(">nested") != std::string::npos);
}

TEST_CASE("getattr: a bound method of a framework object is not code execution", "[verify]") {
  // getattr(torch.optim.lr_scheduler.OneCycleLR.__new__(...), "_annealing_cos"), as torch 1.x
  // saved OneCycleLR's anneal_func.
  std::string m =
      "\x80\x02"
      "c__builtin__\ngetattr\n"
      "ctorch.optim.lr_scheduler\nOneCycleLR\n)\x81"
      "X\x0e\x00\x00\x00_annealing_cos\x86R."s;
  ScanReport r = scan_bytes("m.pkl", m);
  CHECK(find_global(r, "__builtin__.getattr")->risk == Risk::kFramework);
  CHECK(r.safe());
  // The same getattr on a module-level global (os) or then called is dangerous.
  std::string g =
      "\x80\x02"
      "c__builtin__\ngetattr\n"
      "ctorch.optim.lr_scheduler\nOneCycleLR\n)\x81"
      "X\x06\x00\x00\x00system\x86R"
      "X\x01\x00\x00\x00x\x85R."s;
  CHECK_FALSE(scan_bytes("g.pkl", g).safe());
}

TEST_CASE("a truncated or damaged stream reports what it saw before the error", "[verify]") {
  std::string p =
      "\x80\x02"
      "cposix\nsystem\nX\x04\x00\x00\x00true\x85R"s;  // no STOP
  ScanReport r = scan_bytes("cut.pkl", p);
  CHECK_FALSE(r.safe());
  REQUIRE(r.files[0].errors.size() == 1);
  CHECK(r.files[0].errors[0].find("truncated") != std::string::npos);

  PickleScan s = scan_pickle(p, "cut.pkl");
  CHECK_FALSE(s.status.is_ok());
  REQUIRE(s.doc->uses.size() == 1);
  CHECK(s.doc->uses[0].called);
  CHECK(s.doc->uses[0].offset == 2);
}

TEST_CASE("files without pickles are safe, unknown formats are refused", "[verify]") {
  // A numeric .npy: header only, no pickle.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  header.resize(118, ' ');
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header +
                    std::string(8, '\0');
  ScanReport n = scan_bytes("a.npy", npy);
  CHECK(n.format == "numpy .npy");
  CHECK(n.safe());
  CHECK(n.files[0].globals.empty());

  auto f = memory_file("notes.txt", "hello, not a checkpoint\n");
  auto s = scan_file(*f, "notes.txt");
  CHECK(s.status().code() == Code::kUnsupported);
  CHECK(scan_path(Env::posix(), "/nonexistent/ckpt-scan").status().code() == Code::kNotFound);
}

TEST_CASE("risk lists: the issue's named families", "[verify]") {
  auto risk = [](const char* m, const char* n, bool called) {
    return classify_use(GlobalUse{m, n, 0, called, "", ""});
  };
  for (auto [m, n] : std::vector<std::pair<const char*, const char*>>{
           {"os", "system"},
           {"nt", "system"},
           {"posix", "popen"},
           {"subprocess", "run"},
           {"pty", "spawn"},
           {"builtins", "eval"},
           {"__builtin__", "exec"},
           {"builtins", "compile"},
           {"builtins", "__import__"},
           {"builtins", "getattr"},
           {"builtins", "open"},
           {"builtins", "breakpoint"},
           {"runpy", "run_module"},
           {"importlib", "import_module"},
           {"code", "interact"},
           {"pickle", "loads"},
           {"_pickle", "loads"},
           {"marshal", "loads"},
           {"torch", "load"},
           {"socket", "socket"},
           {"http.client", "HTTPConnection"},
           {"httplib", "HTTPSConnection"},
           {"requests", "get"},
           {"aiohttp", "request"},
           {"urllib.request", "urlopen"},
           {"webbrowser", "open"},
           {"shutil", "rmtree"},
           {"sys", "exit"},
           {"pip", "main"},
           {"operator", "attrgetter"},
           {"operator", "methodcaller"},
           {"pydoc", "pipepager"},
           {"uuid", "_get_command_stdout"},
           {"_osx_support", "_read_output"},
           {"numpy.testing._private.utils", "runstring"},
           {"imaplib", "IMAP4_stream"},
           {"logging", "FileHandler"},
           {"io", "FileIO"}}) {
    INFO(m << "." << n);
    CHECK(risk(m, n, false) == Risk::kDangerous);
  }
  CHECK(risk("torch._utils", "_rebuild_tensor_v2", true) == Risk::kSafe);
  CHECK(risk("collections", "OrderedDict", true) == Risk::kSafe);
  CHECK(risk("numpy.core.multiarray", "_reconstruct", true) == Risk::kSafe);
  CHECK(risk("numpy._core.multiarray", "_reconstruct", true) == Risk::kSafe);
  CHECK(risk("torch", "Size", true) == Risk::kSafe);
  CHECK(risk("transformers.training_args", "TrainingArguments", true) == Risk::kFramework);
  CHECK(risk("lightning.fabric.utilities.data", "AttributeDict", true) == Risk::kFramework);
  CHECK(risk("deepspeed.runtime.fp16.loss_scaler", "LossScaler", true) == Risk::kFramework);
  CHECK(risk("deepspeed.runtime.zero.config", "ZeroStageEnum", true) == Risk::kFramework);
  CHECK(risk("argparse", "Namespace", true) == Risk::kFramework);
  CHECK(risk("deepspeed.utils.tensor_fragment", "fragment_address", true) == Risk::kFramework);
  CHECK(risk("numpy.random._pickle", "__randomstate_ctor", true) == Risk::kFramework);
  CHECK(risk("transformers.utils", "some_function", true) == Risk::kDangerous);
  CHECK(risk("mylib", "helper", false) == Risk::kUnknown);
  CHECK(risk("mylib", "helper", true) == Risk::kDangerous);
  CHECK(weights_only_allows("torch._utils", "_rebuild_tensor_v2"));
  CHECK(weights_only_allows("torch", "FloatStorage"));
  CHECK_FALSE(weights_only_allows("numpy.core.multiarray", "_reconstruct"));
}

TEST_CASE("audit gives scan's verdict as findings, legacy files included", "[verify]") {
  ::unlink(kMarker);
  for (const char* name :
       {"torch_zip_payload.pt", "torch_legacy_payload.pt", "torch_zip_odd_flags.pt"}) {
    auto r = audit_path(test::foreign_readers(), Env::posix(),
                        (fixtures() / "scan" / "exploits" / name).string(), {});
    INFO(name << ": " << r.status().to_string());
    REQUIRE(r.is_ok());
    CHECK_FALSE(r->complete);  // exit 2
    bool reported = false;
    for (const auto& f : r->findings) {
      reported = reported || (f.severity == Severity::kError &&
                              f.message.find("posix.system") != std::string::npos &&
                              f.message.find("ckpt scan") != std::string::npos);
    }
    CHECK(reported);
  }
  CHECK_FALSE(fs::exists(kMarker));
}
