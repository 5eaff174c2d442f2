// What "not a checkpoint" says about paths next to a DCP checkpoint (verify/formats/path_hint.h):
// its .metadata, a .distcp data file, a folder of step-N DCP folders (torchtitan's checkpoint/)
// and that folder's parent. Over a MemEnv: only names and listings matter.
#include "verify/formats/path_hint.h"

#include <catch2/catch.hpp>
#include <string>

#include "ckpt/io/mem_env.h"
#include "tests/common/test_readers.h"
#include "verify/formats/format_reader.h"

using namespace ckpt;
using namespace ckpt::verify;

namespace {

// A DCP folder as FileSystemWriter leaves it: .metadata and one data file whose first item is a
// torch.save zip (so it opens as a zip).
void make_dcp(MemEnv* env, const std::string& dir) {
  REQUIRE(env->make_dirs(dir).is_ok());
  REQUIRE(env->write_atomic(dir + "/.metadata", "\x80\x02}q\x00.").is_ok());
  REQUIRE(env->write_atomic(dir + "/__0_0.distcp", std::string("PK\x03\x04", 4) + "zip").is_ok());
}

}  // namespace

TEST_CASE("a DCP folder's .metadata or .distcp file names the folder to pass", "[verify]") {
  MemEnv env;
  make_dcp(&env, "run/step-4");
  CHECK(dcp_piece_hint(&env, "run/step-4/.metadata") ==
        "the metadata file of a torch.distributed.checkpoint (DCP) folder; pass the folder "
        "(run/step-4)");
  CHECK(dcp_piece_hint(&env, "run/step-4/__0_0.distcp") ==
        "a data file of a torch.distributed.checkpoint (DCP) folder; pass the folder holding it "
        "(run/step-4)");
  REQUIRE(env.make_dirs("loose").is_ok());
  REQUIRE(env.write_atomic("loose/__1_0.distcp", "raw").is_ok());
  CHECK(dcp_piece_hint(&env, "loose/__1_0.distcp") ==
        "a data file of a torch.distributed.checkpoint (DCP) folder; pass the folder holding it "
        "(loose), which needs its .metadata file");
  CHECK(dcp_piece_hint(&env, "run/step-4").empty());
  REQUIRE(env.write_atomic("run/model.pt", "PK").is_ok());
  CHECK(dcp_piece_hint(&env, "run/model.pt").empty());

  // Through the reader set: exit 65's message, not a zip error about the data file.
  for (const char* p : {"run/step-4/.metadata", "run/step-4/__0_0.distcp"}) {
    auto r = test::foreign_readers().read(&env, p, {});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kCorrupt);
    CHECK(r.status().message().rfind(std::string(p) + ": not a checkpoint by itself: ", 0) == 0);
  }
}

TEST_CASE("a folder of DCP folders names them and the newest", "[verify]") {
  MemEnv env;
  for (const char* s : {"step-10", "step-2", "step-4"}) make_dcp(&env, std::string("t/ck/") + s);
  REQUIRE(env.make_dirs("t/ck/tmp").is_ok());  // not a DCP folder: left out
  REQUIRE(env.write_atomic("t/full.pt", "PK").is_ok());
  CHECK(dcp_parent_hint(&env, "t/ck") ==
        "it holds 3 DCP checkpoints (step-2, step-4, step-10); pass one of them, e.g. "
        "t/ck/step-10 (the newest)");
  // Its parent: one level further down.
  CHECK(dcp_parent_hint(&env, "t") ==
        "it holds 3 DCP checkpoints (ck/step-2, ck/step-4, ck/step-10); pass one of them, e.g. "
        "t/ck/step-10 (the newest)");
  CHECK(dcp_parent_hint(&env, "t/ck/step-4").empty());  // a DCP folder itself
  CHECK(dcp_parent_hint(&env, "t/ck/tmp").empty());
  CHECK(dcp_parent_hint(&env, "t/full.pt").empty());

  auto r = test::foreign_readers().read(&env, "t/ck", {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::kCorrupt);
  CHECK(r.status().message() == "t/ck: not a checkpoint: " + dcp_parent_hint(&env, "t/ck"));

  MemEnv one;
  make_dcp(&one, "o/step-6");
  CHECK(dcp_parent_hint(&one, "o") == "it holds 1 DCP checkpoint (step-6); pass it: o/step-6");

  // The walk is bounded: a DCP folder past the first 2,000 entries is not looked for.
  MemEnv wide;
  bool made = true;
  for (int i = 0; i < 2100; ++i)
    made = made && wide.make_dirs("w/d" + std::to_string(10000 + i)).is_ok();
  REQUIRE(made);
  make_dcp(&wide, "w/zz");
  CHECK(dcp_parent_hint(&wide, "w").empty());
  make_dcp(&wide, "w/a");
  CHECK(dcp_parent_hint(&wide, "w") == "it holds 1 DCP checkpoint (a); pass it: w/a");

  MemEnv many;
  for (int i = 1; i <= 8; ++i) make_dcp(&many, "m/step-" + std::to_string(i));
  CHECK(dcp_parent_hint(&many, "m") ==
        "it holds 8 DCP checkpoints (step-1, step-2, ..., step-6, step-7, step-8); pass one of "
        "them, e.g. m/step-8 (the newest)");
}

TEST_CASE("a run's output folder names the checkpoints it holds, four levels down", "[verify]") {
  // What an HF Trainer leaves in output_dir, and Lightning in lightning_logs/version_0/checkpoints.
  MemEnv env;
  for (const char* step : {"checkpoint-3", "checkpoint-12"}) {
    const std::string dir = std::string("out/") + step;
    REQUIRE(env.make_dirs(dir).is_ok());
    REQUIRE(
        env.write_atomic(dir + "/model.safetensors", std::string("\x08\0\0\0\0\0\0\0{}      ", 16))
            .is_ok());
  }
  REQUIRE(env.write_atomic("out/runs.txt", "a log").is_ok());
  const ReaderSet& readers = test::foreign_readers();
  auto r = readers.read(&env, "out", {});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message() ==
        "out: not a checkpoint: it holds 2 checkpoints (checkpoint-3, checkpoint-12); pass one "
        "of them, e.g. out/checkpoint-12 (the newest)");
  REQUIRE(env.make_dirs("pl/lightning_logs/version_0/checkpoints").is_ok());
  REQUIRE(env.write_atomic("pl/lightning_logs/version_0/checkpoints/last.safetensors",
                           std::string("\x08\0\0\0\0\0\0\0{}      ", 16))
              .is_ok());
  auto deep = readers.read(&env, "pl", {});
  REQUIRE_FALSE(deep.is_ok());
  CHECK(deep.status().message().find(
            "it holds 1 checkpoint (lightning_logs/version_0/checkpoints/last.safetensors)") !=
        std::string::npos);
  REQUIRE(env.make_dirs("empty/a/b").is_ok());
  auto none = readers.read(&env, "empty", {});
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().message().find("no reader recognises it") != std::string::npos);
}
