#include "ckpt/store/run_dir.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>

#include "ckpt/base/hash.h"
#include "ckpt/base/text.h"
#include "ckpt/format/rank_root.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/commit_index.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/regions_check.h"

namespace ckpt::store {

bool is_data_file(const std::string& name) {
  if (name == kIndexFileName) return true;
  if (name.rfind("rank-", 0) != 0) return false;
  size_t i = 5;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 5) return false;
  const std::string rest = name.substr(i);
  return rest == ".h5" || rest == ".manifest.json";
}

std::string spare_rank_file(const std::string& step_dir, int64_t rank) {
  return path_join(path_join(path_dirname(step_dir), ".spare"), rank_file_name(rank));
}

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

namespace {

// Rank r's two entries of the commit record. The manifest (small) is read once and hashed; the
// rank file's hash is the `file_xxh3` its writer computed while writing it, taken from that
// manifest when the manifest decodes, has the field and states the file's real size. Otherwise
// (a manifest from before `file_xxh3`, or one that does not decode: verify will say why) the
// rank file is hashed here, as it always was.
// `decoded` (optional) receives the manifest when it decodes.
Result<std::pair<CommitFile, CommitFile>> hash_rank_files(Env* env, const std::string& dir,
                                                          int64_t r,
                                                          std::optional<Manifest>* decoded) {
  const std::string mname = rank_manifest_name(r);
  const std::string mpath = path_join(dir, mname);
  CKPT_ASSIGN_OR_RETURN(std::string text, env->read_all(mpath, 64u << 20));
  CommitFile manifest{mname, text.size(), xxh3_64(text.data(), text.size())};
  const std::string fpath = path_join(dir, rank_file_name(r));
  CKPT_ASSIGN_OR_RETURN(uint64_t size, env->file_size(fpath));
  CommitFile file{rank_file_name(r), size, 0};
  auto m = decode_manifest(text, mpath);
  if (m.is_ok() && m->file_xxh3 && m->file == file.name && m->file_bytes == size) {
    file.xxh3 = *m->file_xxh3;
    file.regions_xxh3 = m->regions_xxh3;
  } else {
    CKPT_ASSIGN_OR_RETURN(file.xxh3, hash_file(env, fpath));
  }
  if (m.is_ok()) *decoded = std::move(*m);
  return std::make_pair(file, manifest);
}

}  // namespace

std::string resave_dir(const std::string& run_dir, int64_t step) {
  return path_join(run_dir, step_dir_name(step) + ".resave");
}

Result<std::string> save_dir(Env* env, const std::string& run_dir, int64_t step) {
  CKPT_RETURN_IF_ERROR(check_step(step));
  const std::string dir = path_join(run_dir, step_dir_name(step));
  CKPT_ASSIGN_OR_RETURN(FileKind kind, env->entry_kind(path_join(dir, "COMMIT.json")));
  if (kind == FileKind::kMissing) return dir;
  if (env->object_store(dir) != nullptr) {
    // No rename or exchange on a store: a re-save first withdraws the commit record (every rank
    // does, before it writes), so no reader ever sees a record over half-replaced files; a crash
    // before the new commit leaves step N uncommitted and restores the one before it
    // (docs/format.md §9).
    CKPT_RETURN_IF_ERROR(env->remove_file(path_join(dir, "COMMIT.json")));
    return dir;
  }
  return resave_dir(run_dir, step);
}

namespace {

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Steps 3 and 4 on an object store (docs/format.md §9): COMMIT.json appears only if no other
// writer committed this step (If-None-Match: *), the commit point; LATEST then advances by
// compare-and-swap and never moves back to an older step.
Status commit_on_store(ObjectStore* store, const std::string& run_dir, const std::string& dir,
                       const CommitRecord& rec) {
  CKPT_ASSIGN_OR_RETURN(bool created,
                        store->put_if_absent(path_join(dir, "COMMIT.json"), encode_commit(rec)));
  if (!created) {
    return locked(path_join(dir, "COMMIT.json") +
                  ": another writer committed this step first (commit refused; its checkpoint "
                  "is kept)");
  }
  // A killed writer's unfinished uploads (of this run, any step) end here: every rank's upload
  // of this step completed before the commit, and one save runs at a time.
  CKPT_RETURN_IF_ERROR(store->abort_uploads_under(run_dir + "/").status());
  const std::string latest = path_join(run_dir, "LATEST");
  const std::string name = step_dir_name(rec.step) + "\n";
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto now = store->get_versioned(latest, 4096);
    if (!now.is_ok() && now.status().code() != Code::kNotFound) return now.status();
    if (!now.is_ok()) {
      CKPT_ASSIGN_OR_RETURN(bool made, store->put_if_absent(latest, name));
      if (made) return Status::ok();
      continue;
    }
    int64_t held = -1;
    if (parse_step_dir_name(trim_newline(now->bytes), &held) && held > rec.step) {
      return Status::ok();  // a newer checkpoint is already the hint
    }
    CKPT_ASSIGN_OR_RETURN(bool swapped, store->put_if_version(latest, name, now->version));
    if (swapped) return Status::ok();
  }
  // LATEST is a hint: find_latest lists the commit records when it is stale.
  return Status::ok();
}

// 3' of a re-save: a leftover attempt may hold files of ranks the new record does not list (a
// world size that changed); they would make the checkpoint fail verify.
Status remove_unlisted(Env* env, const std::string& dir, const CommitRecord& rec) {
  CKPT_ASSIGN_OR_RETURN(auto names, env->list_dir(dir));
  for (const auto& n : names) {
    if (n == "COMMIT.json" || !is_data_file(n)) continue;
    bool listed = false;
    for (const CommitFile& f : rec.files) listed = listed || f.name == n;
    if (!listed) CKPT_RETURN_IF_ERROR(env->remove_file(path_join(dir, n)));
  }
  return Status::ok();
}

}  // namespace

Status commit(Env* env, const std::string& run_dir, int64_t step, int64_t world_size,
              const std::vector<std::string>& components) {
  CKPT_ASSIGN_OR_RETURN(const std::string dir, save_dir(env, run_dir, step));
  const std::string name = step_dir_name(step);
  const std::string final_dir = path_join(run_dir, name);
  const bool resave = dir != final_dir;
  CommitRecord rec;
  rec.step = step;
  rec.world_size = world_size;
  rec.time = utc_now("%Y-%m-%dT%H:%M:%SZ");
  rec.components = components;
  std::vector<Manifest> manifests;
  for (int64_t r = 0; r < world_size; ++r) {
    for (const std::string& f : {rank_file_name(r), rank_manifest_name(r)}) {
      if (!env->exists(path_join(dir, f))) {
        return not_found(dir + ": rank " + std::to_string(r) + " did not write " + f +
                         " (commit refused)");
      }
    }
    std::optional<Manifest> m;
    CKPT_ASSIGN_OR_RETURN(auto files, hash_rank_files(env, dir, r, &m));
    rec.files.push_back(files.first);
    rec.files.push_back(files.second);
    if (m) manifests.push_back(std::move(*m));
  }
  // Pieces of global tensors: rank 0 writes the INDEX of every box, listed in the record
  // (docs/format.md §8). A manifest that does not decode fails verify; it adds no box here.
  CKPT_ASSIGN_OR_RETURN(std::optional<std::string> index, build_commit_index(manifests, step, dir));
  if (index) {
    CKPT_RETURN_IF_ERROR(env->write_atomic(path_join(dir, kIndexFileName), *index));
    // regions_xxh3 of the INDEX: its head's, so a restoring rank checks the head it reads alone.
    rec.files.push_back({kIndexFileName, index->size(), xxh3_64(index->data(), index->size()),
                         index_head_xxh3(*index)});
  }
  if (resave) CKPT_RETURN_IF_ERROR(remove_unlisted(env, dir, rec));
  if (ObjectStore* store = env->object_store(dir)) return commit_on_store(store, run_dir, dir, rec);
  CKPT_RETURN_IF_ERROR(env->write_atomic(path_join(dir, "COMMIT.json"), encode_commit(rec)));
  if (resave) {
    CKPT_RETURN_IF_ERROR(
        env->exchange(dir, final_dir)
            .with_context("re-save of " + name + " (the committed checkpoint is kept)"));
  }
  CKPT_RETURN_IF_ERROR(env->write_atomic(path_join(run_dir, "LATEST"), name + "\n"));
  return resave ? env->remove_tree(dir) : Status::ok();  // the replaced checkpoint
}

Result<CommitFile> listed_rank_file(const CommitRecord& rec, const std::string& step_dir,
                                    int64_t rank) {
  const std::string name = rank_file_name(rank);
  for (const CommitFile& f : rec.files) {
    if (f.name == name) return f;
  }
  return corrupt(path_join(step_dir, name) + ": not listed in COMMIT.json");
}

Result<CommitRecord> read_commit(Env* env, const std::string& step_dir) {
  const std::string p = path_join(step_dir, "COMMIT.json");
  if (env->object_store(p) != nullptr) {  // one GET: an object is never a FIFO or a link
    auto text = env->read_all(p, 16u << 20);
    if (text.status().code() == Code::kNotFound) {
      return not_found(step_dir + ": no COMMIT.json (not a committed checkpoint)");
    }
    CKPT_RETURN_IF_ERROR(text.status());
    return decode_commit(*text, p);
  }
  CKPT_ASSIGN_OR_RETURN(FileKind kind, env->entry_kind(p));
  if (kind == FileKind::kMissing) {
    return not_found(step_dir + ": no COMMIT.json (not a committed checkpoint)");
  }
  if (kind != FileKind::kRegular) {
    return corrupt(p + ": not a regular file (" +
                   (kind == FileKind::kDirectory ? "a directory"
                    : kind == FileKind::kSymlink ? "a symbolic link"
                                                 : "a device, FIFO or socket") +
                   "); ckpt writes COMMIT.json as a plain file");
  }
  CKPT_ASSIGN_OR_RETURN(std::string text, env->read_all(p, 16u << 20));
  return decode_commit(text, p);
}

namespace {

// The step directories of a run, ascending by step, not yet read (committed and damaged unset).
// On a store one LIST answers all: a name it gives is a "directory" when objects lie under it,
// and a run with no object under it is missing (no is_dir round trips, one per step).
Result<std::vector<CheckpointEntry>> step_dirs(Env* env, const std::string& run_dir) {
  const bool store = env->object_store(run_dir) != nullptr;
  if (!store && !env->is_dir(run_dir)) return not_found(run_dir + ": no such run directory");
  auto listed = env->list_dir(run_dir);
  if (store && listed.status().code() == Code::kNotFound) {
    return not_found(run_dir + ": no such run directory");
  }
  CKPT_ASSIGN_OR_RETURN(auto names, std::move(listed));
  std::vector<CheckpointEntry> out;
  for (const auto& n : names) {
    CheckpointEntry e;
    if (!parse_step_dir_name(n, &e.step)) continue;
    e.dir = path_join(run_dir, n);
    if (!store && !env->is_dir(e.dir)) continue;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

// Reads e's COMMIT.json: committed, damaged (a record that is there but not valid), or neither
// (an interrupted save: no record).
void read_entry(Env* env, CheckpointEntry* e) {
  auto rec = read_commit(env, e->dir);
  if (rec.is_ok() && rec->step == e->step) {
    e->committed = true;
    e->commit = *rec;
    return;
  }
  e->damaged = rec.is_ok() || rec.status().code() != Code::kNotFound;
  e->problem = rec.is_ok() ? path_join(e->dir, "COMMIT.json") + ": names step " +
                                 std::to_string(rec->step) + ", the directory is step " +
                                 std::to_string(e->step)
                           : rec.status().message();
}

}  // namespace

Result<std::vector<CheckpointEntry>> list_checkpoints(Env* env, const std::string& run_dir) {
  CKPT_ASSIGN_OR_RETURN(auto out, step_dirs(env, run_dir));
  for (CheckpointEntry& e : out) read_entry(env, &e);
  return out;
}

namespace {

// Newest first, up to the first committed: a run that keeps many checkpoints (keep_every) costs
// one read of a commit record per restore, not one per checkpoint kept (each a GET on a store).
// The older ones change nothing of the answer. `damaged`: the damaged ones read (all of them
// when nothing is committed), ascending.
Result<std::optional<Latest>> newest_committed(Env* env, const std::string& run_dir,
                                               std::vector<CheckpointEntry>* damaged) {
  CKPT_ASSIGN_OR_RETURN(auto all, step_dirs(env, run_dir));
  const CheckpointEntry* newest = nullptr;
  for (auto it = all.rbegin(); it != all.rend() && newest == nullptr; ++it) {
    read_entry(env, &*it);
    if (it->committed) {
      newest = &*it;
    } else if (it->damaged) {
      damaged->insert(damaged->begin(), *it);
    }
  }
  if (newest == nullptr) return std::optional<Latest>();
  Latest out{newest->step, newest->dir, "", *damaged, *newest->commit};
  const std::string latest_path = path_join(run_dir, "LATEST");
  auto text = env->read_all(latest_path, 4096);
  if (!text.is_ok()) {
    out.note = "LATEST is missing; using the newest committed checkpoint " + path_basename(out.dir);
    return std::optional<Latest>(std::move(out));
  }
  std::string named = *text;
  while (!named.empty() && (named.back() == '\n' || named.back() == '\r')) named.pop_back();
  int64_t step = 0;
  if (!parse_step_dir_name(named, &step)) {
    out.note = "LATEST is damaged (\"" + escape_bytes(named.substr(0, 40)) + "\"); using " +
               path_basename(out.dir);
  } else if (step != newest->step) {
    const CheckpointEntry* named_damaged = nullptr;
    for (const auto& e : out.damaged_newer) {
      if (e.step == step) named_damaged = &e;
    }
    if (named_damaged != nullptr) {
      out.note = "LATEST names " + named + ", whose commit record is damaged (" +
                 named_damaged->problem + "); the newest intact checkpoint is " +
                 path_basename(out.dir);
    } else if (step > newest->step) {
      out.note = "LATEST names " + named +
                 ", which is not committed (an interrupted save); using " + path_basename(out.dir);
    } else {
      out.note = "LATEST names " + named + " but " + path_basename(out.dir) +
                 " is newer and committed (a save was interrupted after its commit); using it";
    }
  }
  return std::optional<Latest>(std::move(out));
}

}  // namespace

Result<Latest> find_latest(Env* env, const std::string& run_dir) {
  std::vector<CheckpointEntry> damaged;
  CKPT_ASSIGN_OR_RETURN(std::optional<Latest> latest, newest_committed(env, run_dir, &damaged));
  if (!latest) return not_found(run_dir + ": no committed checkpoint");
  return std::move(*latest);
}

Result<LatestOrFresh> look_up_latest(Env* env, const std::string& run_dir) {
  LatestOrFresh out;
  auto latest = newest_committed(env, run_dir, &out.damaged);
  if (latest.status().code() == Code::kNotFound) return out;  // no run directory: a fresh start
  CKPT_ASSIGN_OR_RETURN(out.latest, std::move(latest));
  if (out.latest) out.damaged.clear();  // they are latest->damaged_newer
  return out;
}

Status check_rank_against_commit(const CommitRecord& rec, const Node& root,
                                 const std::string& step_dir, const std::string& file) {
  CKPT_RETURN_IF_ERROR(check_root_format(root, file));
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? std::string("none") : out;
  };
  int64_t dir_step = 0;
  if (parse_step_dir_name(path_basename(step_dir), &dir_step) && dir_step != rec.step) {
    return corrupt(path_join(step_dir, "COMMIT.json") + ": names step " + std::to_string(rec.step) +
                   ", the directory is step " + std::to_string(dir_step));
  }
  const AttrValue* step = root.find_attr("step");
  if (step != nullptr &&
      (!std::holds_alternative<int64_t>(*step) || std::get<int64_t>(*step) != rec.step)) {
    return corrupt(file + ": root attribute step is " + std::to_string(root.get_int("step", -1)) +
                   ", the commit record says " + std::to_string(rec.step));
  }
  std::vector<std::string> listed = rec.components;
  std::sort(listed.begin(), listed.end());
  if (root.find_attr("components") != nullptr) {
    std::vector<std::string> in_file = root.get_strings("components");
    std::sort(in_file.begin(), in_file.end());
    if (in_file != listed) {
      return corrupt(file + ": holds components [" + join(in_file) +
                     "], the commit record lists [" + join(listed) + "]");
    }
  }
  std::vector<std::string> groups;
  for (const auto& [name, child] : root.children) groups.push_back(name);
  if (groups != listed) {  // std::map iterates sorted
    return corrupt(file + ": has groups [" + join(groups) + "], the commit record lists [" +
                   join(listed) + "]");
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
  std::vector<std::string> unreadable;  // said once; the structure checks below would repeat it
  for (const CommitFile& f : rec->files) {
    const std::string p = path_join(step_dir, f.name);
    auto size = env->file_size(p);
    if (!size.is_ok()) {
      rep.problems.push_back(size.status().message());
      unreadable.push_back(f.name);
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
      if (h.status().code() != Code::kCorrupt) unreadable.push_back(f.name);
    } else if (*h != f.xxh3) {
      rep.problems.push_back(p + ": xxh3 of the file is " + hex64(*h) +
                             ", the commit record says " + hex64(f.xxh3));
    }
  }
  int64_t dir_step = 0;
  if (parse_step_dir_name(path_basename(step_dir), &dir_step) && dir_step != rec->step) {
    rep.problems.push_back(path_join(step_dir, "COMMIT.json") + ": names step " +
                           std::to_string(rec->step) + ", the directory is step " +
                           std::to_string(dir_step));
  }
  for (int64_t r = 0; r < rec->world_size; ++r) {
    if (std::count(unreadable.begin(), unreadable.end(), rank_file_name(r)) +
            std::count(unreadable.begin(), unreadable.end(), rank_manifest_name(r)) >
        0) {
      continue;
    }
    RankReadStats stats;
    auto node = read_rank(env, step_dir, r, ReadOptions{}, &stats);
    if (!node.is_ok()) {
      rep.problems.push_back(node.status().message());
    } else {
      const std::string file = path_join(step_dir, rank_file_name(r));
      // The directory's name was checked above; "" skips that part.
      Status s = check_rank_against_commit(*rec, *node, "", file);
      if (!s.is_ok()) rep.problems.push_back(s.message());
      auto m = read_manifest(env, step_dir, r);
      if (m.is_ok() && m->step != rec->step) {
        rep.problems.push_back(path_join(step_dir, rank_manifest_name(r)) + ": names step " +
                               std::to_string(m->step) + ", the commit record step " +
                               std::to_string(rec->step));
      }
      for (const CommitFile& f : rec->files) {
        if (m.is_ok() && m->file_xxh3 && f.name == m->file && f.xxh3 != *m->file_xxh3) {
          rep.problems.push_back(path_join(step_dir, rank_manifest_name(r)) + ": file_xxh3 is " +
                                 hex64(*m->file_xxh3) + ", the commit record says " +
                                 hex64(f.xxh3));
        }
        if (m.is_ok() && f.regions_xxh3 && f.name == m->file) {
          // The digest the restore path checks must hold for the bytes verify just accepted.
          auto opened = env->open_random(file);
          auto got = opened.is_ok() ? regions_digest_of(**opened, *m, f.bytes)
                                    : Result<uint64_t>(opened.status());
          if (!got.is_ok()) {
            rep.problems.push_back(got.status().message());
          } else if (*got != *f.regions_xxh3) {
            rep.problems.push_back(file + ": region digest of the file is " + hex64(*got) +
                                   ", the commit record says " + hex64(*f.regions_xxh3));
          }
        }
      }
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
