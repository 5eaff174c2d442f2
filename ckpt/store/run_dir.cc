#include "ckpt/store/run_dir.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>

#include "ckpt/base/hash.h"
#include "ckpt/store/rank_io.h"

namespace ckpt::store {
namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_data_file(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return name.rfind("rank-", 0) == 0 && (ends(".h5") || ends(".manifest.json"));
}

}  // namespace

Result<uint64_t> hash_file(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path));
  constexpr size_t kChunk = 8u << 20;
  std::unique_ptr<char[]> buf(new char[kChunk]);
  Hasher h;
  for (uint64_t off = 0; off < f->size(); off += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, f->size() - off));
    CKPT_RETURN_IF_ERROR(f->read_at(off, buf.get(), n));
    h.update(buf.get(), n);
  }
  return h.digest();
}

Status commit(Env* env, const std::string& run_dir, int64_t step, int64_t world_size,
              const std::vector<std::string>& components) {
  const std::string name = step_dir_name(step);
  const std::string dir = path_join(run_dir, name);
  CommitRecord rec;
  rec.step = step;
  rec.world_size = world_size;
  rec.time = utc_now();
  rec.components = components;
  for (int64_t r = 0; r < world_size; ++r) {
    for (const std::string& f : {rank_file_name(r), rank_manifest_name(r)}) {
      const std::string p = path_join(dir, f);
      if (!env->exists(p)) {
        return not_found(dir + ": rank " + std::to_string(r) + " did not write " + f +
                         " (commit refused)");
      }
      CKPT_ASSIGN_OR_RETURN(uint64_t size, env->file_size(p));
      CKPT_ASSIGN_OR_RETURN(uint64_t hash, hash_file(env, p));
      rec.files.push_back({f, size, hash});
    }
  }
  CKPT_RETURN_IF_ERROR(env->write_atomic(path_join(dir, "COMMIT.json"), encode_commit(rec)));
  return env->write_atomic(path_join(run_dir, "LATEST"), name + "\n");
}

Result<CommitRecord> read_commit(Env* env, const std::string& step_dir) {
  const std::string p = path_join(step_dir, "COMMIT.json");
  if (!env->exists(p)) return not_found(step_dir + ": no COMMIT.json (not a committed checkpoint)");
  CKPT_ASSIGN_OR_RETURN(std::string text, env->read_all(p, 16u << 20));
  return decode_commit(text, p);
}

Result<std::vector<CheckpointEntry>> list_checkpoints(Env* env, const std::string& run_dir) {
  if (!env->is_dir(run_dir)) return not_found(run_dir + ": no such run directory");
  CKPT_ASSIGN_OR_RETURN(auto names, env->list_dir(run_dir));
  std::vector<CheckpointEntry> out;
  for (const auto& n : names) {
    CheckpointEntry e;
    if (!parse_step_dir_name(n, &e.step)) continue;
    e.dir = path_join(run_dir, n);
    if (!env->is_dir(e.dir)) continue;
    auto rec = read_commit(env, e.dir);
    if (rec.is_ok() && rec->step == e.step) {
      e.committed = true;
    } else {
      e.problem = rec.is_ok() ? "COMMIT.json names step " + std::to_string(rec->step)
                              : rec.status().message();
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

Result<Latest> find_latest(Env* env, const std::string& run_dir) {
  CKPT_ASSIGN_OR_RETURN(auto all, list_checkpoints(env, run_dir));
  const CheckpointEntry* newest = nullptr;
  for (const auto& e : all) {
    if (e.committed) newest = &e;
  }
  if (newest == nullptr) return not_found(run_dir + ": no committed checkpoint");
  Latest out{newest->step, newest->dir, ""};
  const std::string latest_path = path_join(run_dir, "LATEST");
  auto text = env->read_all(latest_path, 4096);
  if (!text.is_ok()) {
    out.note = "LATEST is missing; using the newest committed checkpoint " + path_basename(out.dir);
    return out;
  }
  std::string named = *text;
  while (!named.empty() && (named.back() == '\n' || named.back() == '\r')) named.pop_back();
  int64_t step = 0;
  if (!parse_step_dir_name(named, &step)) {
    out.note =
        "LATEST is damaged (\"" + named.substr(0, 40) + "\"); using " + path_basename(out.dir);
  } else if (step != newest->step) {
    out.note = "LATEST names " + named + " but " + path_basename(out.dir) +
               " is newer and committed (a save was interrupted after its commit); using it";
  }
  return out;
}

Status apply_retention(Env* env, const std::string& run_dir, int keep_last, int64_t keep_every) {
  if (keep_last <= 0) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(auto all, list_checkpoints(env, run_dir));
  std::vector<const CheckpointEntry*> committed;
  for (const auto& e : all) {
    if (e.committed) committed.push_back(&e);
  }
  if (committed.empty()) return Status::ok();
  const int64_t newest = committed.back()->step;
  const size_t keep_from = committed.size() > static_cast<size_t>(keep_last)
                               ? committed.size() - static_cast<size_t>(keep_last)
                               : 0;
  for (size_t i = 0; i < keep_from; ++i) {
    const CheckpointEntry& e = *committed[i];
    if (keep_every > 0 && e.step % keep_every == 0) continue;
    CKPT_RETURN_IF_ERROR(env->remove_tree(e.dir));
  }
  for (const auto& e : all) {  // leftovers of interrupted saves
    if (!e.committed && e.step < newest) CKPT_RETURN_IF_ERROR(env->remove_tree(e.dir));
  }
  return Status::ok();
}

VerifyReport verify_checkpoint(Env* env, const std::string& step_dir) {
  VerifyReport rep;
  auto rec = read_commit(env, step_dir);
  if (!rec.is_ok()) {
    rep.problems.push_back(rec.status().message());
    return rep;
  }
  for (const CommitFile& f : rec->files) {
    const std::string p = path_join(step_dir, f.name);
    auto size = env->file_size(p);
    if (!size.is_ok()) {
      rep.problems.push_back(size.status().message());
      continue;
    }
    ++rep.files;
    rep.bytes += *size;
    if (*size != f.bytes) {
      rep.problems.push_back(p + ": " + std::to_string(*size) + " bytes, the commit record says " +
                             std::to_string(f.bytes) + (*size < f.bytes ? " (truncated)" : ""));
      continue;
    }
    auto h = hash_file(env, p);
    if (!h.is_ok()) {
      rep.problems.push_back(h.status().message());
    } else if (*h != f.xxh3) {
      rep.problems.push_back(p + ": xxh3 of the file is " + hex64(*h) +
                             ", the commit record says " + hex64(f.xxh3));
    }
  }
  for (int64_t r = 0; r < rec->world_size; ++r) {
    RankReadStats stats;
    auto node = read_rank(env, step_dir, r, ReadOptions{}, &stats);
    if (!node.is_ok()) {
      rep.problems.push_back(node.status().message());
    }
    rep.tensors += stats.tensors;
  }
  auto names = env->list_dir(step_dir);
  if (names.is_ok()) {
    for (const auto& n : *names) {
      if (n == "COMMIT.json" || !is_data_file(n)) continue;
      bool listed = false;
      for (const auto& f : rec->files) listed = listed || f.name == n;
      if (!listed) rep.problems.push_back(path_join(step_dir, n) + ": not listed in COMMIT.json");
    }
  }
  return rep;
}

}  // namespace ckpt::store
