// The S3 Env and the commit protocol of docs/format.md §9 against a real S3 server on loopback
// (SeaweedFS, started by the ctest fixture: scripts/s3-server.sh). Each test writes under its own
// random prefix of the fixture's bucket.
#include "ckpt/io/s3/s3_env.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <thread>

#include "ckpt/format/manifest.h"
#include "ckpt/io/s3/config.h"
#include "ckpt/io/s3/upload.h"
#include "ckpt/store/journal.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"
#include "tests/common/test_util.h"

namespace ckpt::s3_env_test {
namespace {

// The fixture's `export K=V` lines (scripts/s3-server.sh start) into this process's environment.
std::string fixture_bucket() {
  static std::string bucket = [] {
    const char* file = std::getenv("CKPT_S3_TEST_ENV");
    std::ifstream in(file != nullptr ? file : CKPT_BINARY_DIR "/s3-server/env");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("export ", 0) == 0) line = line.substr(7);
      const size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string v = line.substr(eq + 1);
      if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"')) v = v.substr(1, v.size() - 2);
      ::setenv(line.substr(0, eq).c_str(), v.c_str(), 1);
    }
    const char* b = std::getenv("CKPT_S3_TEST_BUCKET");
    return std::string(b != nullptr ? b : "");
  }();
  return bucket;
}

std::string unique_run() {
  std::random_device rd;
  return "s3://" + fixture_bucket() + "/t" + std::to_string(rd()) + std::to_string(rd());
}

std::unique_ptr<Env> make_env(s3::LeaseOptions lease = {}) {
  REQUIRE_FALSE(fixture_bucket().empty());
  auto config = s3::load_config();
  INFO(config.status().to_string());
  REQUIRE(config.is_ok());
  auto env = s3::make_s3_env(std::move(*config), "", lease);
  INFO(env.status().to_string());
  REQUIRE(env.is_ok());
  return std::move(*env);
}

TEST_CASE("S3Env files: whole objects, ranged reads, listing, removal", "[s3]") {
  auto env = make_env();
  const std::string run = unique_run();
  REQUIRE(env->object_store(run) != nullptr);
  REQUIRE_FALSE(env->is_dir(run));
  REQUIRE(env->list_dir(run).status().code() == Code::kNotFound);
  REQUIRE(env->write_atomic(run + "/LATEST", "step-000000000001\n").is_ok());
  std::string big(13u << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 2654435761u >> 13);
  {
    auto w = env->new_writable(run + "/step-1/rank-00000.h5");
    REQUIRE(w.is_ok());
    for (size_t at = 0; at < big.size(); at += 1u << 20) {
      REQUIRE((*w)->append(big.data() + at, std::min<size_t>(1u << 20, big.size() - at)).is_ok());
    }
    // Not there until close(): an object appears whole.
    REQUIRE_FALSE(env->exists(run + "/step-1/rank-00000.h5"));
    REQUIRE((*w)->close().is_ok());
  }
  REQUIRE(env->is_dir(run));
  REQUIRE(env->is_dir(run + "/step-1"));
  REQUIRE(*env->entry_kind(run + "/step-1") == FileKind::kDirectory);
  REQUIRE(*env->entry_kind(run + "/LATEST") == FileKind::kRegular);
  REQUIRE(*env->entry_kind(run + "/nothing") == FileKind::kMissing);
  REQUIRE(*env->list_dir(run) == std::vector<std::string>{"LATEST", "step-1"});
  REQUIRE(*env->file_size(run + "/step-1/rank-00000.h5") == big.size());
  REQUIRE(*env->read_all(run + "/LATEST") == "step-000000000001\n");

  auto f = env->open_random(run + "/step-1/rank-00000.h5");
  REQUIRE(f.is_ok());
  REQUIRE_FALSE((*f)->version().empty());
  std::string part(5000, '\0');
  REQUIRE((*f)->read_at(4096 * 3 + 7, part.data(), part.size()).is_ok());
  REQUIRE(part == big.substr(4096 * 3 + 7, part.size()));
  std::string all(big.size(), '\0');
  REQUIRE((*f)->read_at(0, all.data(), all.size()).is_ok());  // split into parallel GETs
  REQUIRE(all == big);
  const Status past = (*f)->read_at(big.size() - 10, part.data(), 100);
  REQUIRE(past.code() == Code::kCorrupt);
  REQUIRE(past.message().find("truncated") != std::string::npos);

  REQUIRE(env->remove_tree(run + "/step-1").is_ok());
  REQUIRE_FALSE(env->exists(run + "/step-1/rank-00000.h5"));
  REQUIRE_FALSE(env->is_dir(run + "/step-1"));
  REQUIRE(env->exists(run + "/LATEST"));
  REQUIRE(env->remove_tree(run).is_ok());
  REQUIRE_FALSE(env->is_dir(run));
}

TEST_CASE("a rank file on the store: written streamed, read back bit-exact, verified", "[s3]") {
  auto env = make_env();
  const std::string run = unique_run();
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  root.attrs["step"] = int64_t{3};
  auto dir = store::save_dir(env.get(), run, 3);
  REQUIRE(dir.is_ok());
  auto m = store::write_rank(env.get(), *dir, 0, 3, 1, &root);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  REQUIRE_FALSE(env->exists(*dir + "/rank-00000.h5.tmp"));
  std::vector<std::string> groups;
  for (const auto& [g, child] : root.children) groups.push_back(g);
  const Status committed = store::commit(env.get(), run, 3, 1, groups);
  INFO(committed.to_string());
  REQUIRE(committed.is_ok());

  auto back = store::read_rank(env.get(), *dir, 0);
  INFO(back.status().to_string());
  REQUIRE(back.is_ok());
  for (const auto& [name, t] : root.children.at("model").tensors) {
    if (!t.alias_of.empty() || t.nbytes == 0) continue;
    const Tensor& b = back->children.at("model").tensors.at(name);
    REQUIRE(b.nbytes == t.nbytes);
    REQUIRE(std::memcmp(b.data, t.data, t.nbytes) == 0);
  }
  const store::VerifyReport v = store::verify_checkpoint(env.get(), *dir);
  INFO((v.problems.empty() ? std::string() : v.problems[0]));
  REQUIRE(v.problems.empty());
  auto latest = store::find_latest(env.get(), run);
  REQUIRE(latest.is_ok());
  REQUIRE(latest->step == 3);

  // Re-saving a committed step withdraws its commit record before anything is overwritten.
  auto again = store::save_dir(env.get(), run, 3);
  REQUIRE(again.is_ok());
  REQUIRE(*again == *dir);
  REQUIRE_FALSE(env->exists(*dir + "/COMMIT.json"));
  REQUIRE(store::find_latest(env.get(), run).status().code() == Code::kNotFound);
  REQUIRE(store::write_rank(env.get(), *dir, 0, 3, 1, &root).is_ok());
  REQUIRE(store::commit(env.get(), run, 3, 1, groups).is_ok());
  REQUIRE(store::verify_checkpoint(env.get(), *dir).problems.empty());

  // A stale LATEST: the restore takes the newest committed.
  std::vector<std::vector<unsigned char>> storage5;
  Node root5 = testing::sample_tree(&storage5);
  root5.attrs["step"] = int64_t{5};
  auto dir5 = store::save_dir(env.get(), run, 5);
  REQUIRE(store::write_rank(env.get(), *dir5, 0, 5, 1, &root5).is_ok());
  REQUIRE(store::commit(env.get(), run, 5, 1, groups).is_ok());
  REQUIRE(*env->read_all(run + "/LATEST") == "step-000000000005\n");
  REQUIRE(env->write_atomic(run + "/LATEST", "step-000000000003\n").is_ok());
  latest = store::find_latest(env.get(), run);
  REQUIRE(latest->step == 5);
  REQUIRE_FALSE(latest->note.empty());

  // Retention removes the commit record first and never the newest.
  REQUIRE(store::apply_retention(env.get(), run, 1, 0).is_ok());
  REQUIRE_FALSE(env->exists(*dir + "/COMMIT.json"));
  REQUIRE_FALSE(env->exists(*dir + "/rank-00000.h5"));
  REQUIRE(env->exists(*dir5 + "/COMMIT.json"));
  auto left = store::list_checkpoints(env.get(), run);
  REQUIRE(left.is_ok());
  REQUIRE(left->size() == 1);  // no emptied step "directory" left behind
  REQUIRE(left->front().step == 5);
  REQUIRE(env->remove_tree(run).is_ok());
  REQUIRE_FALSE(env->is_dir(run));
}

TEST_CASE("an exclusive object never replaces one that exists: single PUT and multipart", "[s3]") {
  ::setenv("CKPT_S3_PART_BYTES", "5242880", 1);
  auto env = make_env();
  ::unsetenv("CKPT_S3_PART_BYTES");
  const std::string run = unique_run();
  ObjectStore* store = env->object_store(run);
  for (size_t bytes : {size_t{1000}, size_t{12} << 20}) {  // one PUT; three parts
    const std::string key = run + "/f" + std::to_string(bytes);
    auto write = [&](char fill) {
      auto w = store->new_exclusive(key);
      REQUIRE(w.is_ok());
      const std::string body(bytes, fill);
      REQUIRE((*w)->append(body.data(), body.size()).is_ok());
      return (*w)->close();
    };
    REQUIRE(write('a').is_ok());
    const Status second = write('b');
    INFO(second.to_string());
    REQUIRE(second.code() == Code::kLocked);
    REQUIRE(second.message().find("exists") != std::string::npos);
    auto kept = env->read_all(key, 64u << 20);
    REQUIRE(kept.is_ok());
    REQUIRE(*kept == std::string(bytes, 'a'));
  }
  s3::S3Client* client = s3::s3_client_of(env.get());
  auto u = s3::parse_s3_url(run);
  REQUIRE(client->list_multipart_uploads(u->bucket, u->key + "/")->empty());  // the loser aborted
  REQUIRE(env->remove_tree(run).is_ok());
}

TEST_CASE("conditional writes: of eight racing creators exactly one wins", "[s3]") {
  auto env = make_env();
  const std::string key = unique_run() + "/step-000000000001/COMMIT.json";
  ObjectStore* store = env->object_store(key);
  std::vector<int> won(8, 0);
  std::vector<std::thread> pool;
  for (int i = 0; i < 8; ++i) {
    pool.emplace_back([&, i] {
      auto r = store->put_if_absent(key, "writer " + std::to_string(i));
      won[i] = r.is_ok() && *r ? 1 : 0;
    });
  }
  for (auto& t : pool) t.join();
  REQUIRE(std::count(won.begin(), won.end(), 1) == 1);
  auto v = store->get_versioned(key, 4096);
  REQUIRE(v.is_ok());
  REQUIRE(*store->put_if_version(key, "new", v->version));
  REQUIRE_FALSE(*store->put_if_version(key, "stale", v->version));  // the ETag moved on
  REQUIRE(*env->read_all(key) == "new");
  REQUIRE(env->remove_file(key).is_ok());
}

TEST_CASE("RUN/LOCK on a store: a live lease refuses a second writer, a dead one is taken over",
          "[s3]") {
  s3::LeaseOptions lease;
  lease.ttl_seconds = 3;
  auto a = make_env(lease);
  auto b = make_env(lease);  // another process's Env: its own lock table entry
  const std::string run = unique_run();
  {
    auto held = store::lock_run_dir(a.get(), run);
    INFO(held.status().to_string());
    REQUIRE(held.is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // renewed meanwhile
    REQUIRE((*held)->check().is_ok());
    auto second = b->lock_file(run + "/LOCK", "pid 2 host other\n");
    REQUIRE(second.status().code() == Code::kLocked);
    REQUIRE(second.status().message().find("locked by pid") != std::string::npos);
  }
  // Released: the next writer takes it at once.
  { REQUIRE(b->lock_file(run + "/LOCK", "pid 3 host h\n").is_ok()); }
  // A holder that died (a lease not renewed for ttl) is taken over.
  REQUIRE(a->write_atomic(run + "/LOCK",
                          "{\"owner\":\"pid 9 host dead\",\"token\":\"x\",\"renewed_unix\":1,"
                          "\"ttl_seconds\":3}\n")
              .is_ok());
  auto taken = b->lock_file(run + "/LOCK", "pid 4 host h\n");
  INFO(taken.status().to_string());
  REQUIRE(taken.is_ok());
  // The holder whose lease was taken over stops: its next renewal fails.
  REQUIRE(a->write_atomic(run + "/LOCK",
                          "{\"owner\":\"pid 5 host thief\",\"token\":\"y\","
                          "\"renewed_unix\":9e12,\"ttl_seconds\":3}\n")
              .is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  REQUIRE_FALSE((*taken)->still_at(run + "/LOCK"));
  taken->reset();
  REQUIRE(a->remove_tree(run).is_ok());
}

// This kernel and PID namespace as the lease writes them (s3_lease.cc).
std::string this_machine() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string b;
  std::getline(boot, b);
  char ns[128] = {0};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  REQUIRE(n > 0);
  return b + " " + std::string(ns, static_cast<size_t>(n));
}

std::string fresh_lease(const std::string& machine, long pid) {
  return "{\"owner\":\"pid " + std::to_string(pid) + " host here\",\"token\":\"x\"," +
         "\"renewed_unix\":" + std::to_string(static_cast<long long>(std::time(nullptr))) +
         ",\"ttl_seconds\":600,\"machine\":\"" + machine + "\",\"pid\":" + std::to_string(pid) +
         "}\n";
}

TEST_CASE("a fresh lease whose holder died on this machine is taken at once", "[s3]") {
  auto env = make_env();
  const std::string run = unique_run();
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);  // its pid is gone now
  // A live holder (this process) on this machine: refused, though the lease names this machine.
  REQUIRE(env->write_atomic(run + "/LOCK", fresh_lease(this_machine(), ::getpid())).is_ok());
  REQUIRE(env->lock_file(run + "/LOCK", "pid 1 host h\n").status().code() == Code::kLocked);
  // The dead child's lease, written on another machine: only its ttl frees it.
  REQUIRE(env->write_atomic(run + "/LOCK", fresh_lease("another-boot pid:[1]", child)).is_ok());
  REQUIRE(env->lock_file(run + "/LOCK", "pid 1 host h\n").status().code() == Code::kLocked);
  // Written here: the pid is gone, so the lease is taken without waiting 600 s.
  REQUIRE(env->write_atomic(run + "/LOCK", fresh_lease(this_machine(), child)).is_ok());
  {
    auto taken = env->lock_file(run + "/LOCK", "pid 1 host h\n");
    INFO(taken.status().to_string());
    REQUIRE(taken.is_ok());
  }
  REQUIRE(env->remove_tree(run).is_ok());
}

TEST_CASE("a killed writer's multipart upload is aborted by the next commit", "[s3]") {
  auto env = make_env();
  const std::string run = unique_run();
  s3::S3Client* client = s3::s3_client_of(env.get());
  REQUIRE(client != nullptr);
  auto u = s3::parse_s3_url(run + "/step-000000000002/rank-00000.h5");
  REQUIRE(u.is_ok());
  auto id = client->create_multipart(u->bucket, u->key);  // what a SIGKILLed upload leaves
  REQUIRE(id.is_ok());
  std::string part(5u << 20, 'x');
  REQUIRE(client->upload_part(u->bucket, u->key, *id, 1, part.data(), part.size()).is_ok());
  REQUIRE(client->list_multipart_uploads(u->bucket, s3::parse_s3_url(run)->key + "/")->size() == 1);

  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  root.attrs["step"] = int64_t{4};
  auto dir = store::save_dir(env.get(), run, 4);
  REQUIRE(store::write_rank(env.get(), *dir, 0, 4, 1, &root).is_ok());
  std::vector<std::string> groups;
  for (const auto& [g, child] : root.children) groups.push_back(g);
  REQUIRE(store::commit(env.get(), run, 4, 1, groups).is_ok());
  REQUIRE(client->list_multipart_uploads(u->bucket, s3::parse_s3_url(run)->key + "/")->empty());
  // The never-committed step 2 is invisible.
  REQUIRE(store::find_latest(env.get(), run)->step == 4);
  REQUIRE(env->remove_tree(run).is_ok());
}

TEST_CASE("a rank file of many small tensors: its structure comes from the store in a few GETs",
          "[s3]") {
  // One structural region a tensor (the zeros after each 4 KiB-aligned small tensor): fetched
  // region by region, 300 tensors took 300 GETs before the tensors were even read.
  auto env = make_env();
  const std::string run = unique_run();
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  root.attrs["step"] = int64_t{5};
  for (int i = 0; i < 300; ++i) {
    storage.emplace_back(256, static_cast<unsigned char>(i));
    root.child("model").tensors["norm" + std::to_string(i)] =
        Tensor::borrow(DType::kFloat32, {64}, storage.back().data(), 256);
  }
  auto dir = store::save_dir(env.get(), run, 5);
  REQUIRE(dir.is_ok());
  REQUIRE(store::write_rank(env.get(), *dir, 0, 5, 1, &root).is_ok());
  s3::RequestStats& st = s3::s3_client_of(env.get())->stats();
  const uint64_t gets = st.gets;
  auto structure =
      store::open_rank_structure(env.get(), *dir, 0, store::DatasetCheck::kFromManifest);
  INFO(structure.status().to_string());
  REQUIRE(structure.is_ok());
  REQUIRE(structure->root.children.at("model").tensors.count("norm299") == 1);
  // The manifest and the structure: its regions close together in one read each.
  INFO("GETs " << st.gets - gets);
  CHECK(st.gets - gets <= 4);
  // read_rank (verify, inspect, export): the small tensors in a few reads, not one each.
  const uint64_t before_read = st.gets;
  auto back = store::read_rank(env.get(), *dir, 0);
  INFO(back.status().to_string());
  REQUIRE(back.is_ok());
  const Tensor& t = back->children.at("model").tensors.at("norm299");
  REQUIRE(t.nbytes == 256);
  REQUIRE(static_cast<const unsigned char*>(t.data)[7] == 299 % 256);
  for (const auto& [name, orig] : root.children.at("model").tensors) {
    if (!orig.alias_of.empty() || orig.nbytes == 0) continue;
    INFO(name);
    const Tensor& b = back->children.at("model").tensors.at(name);
    REQUIRE(std::memcmp(b.data, orig.data, orig.nbytes) == 0);
  }
  INFO("read_rank GETs " << st.gets - before_read);
  CHECK(st.gets - before_read < 20);
  REQUIRE(env->remove_tree(run).is_ok());
}

TEST_CASE("finding the newest checkpoint on a store costs one LIST and one GET a step", "[s3]") {
  auto env = make_env();
  const std::string run = unique_run();
  std::vector<std::vector<unsigned char>> storage;
  Node root = testing::sample_tree(&storage);
  std::vector<std::string> groups;
  for (const auto& [g, child] : root.children) groups.push_back(g);
  for (int64_t step : {2, 4, 6}) {
    root.attrs["step"] = step;
    auto dir = store::save_dir(env.get(), run, step);
    REQUIRE(dir.is_ok());
    REQUIRE(store::write_rank(env.get(), *dir, 0, step, 1, &root).is_ok());
    REQUIRE(store::commit(env.get(), run, step, 1, groups).is_ok());
  }
  s3::RequestStats& st = s3::s3_client_of(env.get())->stats();
  const uint64_t lists = st.lists, gets = st.gets, heads = st.heads;
  auto all = store::list_checkpoints(env.get(), run);
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 3);
  for (const auto& e : *all) {
    REQUIRE(e.committed);
    REQUIRE(e.commit.has_value());  // read once, kept
    REQUIRE(e.commit->step == e.step);
  }
  REQUIRE(st.lists - lists == 1);
  REQUIRE(st.gets - gets == 3);  // each COMMIT.json: one GET, no HEAD first
  REQUIRE(st.heads - heads == 0);
  auto latest = store::find_latest(env.get(), run);
  REQUIRE(latest.is_ok());
  REQUIRE(latest->step == 6);
  REQUIRE(latest->commit.step == 6);
  REQUIRE(store::list_checkpoints(env.get(), run + "-none").status().code() == Code::kNotFound);
  REQUIRE(env->remove_tree(run).is_ok());
}

// A long run's journal on the store: each durable event PUTs the newest segment only
// (ckpt/store/journal.h), however many events came before; a reader gets them all, in order.
TEST_CASE("a journal on a store is written in segments, each event PUTting the newest only",
          "[s3]") {
  auto env = make_env();
  const std::string run = unique_run();
  s3::RequestStats& st = s3::s3_client_of(env.get())->stats();
  {
    auto j = store::Journal::open_segmented(env.get(), run, 2000);
    REQUIRE(j.is_ok());
    for (int64_t step = 0; step < 200; ++step) {
      const uint64_t up = st.bytes_up;
      REQUIRE((*j)->append(store::JournalEventType::kSave, {{"step", step}}, true).is_ok());
      REQUIRE(st.bytes_up - up < 2 * 2000 + 400);  // the tail, and at a roll-over the segment
    }
  }
  auto lines = store::read_journal(env.get(), run);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 200);
  for (int64_t step = 0; step < 200; ++step) REQUIRE(lines->at(step)["step"] == step);
  REQUIRE(env->exists(run + "/" + store::journal_segment_name(3)));

  // Journal::open on a store is segmented: a journal above a segment (written whole before
  // segments) becomes the first segment at its next open.
  const std::string old_run = unique_run();
  std::string old;
  while (old.size() <= store::kJournalSegmentBytes) {
    old += "{\"event\":\"progress\",\"time\":1,\"step\":" + std::to_string(old.size()) + "}\n";
  }
  REQUIRE(env->write_atomic(old_run + "/journal.jsonl", old).is_ok());
  {
    auto j = store::Journal::open(env.get(), old_run);
    REQUIRE(j.is_ok());
    REQUIRE((*j)->append(store::JournalEventType::kStart, {{"step", -1}}, true).is_ok());
  }
  auto first = env->read_all(old_run + "/" + store::journal_segment_name(1), 64u << 20);
  REQUIRE(first.is_ok());
  REQUIRE(*first == old);
  auto tail = env->read_all(old_run + "/journal.jsonl", 1u << 20);
  REQUIRE(tail.is_ok());
  REQUIRE(tail->size() < 1000);
  auto all = store::read_journal(env.get(), old_run);
  REQUIRE(all.is_ok());
  REQUIRE(all->back()["step"] == -1);
  REQUIRE(env->remove_tree(run).is_ok());
  REQUIRE(env->remove_tree(old_run).is_ok());
}

TEST_CASE("a wrong secret is one line that names no secret", "[s3]") {
  fixture_bucket();
  auto config = s3::load_config();
  REQUIRE(config.is_ok());
  config->credentials.secret_access_key = "WRONG-secret-0123456789abcdefXYZ";
  config->max_attempts = 2;
  auto env = s3::make_s3_env(*config);
  REQUIRE(env.is_ok());  // nothing is sent until the first call
  const Status s = (*env)->write_atomic(unique_run() + "/LATEST", "x");
  REQUIRE_FALSE(s.is_ok());
  REQUIRE(s.message().find('\n') == std::string::npos);
  REQUIRE(s.message().find("WRONG-secret") == std::string::npos);
}

}  // namespace
}  // namespace ckpt::s3_env_test
