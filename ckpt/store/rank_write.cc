// write_rank: one rank's file and manifest (docs/format.md §2 step 1, §3, §4).
//
// The passes over the tensor bytes, in order:
//   1. per-tensor XXH3 (every core for a large state): the hashes are attributes of the HDF5
//      datasets, so they must be known before HDF5 writes the structure;
//   2. the structure only is written — groups, attributes, datasets allocated at creation,
//      4 KiB aligned, never filled — by ckpt's HDF5 encoder (or HDF5's writer for the trees it
//      does not take: ckpt/h5/rank_file.h), with each dataset's offset;
//   3. the write pass walks the file in offset order: the structural bytes between extents come
//      from the encoder's image (h5::StructureImage), or are read back from the file HDF5's
//      writer wrote (small, in the page cache); each tensor is written in chunks at its
//      planned offset — its 4 KiB-aligned body with direct I/O through a ring of bounce buffers
//      (DirectWriter: no copy into the page cache, the disk busy while the next chunk is copied)
//      when the Env offers it (Env::posix_direct_io()) and the state has 4 MiB of tensors or
//      more, by pwrite otherwise (Env::posix(), the default; consecutive tensors of the
//      encoder's layout gathered into one pwritev with the zeros between) — and every byte goes
//      through one streaming XXH3 as it is written, in file order: the whole-file hash of the
//      commit record, with no read-back;
//   4. one fdatasync, rename; the manifest (which carries that whole-file hash as `file_xxh3`)
//      is written atomically.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/attrs_digest.h"
#include "ckpt/format/rank_root.h"
#include "ckpt/format/regions.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/store/direct_writer.h"
#include "ckpt/store/hdf5_view.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace ckpt::store {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Chunk of the write pass: small enough to stay in the CPU cache between the hash and the copy
// into the page cache, large enough that the syscall count does not matter.
constexpr size_t kWriteChunk = 1u << 20;

struct TensorRef {
  std::string path;
  Tensor* tensor;
};

void collect(Node& node, const std::string& path, std::vector<TensorRef>* out) {
  for (auto& [name, t] : node.tensors) out->push_back({path + "/" + name, &t});
  for (auto& [name, child] : node.children) collect(child, path + "/" + name, out);
}

// Pass 1: every tensor's hash; large states use every core.
void hash_tensors(const std::vector<TensorRef>& refs) {
  uint64_t total = 0;
  for (const auto& r : refs) total += r.tensor->nbytes;
  const unsigned threads =
      total > (64u << 20) ? std::max(1u, std::thread::hardware_concurrency()) : 1u;
  auto work = [&](unsigned k) {
    for (size_t i = k; i < refs.size(); i += threads) {
      Tensor* t = refs[i].tensor;
      if (!t->alias_of.empty()) continue;
      if (!t->box || t->nbytes <= kBoxChunkBytes) {
        t->xxh3 = xxh3_64(t->data, t->nbytes);
        continue;
      }
      // A large box: each chunk's digest and the whole one from the same cache-resident pass.
      const auto* p = static_cast<const unsigned char*>(t->data);
      Hasher whole;
      t->chunk_xxh3.clear();
      for (uint64_t at = 0; at < t->nbytes; at += kBoxChunkBytes) {
        const uint64_t n = std::min<uint64_t>(kBoxChunkBytes, t->nbytes - at);
        t->chunk_xxh3.push_back(xxh3_64(p + at, n));
        whole.update(p + at, n);
      }
      t->xxh3 = whole.digest();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work, k);
  work(0);
  for (auto& th : pool) th.join();
}

Status check_aliases(const std::vector<TensorRef>& refs, const std::string& where) {
  std::map<std::string, const Tensor*> by_path;
  for (const auto& r : refs) by_path[r.path] = r.tensor;
  for (const auto& r : refs) {
    const std::string& target = r.tensor->alias_of;
    if (target.empty()) continue;
    auto it = by_path.find(target);
    if (it == by_path.end() || !it->second->alias_of.empty()) {
      return invalid_argument(where + ": tensor \"" + r.path + "\" is an alias of \"" + target +
                              "\", which is not a tensor written in this file");
    }
  }
  for (const auto& r : refs) {
    if (r.tensor->box) {
      const std::string problem = box_problem(*r.tensor->box, r.tensor->shape);
      if (!problem.empty()) {
        return invalid_argument(where + ": tensor \"" + r.path + "\": " + problem);
      }
      if (r.tensor->box_elsewhere() && r.tensor->nbytes > 0) {
        return invalid_argument(where + ": tensor \"" + r.path + "\" is written by rank " +
                                std::to_string(r.tensor->box->owner) + " but has bytes here");
      }
    }
    if (r.tensor->alias_of.empty() && r.tensor->nbytes > 0 && r.tensor->data == nullptr) {
      return invalid_argument(where + ": tensor \"" + r.path + "\" has " +
                              std::to_string(r.tensor->nbytes) + " bytes but no data");
    }
  }
  return Status::ok();
}

// What a gathered write takes for zeros between tensors.
const unsigned char kZeroPage[Env::kDirectIoAlignment] = {};

// The structural bytes of the file being written: from the encoder's image when it wrote them
// (h5::StructureImage: no read back), else read back from the file HDF5 wrote.
class StructureBytes {
 public:
  static Result<StructureBytes> open(Env* env, const std::string& path,
                                     const h5::StructureImage& image) {
    StructureBytes s;
    s.image_ = &image;
    if (!image.runs.empty()) {
      s.size_ = image.file_bytes;
      return s;
    }
    CKPT_ASSIGN_OR_RETURN(s.file_, env->open_random(path));
    s.size_ = s.file_->size();
    return s;
  }
  uint64_t size() const { return size_; }
  // Whether every byte between two tensor extents is zero: true of the encoder's layout (the
  // superblock before the first extent, the headers after the last), not of HDF5's.
  bool zeros_between() const { return !file_; }
  // The bytes of [from, to) as spans of the image and of kZeroPage (image only), for a
  // write pass that rewrites every byte of a reused file.
  void spans(uint64_t from, uint64_t to, std::vector<WriteSpan>* out) const {
    while (from < to) {
      uint64_t next = to;  // the end of what is emitted this round
      const unsigned char* src = nullptr;
      for (const auto& [offset, bytes] : image_->runs) {
        const uint64_t end = offset + bytes.size();
        if (offset <= from && from < end) {
          next = std::min(to, end);
          src = reinterpret_cast<const unsigned char*>(bytes.data()) + (from - offset);
          break;
        }
        if (offset > from) next = std::min(next, offset);
      }
      if (src == nullptr) next = std::min(next, from + sizeof kZeroPage);
      out->push_back({src != nullptr ? src : kZeroPage, static_cast<size_t>(next - from)});
      from = next;
    }
  }
  Status read_at(uint64_t at, char* out, size_t n) const {
    if (file_) return file_->read_at(at, out, n);
    if (at > size_ || n > size_ - at) return internal_error("structure read past the file's end");
    std::memset(out, 0, n);
    for (const auto& [offset, bytes] : image_->runs) {
      const uint64_t from = std::max(at, offset), to = std::min(at + n, offset + bytes.size());
      if (from < to) std::memcpy(out + (from - at), bytes.data() + (from - offset), to - from);
    }
    return Status::ok();
  }

 private:
  const h5::StructureImage* image_ = nullptr;
  std::unique_ptr<RandomAccessFile> file_;
  uint64_t size_ = 0;
};

// Hashes the structural bytes in [from, to) of `file` into `whole`, and (a gap region of
// ckpt/format/regions.h when not empty) on their own into `gaps`.
Status hash_structure(const StructureBytes& file, uint64_t from, uint64_t to,
                      std::unique_ptr<char[]>* buf, Hasher* whole, std::vector<uint64_t>* gaps) {
  if (from >= to) return Status::ok();
  Hasher gap;
  while (from < to) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kWriteChunk, to - from));
    CKPT_RETURN_IF_ERROR(file.read_at(from, buf->get(), n));
    whole->update(buf->get(), n);
    gap.update(buf->get(), n);
    from += n;
  }
  gaps->push_back(gap.digest());
  return Status::ok();
}

struct Filled {
  uint64_t file_bytes = 0;
  uint64_t file_xxh3 = 0;
  std::vector<uint64_t> gap_xxh3;  // of each gap region, in file order
};

// Where pass 3 puts a tensor's bytes: the block-aligned body through direct I/O when the Env
// offers it and the filesystem allows it (no copy into the page cache; the rest is written buffered
// after the direct writes are done, so no page is written both ways at once), else all of it
// buffered.
class ExtentSink {
 public:
  // `bridge_gaps`: the bytes between one extent and the next are zeros (ckpt's encoder wrote the
  // file), so consecutive buffered writes go out as one gathered write with zeros between.
  ExtentSink(Env* env, const std::string& path, std::unique_ptr<WritableFile> buffered,
             bool try_direct, bool bridge_gaps)
      : buffered_(std::move(buffered)), bridge_gaps_(bridge_gaps) {
    if (!try_direct) return;
    std::vector<std::unique_ptr<WritableFile>> files;
    while (files.size() < DirectWriter::kWriters) {
      auto direct = env->open_for_direct_update(path);
      if (!direct.is_ok()) return;  // no direct I/O here: everything through `buffered`
      files.push_back(std::move(*direct));
    }
    direct_ = std::make_unique<DirectWriter>(std::move(files));
  }
  bool direct() const { return direct_ != nullptr; }

  // Writes [p, p + n) at `offset` (a tensor extent, 4 KiB aligned), feeding `whole` in order.
  Status write(uint64_t offset, const unsigned char* p, uint64_t n, Hasher* whole) {
    const uint64_t body = direct_ ? n / Env::kDirectIoAlignment * Env::kDirectIoAlignment : 0;
    for (uint64_t done = 0; done < body;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(DirectWriter::kChunk, body - done));
      CKPT_ASSIGN_OR_RETURN(const unsigned char* copy, direct_->put(offset + done, p + done, k));
      whole->update(copy, k);  // the bounce buffer, hot in cache
      done += k;
    }
    for (uint64_t done = body; done < n;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kWriteChunk, n - done));
      whole->update(p + done, k);
      if (direct_) {
        after_direct_.push_back({offset + done, p + done, k});
      } else {
        CKPT_RETURN_IF_ERROR(queue(offset + done, p + done, k));
      }
      done += k;
    }
    return Status::ok();
  }

  // Structural bytes (or zeros) at `offset`, for a reused file whose every byte is rewritten.
  // With direct I/O they wait with the tails: the page a tensor's tail shares with them is
  // written once the direct writes are done. `spans` point into memory that outlives finish().
  Status put_spans(uint64_t offset, const std::vector<WriteSpan>& spans) {
    for (const WriteSpan& w : spans) {
      const auto* p = static_cast<const unsigned char*>(w.src);
      if (direct_) {
        after_direct_.push_back({offset, p, w.nbytes});
      } else {
        CKPT_RETURN_IF_ERROR(queue(offset, p, w.nbytes));
      }
      offset += w.nbytes;
    }
    return Status::ok();
  }

  // Every byte on its way to the disk; then sync(): fdatasync.
  Status finish() {
    if (direct_) {
      CKPT_RETURN_IF_ERROR(direct_->finish());
      // In file order, gathered only where they touch: zeros bridged over a gap could land on
      // a tensor body the direct writes just put there.
      bridge_gaps_ = false;
      for (const Deferred& t : after_direct_) CKPT_RETURN_IF_ERROR(queue(t.offset, t.p, t.n));
    }
    return flush();
  }
  Status sync() { return buffered_->sync(); }
  Status close() { return buffered_->close(); }

 private:
  struct Deferred {  // a buffered write that waits for the direct ones: tails, structure, zeros
    uint64_t offset;
    const unsigned char* p;
    size_t n;
  };
  // A buffered write, gathered with the ones before it when it continues them (past a gap of
  // zeros, with bridge_gaps_): a state of many small tensors takes a few syscalls, not one each.
  Status queue(uint64_t offset, const unsigned char* p, size_t n) {
    const uint64_t end = pending_at_ + pending_bytes_;
    const bool continues = !pending_.empty() && offset >= end &&
                           (offset == end || (bridge_gaps_ && offset - end <= sizeof kZeroPage));
    if (!pending_.empty() && !continues) CKPT_RETURN_IF_ERROR(flush());
    if (pending_.empty()) pending_at_ = offset;
    if (offset > pending_at_ + pending_bytes_) {
      const size_t gap = static_cast<size_t>(offset - pending_at_ - pending_bytes_);
      pending_.push_back({kZeroPage, gap});
      pending_bytes_ += gap;
    }
    pending_.push_back({p, n});
    pending_bytes_ += n;
    if (pending_.size() >= kGatherSpans || pending_bytes_ >= kGatherBytes) return flush();
    return Status::ok();
  }
  Status flush() {
    if (pending_.empty()) return Status::ok();
    Status s = buffered_->write_gather_at(pending_at_, pending_.data(), pending_.size());
    pending_.clear();
    pending_bytes_ = 0;
    return s;
  }
  static constexpr size_t kGatherSpans = 1024;
  static constexpr uint64_t kGatherBytes = 16u << 20;

  std::unique_ptr<WritableFile> buffered_;
  std::unique_ptr<DirectWriter> direct_;
  std::vector<Deferred> after_direct_;
  bool bridge_gaps_ = false;
  std::vector<WriteSpan> pending_;
  uint64_t pending_at_ = 0, pending_bytes_ = 0;
};

// What runs while the rank file syncs (write_rank: the manifest, written and synced itself),
// given what the write pass found.
using DuringSync = std::function<Status(const Filled&)>;

// Pass 3 (see the top): `extents` are sorted by offset, as write_structure returns them.
// `during_sync` runs on this thread while another one fdatasyncs the file.
Result<Filled> fill_and_hash_once(Env* env, const std::string& tmp_path,
                                  const std::vector<h5::DatasetExtent>& extents,
                                  const h5::StructureImage& image, RankWriteStats* stats,
                                  bool try_direct, const DuringSync& during_sync) {
  CKPT_ASSIGN_OR_RETURN(StructureBytes structure, StructureBytes::open(env, tmp_path, image));
  const uint64_t size = structure.size();
  CKPT_ASSIGN_OR_RETURN(auto buffered, env->open_for_update(tmp_path));
  // A reused file (a spare, run_dir.h) keeps its old bytes wherever this pass does not write:
  // it writes every byte, the structure and zeros too.
  const bool every_byte = image.reused;
  ExtentSink sink(env, tmp_path, std::move(buffered), try_direct, structure.zeros_between());
  std::vector<WriteSpan> gap_spans;
  auto rewrite = [&](uint64_t from, uint64_t to) -> Status {
    if (!every_byte || from >= to) return Status::ok();
    gap_spans.clear();
    structure.spans(from, to, &gap_spans);
    return sink.put_spans(from, gap_spans);
  };
  if (stats != nullptr) stats->direct_io = sink.direct();
  std::unique_ptr<char[]> buf(new char[kWriteChunk]);
  Hasher whole;
  std::vector<uint64_t> gaps;
  uint64_t pos = 0;
  const auto t0 = Clock::now();
  for (const auto& e : extents) {
    const Tensor& t = *e.tensor;
    if (t.nbytes == 0) continue;
    if (e.offset < pos || e.offset > size || t.nbytes > size - e.offset) {
      return internal_error(tmp_path + ": HDF5 placed \"" + e.path + "\" at [" +
                            std::to_string(e.offset) + ", +" + std::to_string(t.nbytes) +
                            "), outside the file's " + std::to_string(size) +
                            " bytes or over the previous extent");
    }
    CKPT_RETURN_IF_ERROR(hash_structure(structure, pos, e.offset, &buf, &whole, &gaps));
    CKPT_RETURN_IF_ERROR(rewrite(pos, e.offset));
    CKPT_RETURN_IF_ERROR(
        sink.write(e.offset, static_cast<const unsigned char*>(t.data), t.nbytes, &whole));
    pos = e.offset + t.nbytes;
  }
  CKPT_RETURN_IF_ERROR(hash_structure(structure, pos, size, &buf, &whole, &gaps));
  CKPT_RETURN_IF_ERROR(rewrite(pos, size));
  Filled filled{size, whole.digest(), std::move(gaps)};
  const auto t1 = Clock::now();
  CKPT_RETURN_IF_ERROR(sink.finish());
  Status synced;
  std::thread syncer([&] { synced = sink.sync(); });
  Status during = during_sync(filled);
  syncer.join();
  CKPT_RETURN_IF_ERROR(synced);
  CKPT_RETURN_IF_ERROR(during);
  CKPT_RETURN_IF_ERROR(sink.close());
  if (stats != nullptr) {
    stats->write_seconds = std::chrono::duration<double>(t1 - t0).count();
    stats->sync_seconds = seconds_since(t1);
  }
  return filled;
}

// Pass 3 on an object store: the same bytes in the same order, appended to the object as it
// uploads (ckpt/io/s3/upload.h) — the structure from the local scratch file HDF5 wrote, the
// tensors straight from memory — so no full copy of the checkpoint lands on a local disk.
Result<Filled> stream_to_object(Env* env, const std::string& structure_path,
                                const std::string& final_path,
                                const std::vector<h5::DatasetExtent>& extents,
                                const h5::StructureImage& image, RankWriteStats* stats) {
  CKPT_ASSIGN_OR_RETURN(StructureBytes structure,
                        StructureBytes::open(Env::posix(), structure_path, image));
  const uint64_t size = structure.size();
  // The rank file is made only where none exists (a second writer never replaces one). One left
  // by a writer that did not commit this step (killed mid-save, or a re-save that withdrew the
  // commit: save_dir) is removed first; one under a commit record is never touched.
  // Existence by one HEAD each (file_size): entry_kind would also LIST for a missing name.
  auto exists = [&](const std::string& p) -> Result<bool> {
    auto size = env->file_size(p);
    if (size.is_ok()) return true;
    if (size.status().code() == Code::kNotFound) return false;
    return size.status();
  };
  const std::string commit_path = path_join(path_dirname(final_path), "COMMIT.json");
  CKPT_ASSIGN_OR_RETURN(const bool left, exists(final_path));
  if (left) {
    CKPT_ASSIGN_OR_RETURN(const bool committed, exists(commit_path));
    if (committed) {
      return locked(final_path + ": this step was committed by another writer (" + commit_path +
                    " exists): its files are kept");
    }
    CKPT_RETURN_IF_ERROR(env->remove_file(final_path));
  }
  CKPT_ASSIGN_OR_RETURN(auto out, env->object_store(final_path)->new_exclusive(final_path));
  std::unique_ptr<char[]> buf(new char[kWriteChunk]);
  Hasher whole;
  std::vector<uint64_t> gaps;
  uint64_t pos = 0;
  auto copy_structure = [&](uint64_t to) -> Status {
    if (pos >= to) return Status::ok();
    Hasher gap;
    while (pos < to) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kWriteChunk, to - pos));
      CKPT_RETURN_IF_ERROR(structure.read_at(pos, buf.get(), n));
      whole.update(buf.get(), n);
      gap.update(buf.get(), n);
      CKPT_RETURN_IF_ERROR(out->append(buf.get(), n));
      pos += n;
    }
    gaps.push_back(gap.digest());
    return Status::ok();
  };
  const auto t0 = Clock::now();
  for (const auto& e : extents) {
    const Tensor& t = *e.tensor;
    if (t.nbytes == 0) continue;
    if (e.offset < pos || e.offset > size || t.nbytes > size - e.offset) {
      return internal_error(final_path + ": HDF5 placed \"" + e.path + "\" outside the file");
    }
    CKPT_RETURN_IF_ERROR(copy_structure(e.offset));
    const auto* p = static_cast<const unsigned char*>(t.data);
    for (uint64_t done = 0; done < t.nbytes;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kWriteChunk, t.nbytes - done));
      whole.update(p + done, k);
      CKPT_RETURN_IF_ERROR(out->append(p + done, k));
      done += k;
    }
    pos = e.offset + t.nbytes;
  }
  CKPT_RETURN_IF_ERROR(copy_structure(size));
  const auto t1 = Clock::now();
  CKPT_RETURN_IF_ERROR(out->close());  // the last part, then CompleteMultipartUpload
  if (stats != nullptr) {
    stats->write_seconds = std::chrono::duration<double>(t1 - t0).count();
    stats->sync_seconds = seconds_since(t1);
  }
  return Filled{size, whole.digest(), std::move(gaps)};
}

// Below this many tensor bytes the write pass goes through the page cache (the one fdatasync
// after it puts them on the disk): direct I/O's handles, writer threads and bounce buffers cost
// more than the page cache does for a small state (a 3 MB one: 10% of its save's CPU time).
constexpr uint64_t kDirectIoMinBytes = 4u << 20;

// Direct I/O is only a faster way to the same bytes: a filesystem that opens with O_DIRECT but
// refuses the writes (EINVAL on some) gets the whole pass again through pwrite. A real I/O error
// fails the second attempt too, and is what the caller sees.
Result<Filled> fill_and_hash(Env* env, const std::string& tmp_path,
                             const std::vector<h5::DatasetExtent>& extents,
                             const h5::StructureImage& image, uint64_t tensor_bytes,
                             RankWriteStats* stats, const DuringSync& during_sync) {
  auto filled = fill_and_hash_once(env, tmp_path, extents, image, stats,
                                   tensor_bytes >= kDirectIoMinBytes, during_sync);
  if (filled.is_ok() || (stats != nullptr && !stats->direct_io)) return filled;
  return fill_and_hash_once(env, tmp_path, extents, image, stats, false, during_sync);
}

}  // namespace

Result<Manifest> write_rank(Env* env, const std::string& step_dir, int64_t rank, int64_t step,
                            int64_t world_size, Node* root, RankWriteStats* stats) {
  CKPT_RETURN_IF_ERROR(check_step(step));
  const std::string name = rank_file_name(rank);
  const std::string final_path = path_join(step_dir, name);
  // On an object store HDF5 writes the structure to a local scratch file and pass 3 streams the
  // rank file to its final name, which appears whole when its upload completes: no rename.
  ObjectStore* store = env->object_store(final_path);
  std::string tmp_path = final_path + ".tmp";
  if (store != nullptr) {
    CKPT_ASSIGN_OR_RETURN(tmp_path, scratch_path(store, name));
  }
  Env* tmp_env = store != nullptr ? Env::posix() : env;
  RankWriteStats local;

  std::vector<TensorRef> refs;
  collect(*root, "", &refs);
  CKPT_RETURN_IF_ERROR(check_aliases(refs, final_path));
  // A file holding pieces of global tensors is format version 2 (docs/format.md §8).
  if (std::any_of(refs.begin(), refs.end(), [](const TensorRef& r) { return r.tensor->box; })) {
    root->attrs["format_version"] = kBoxFormatVersion;
  }
  auto t0 = Clock::now();
  hash_tensors(refs);
  local.hash_seconds = seconds_since(t0);

  t0 = Clock::now();
  // This rank's spare file (run_dir.h), on a file system: renamed to be the .tmp and
  // overwritten in place when it has the new file's size (else truncated).
  uint64_t tensor_bytes = 0;
  for (const auto& r : refs) tensor_bytes += r.tensor->alias_of.empty() ? r.tensor->nbytes : 0;
  const bool reuse = store == nullptr;
  if (reuse) {
    const std::string spare = spare_rank_file(step_dir, rank);
    if (env->exists(spare)) (void)env->rename(spare, tmp_path);
  }
  h5::StructureImage image;
  auto extents = h5::write_structure(tmp_path, *root, &image, reuse);
  local.structure_seconds = seconds_since(t0);
  // The manifest (docs/format.md §4), from what the write pass found. On a file system it is
  // written to its .tmp and synced while the rank file syncs (both durable before either is
  // renamed, one directory sync for both renames); on an object store, one PUT after the upload.
  const std::string manifest_path = path_join(step_dir, rank_manifest_name(rank));
  Manifest m;
  std::string manifest;
  auto build_manifest = [&](const Filled& f) -> Status {
    m = Manifest{};
    m.file = name;
    m.file_bytes = f.file_bytes;
    m.file_xxh3 = f.file_xxh3;
    m.step = step;
    m.rank = rank;
    m.world_size = world_size;
    m.attrs_xxh3 = attrs_digest(*root);
    for (const auto& e : *extents) {
      const Tensor& t = *e.tensor;
      m.tensors.push_back({e.path, t.dtype, t.shape, e.offset, t.nbytes, t.xxh3, t.box,
                           t.chunk_xxh3.empty() ? 0 : kBoxChunkBytes, t.chunk_xxh3});
    }
    std::vector<FileRegion> regions = file_regions(m, m.file_bytes);
    size_t gap = 0, gaps = 0;
    for (FileRegion& r : regions) {
      if (r.tensor) continue;
      ++gaps;
      if (gap < f.gap_xxh3.size()) r.xxh3 = f.gap_xxh3[gap++];
    }
    if (gaps != f.gap_xxh3.size()) {
      return internal_error(final_path + ": the write pass saw " +
                            std::to_string(f.gap_xxh3.size()) + " gaps, the manifest has " +
                            std::to_string(gaps));
    }
    m.regions_xxh3 = regions_digest(regions);
    manifest = encode_manifest(m);
    return Status::ok();
  };
  const std::string manifest_tmp = manifest_path + ".tmp";
  auto manifest_during_sync = [&](const Filled& f) -> Status {
    CKPT_RETURN_IF_ERROR(build_manifest(f));
    return write_synced(env, manifest_tmp, manifest);
  };
  Result<Filled> filled = !extents.is_ok() ? Result<Filled>(extents.status())
                          : store != nullptr
                              ? stream_to_object(env, tmp_path, final_path, *extents, image, &local)
                              : fill_and_hash(env, tmp_path, *extents, image, tensor_bytes, &local,
                                              manifest_during_sync);
  if (!filled.is_ok()) {
    // A full disk or an I/O error leaves nothing behind (a crash leaves the .tmp files, which
    // retention and the next save of this step clean up).
    if (tmp_env->exists(tmp_path)) (void)tmp_env->remove_file(tmp_path);
    if (store == nullptr && env->exists(manifest_tmp)) (void)env->remove_file(manifest_tmp);
    return filled.status();
  }

  t0 = Clock::now();
  if (store != nullptr) {
    (void)Env::posix()->remove_file(tmp_path);
    CKPT_RETURN_IF_ERROR(build_manifest(*filled));
    CKPT_RETURN_IF_ERROR(env->write_atomic(manifest_path, manifest));
  } else {
    CKPT_RETURN_IF_ERROR(env->rename(tmp_path, final_path));
    CKPT_RETURN_IF_ERROR(env->rename(manifest_tmp, manifest_path));
    CKPT_RETURN_IF_ERROR(env->sync_dir(step_dir));
  }
  local.manifest_seconds = seconds_since(t0);
  local.file_bytes = filled->file_bytes;
  local.file_xxh3 = filled->file_xxh3;
  local.manifest_bytes = manifest.size();
  local.manifest_xxh3 = xxh3_64(manifest.data(), manifest.size());
  local.tensors = m.tensors.size();
  for (const auto& e : m.tensors) local.tensor_bytes += e.nbytes;
  if (stats != nullptr) *stats = local;
  return m;
}

}  // namespace ckpt::store
