// Hostile inputs to the `ckpt` commands (issue 27, items 12 and 16-22): a FIFO named like a rank
// file, checkpoints removed or unreadable while `ckpt verify` runs, names that are not UTF-8 or
// hold a newline, an empty OUTPUT_DIR, NaN inside JSON strings. Through the real executable,
// except where a fault must strike mid-command: there run_verify_command (cli/commands.h) runs
// over an Env that removes or refuses a file at the moment it is opened.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/io/env_wrapper.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "cli/commands.h"
#include "tests/common/test_util.h"

namespace fs = std::filesystem;
using namespace ckpt;
using ckpt::testing::TempDir;

namespace {

const std::string kCkpt = (fs::path(CKPT_BINARY_DIR) / "cli" / "ckpt").string();
const fs::path kFixtures = fs::path(CKPT_SOURCE_DIR) / "fixtures";

// Shell-quotes `s` (single quotes; a newline inside them is taken literally).
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Ran {
  int code = -1;
  std::string out, err;
};

// Runs `ckpt ARGS` in `cwd` (when given) with a 60 s `timeout` (exit 124 = it hung).
Ran ckpt_cmd(const std::string& args, const std::string& cwd = "") {
  TempDir scratch;
  const std::string err_file = scratch.path() + "/stderr";
  const std::string cd = cwd.empty() ? "" : "cd " + q(cwd) + " && ";
  FILE* p =
      ::popen((cd + "timeout 60 " + q(kCkpt) + " " + args + " 2>" + q(err_file)).c_str(), "r");
  REQUIRE(p != nullptr);
  Ran r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = testing::read_file(err_file);
  return r;
}

size_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

Status save(Env* env, const std::string& run, int64_t step) {
  static std::vector<float> w(64, 1.0f);
  Node root;
  root.attrs["step"] = step;
  root.child("model").tensors["w"] =
      Tensor::borrow(DType::kFloat32, {64}, w.data(), w.size() * sizeof(float));
  root.child("train").attrs["global_step"] = step;
  const std::vector<std::string> components{"model", "train"};
  root.attrs["components"] = components;
  const std::string dir = path_join(run, step_dir_name(step));
  CKPT_RETURN_IF_ERROR(env->make_dirs(dir));
  CKPT_RETURN_IF_ERROR(store::write_rank(env, dir, 0, step, 1, &root).status());
  return store::commit(env, run, step, 1, components);
}

// Env::posix() with a hook on open_random: the hook may act (remove a checkpoint, as retention
// does) or answer in the file's place.
class HookEnv final : public EnvWrapper {
 public:
  using Hook = std::function<std::optional<Status>(const std::string& path)>;
  explicit HookEnv(Hook hook) : EnvWrapper(Env::posix()), hook_(std::move(hook)) {}

  Result<std::unique_ptr<RandomAccessFile>> open_random(const std::string& path) override {
    if (auto answer = hook_(path)) return *answer;
    return EnvWrapper::open_random(path);
  }

 private:
  Hook hook_;
};

}  // namespace

TEST_CASE("a FIFO named rank-00000.h5 is refused by audit, inspect and diff, never waited on",
          "[cli]") {
  TempDir tmp;
  Env* env = Env::posix();
  for (int64_t s : {10, 20}) REQUIRE(save(env, tmp.path(), s).is_ok());
  const std::string step10 = tmp.path() + "/step-000000000010";
  const std::string rank = step10 + "/rank-00000.h5";
  REQUIRE(::unlink(rank.c_str()) == 0);
  REQUIRE(::mkfifo(rank.c_str(), 0644) == 0);
  for (const std::string& args :
       {"audit " + q(step10), "inspect " + q(step10),
        "diff " + q(step10) + " " + q(tmp.path() + "/step-000000000020")}) {
    INFO(args);
    const Ran r = ckpt_cmd(args);
    INFO(r.err);
    CHECK(r.code == 65);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(rank + ": not a regular file") != std::string::npos);
  }
  // The run: step 20 is audited, and the FIFO is in the older checkpoint its history reads.
  const Ran r = ckpt_cmd("audit " + q(tmp.path()));
  INFO(r.err);
  CHECK(r.code != 124);
  CHECK((r.code == 0 || r.code == 2));
}

TEST_CASE("verify: a checkpoint that retention removes mid-check is removed, not damaged",
          "[cli]") {
  TempDir tmp;
  for (int64_t s : {10, 20, 30}) REQUIRE(save(Env::posix(), tmp.path(), s).is_ok());
  const std::string victim = tmp.path() + "/step-000000000010";
  bool removed = false;
  HookEnv env([&](const std::string& path) -> std::optional<Status> {
    if (!removed && path == victim + "/rank-00000.h5") {
      removed = true;  // as store/retention.cc removes: COMMIT.json first, then the rest
      Env* posix = Env::posix();
      REQUIRE(posix->remove_file(victim + "/COMMIT.json").is_ok());
      auto names = posix->list_dir(victim);
      REQUIRE(names.is_ok());
      for (const auto& n : *names) {
        REQUIRE(posix->remove_file(victim + "/" + n).is_ok());
      }
      REQUIRE(posix->remove_dir(victim).is_ok());
    }
    return std::nullopt;
  });
  for (bool json : {false, true}) {
    removed = false;
    if (!fs::exists(victim)) REQUIRE(save(Env::posix(), tmp.path(), 10).is_ok());
    std::ostringstream out, err;
    const int code = cli::run_verify_command({tmp.path(), json}, &env, out, err);
    INFO(out.str() << err.str());
    REQUIRE(removed);
    CHECK(code == 0);
    if (json) {
      auto j = nlohmann::json::parse(out.str());
      CHECK(j["ok"] == true);
      CHECK(j["removed"] == nlohmann::json::array({victim}));
      CHECK(j["checkpoints"].size() == 2);
    } else {
      CHECK(out.str().find("removed  " + victim + "  (removed while verifying)") !=
            std::string::npos);
      CHECK(out.str().find("DAMAGED") == std::string::npos);
    }
  }
  // Damage stays damage: a checkpoint whose rank file is gone but whose commit record is there.
  REQUIRE(::unlink((tmp.path() + "/step-000000000020/rank-00000.h5").c_str()) == 0);
  std::ostringstream out, err;
  CHECK(cli::run_verify_command({tmp.path(), false}, Env::posix(), out, err) == 2);
}

TEST_CASE("verify: a rank file that cannot be opened (EACCES) is exit 66 naming it", "[cli]") {
  TempDir tmp;
  REQUIRE(save(Env::posix(), tmp.path(), 10).is_ok());
  const std::string rank = tmp.path() + "/step-000000000010/rank-00000.h5";
  // The tests may run as root, whom chmod does not stop: the Env refuses as the kernel would.
  HookEnv env([&](const std::string& path) -> std::optional<Status> {
    if (path == rank) return io_error(path + ": open failed: Permission denied");
    return std::nullopt;
  });
  for (const auto& dir : {tmp.path(), tmp.path() + "/step-000000000010"}) {
    std::ostringstream out, err;
    CHECK(cli::run_verify_command({dir, false}, &env, out, err) == 66);
    INFO(out.str());
    CHECK(err.str() == "ckpt verify: " + rank + ": open failed: Permission denied\n");
    CHECK(out.str().find("DAMAGED") == std::string::npos);
  }
  if (::geteuid() != 0) {  // and for real, where the kernel refuses
    REQUIRE(::chmod(rank.c_str(), 0) == 0);
    const Ran r = ckpt_cmd("verify " + q(tmp.path()));
    CHECK(r.code == 66);
    CHECK(r.err.find(rank) != std::string::npos);
  }
}

TEST_CASE("verify --json of a path that is not UTF-8 escapes the bytes", "[cli]") {
  TempDir tmp;
  const std::string run = tmp.path() + "/run-\xff\xfe";
  REQUIRE(save(Env::posix(), run, 10).is_ok());
  const Ran r = ckpt_cmd("verify --json " + q(run));
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["path"] == tmp.path() + "/run-\\xff\\xfe");
  CHECK(j["ok"] == true);
}

TEST_CASE("convert IN \"\" is a usage error and writes nothing", "[cli][convert]") {
  TempDir cwd;
  const Ran r =
      ckpt_cmd("convert " + q((kFixtures / "convert" / "values.pt").string()) + " ''", cwd.path());
  CHECK(r.code == 64);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("OUT_DIR is empty") != std::string::npos);
  CHECK(fs::is_empty(cwd.path()));
}

TEST_CASE("a file name with a newline stays on one stderr line in every command", "[cli]") {
  TempDir tmp;
  const std::string bad = tmp.path() + "/bad\nname";
  const std::string out_dir = tmp.path() + "/out";
  const std::vector<std::string> commands = {
      "audit " + q(bad),
      "convert " + q(bad) + " " + q(out_dir),
      "coverage " + q(bad),
      "diff " + q(bad) + " " + q(bad),
      "inspect " + q(bad),
      "load-bench " + q(bad),
      "lr " + q(bad),
      "profile analyze " + q(bad),
      "profile layout " + q(bad),
      "profile layout-diff " + q(bad) + " " + q(bad),
      "profile env-diff " + q(bad) + " " + q(bad),
      "report " + q(bad) + " --html " + q(tmp.path() + "/r.html"),
      "scan " + q(bad),
      "verify " + q(bad),
  };
  for (const auto& args : commands) {
    INFO(args);
    const Ran r = ckpt_cmd(args);
    INFO(r.err);
    CHECK(r.code != 0);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("bad\\nname") != std::string::npos);
  }
}

TEST_CASE("paths next to a DCP checkpoint: exit 65 with one line saying what to pass", "[cli]") {
  const fs::path step = kFixtures / "foreign" / "dcp" / "step-6";
  TempDir tmp;  // torchtitan's layout: checkpoint/step-N, several of them
  for (const char* s : {"step-2", "step-6"}) {
    fs::create_directories(fs::path(tmp.path()) / "checkpoint" / s);
    fs::copy(step, fs::path(tmp.path()) / "checkpoint" / s);
  }
  const std::string ck = tmp.path() + "/checkpoint";
  const struct {
    std::string args, says;
  } cases[] = {
      {"audit " + q((step / ".metadata").string()),
       "the metadata file of a torch.distributed.checkpoint (DCP) folder; pass the folder (" +
           step.string() + ")"},
      {"audit " + q((step / "__0_0.distcp").string()),
       "a data file of a torch.distributed.checkpoint (DCP) folder; pass the folder holding it (" +
           step.string() + ")"},
      {"inspect " + q(ck), "it holds 2 DCP checkpoints (step-2, step-6); pass one of them, e.g. " +
                               ck + "/step-6 (the newest)"},
      {"audit " + q(tmp.path()), "(checkpoint/step-2, checkpoint/step-6)"},
      {"convert " + q((step / "__0_0.distcp").string()) + " " + q(tmp.path() + "/out"),
       "pass the folder holding it"},
      {"verify " + q(step.string()),
       "it is a dcp checkpoint: `ckpt audit " + step.string() + "` checks that format"},
      {"verify " + q((step / "__0_0.distcp").string()), "to `ckpt audit`"},
      {"verify " + q(ck), "`ckpt audit` checks DCP checkpoints: it holds 2"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const Ran r = ckpt_cmd(c.args);
    INFO(r.err);
    CHECK(r.code == 65);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
  CHECK_FALSE(fs::exists(tmp.path() + "/out"));
}
