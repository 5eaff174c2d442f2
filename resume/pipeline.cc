#include "resume/pipeline.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ckpt/base/hash.h"

namespace ckpt::resume {
namespace {

// The whole file's XXH3, fed with chunks finished in any order and consumed in file order (step 4
// of the protocol in pipeline.h). The thread whose chunk is next holds the turn: it hashes that
// chunk outside the lock, then every following chunk already left behind, then hands the turn
// on. Only the turn holder touches the hasher.
class FileHash {
 public:
  explicit FileHash(const ReadPlan& plan) : plan_(plan), left_(plan.chunks.size(), nullptr) {}

  // False when the run stopped while this chunk waited for its turn.
  bool feed(size_t index, const unsigned char* bytes, bool stays) {
    std::unique_lock<std::mutex> lock(mu_);
    if (index != next_) {
      if (stays) {
        left_[index] = bytes;
        return true;
      }
      turn_.wait(lock, [&] { return next_ == index || stopped_; });
      if (stopped_) return false;
    }
    for (size_t at = index;;) {
      lock.unlock();
      hasher_.update(bytes, plan_.chunks[at].nbytes);
      lock.lock();
      next_ = ++at;
      if (at == left_.size() || left_[at] == nullptr) break;
      bytes = left_[at];
    }
    turn_.notify_all();
    return true;
  }

  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    turn_.notify_all();
  }

  // After every worker stopped: whether every chunk was hashed, and the digest.
  bool complete() const { return next_ == plan_.chunks.size(); }
  uint64_t digest() const { return hasher_.digest(); }

 private:
  const ReadPlan& plan_;
  std::mutex mu_;
  std::condition_variable turn_;
  std::vector<const unsigned char*> left_;  // chunks whose bytes stay, waiting for the turn
  size_t next_ = 0;
  bool stopped_ = false;
  Hasher hasher_;
};

class Run {
 public:
  Run(const RandomAccessFile& file, const ReadPlan& plan, ChunkSink* sink,
      const PipelineOptions& options, FileHash* file_hash)
      : file_(file),
        plan_(plan),
        sink_(sink),
        options_(options),
        file_hash_(file_hash),
        in_parts_(!sink->overlaps_hashing()) {}

  void worker(unsigned id) {
    Hashers hasher;
    Scratch scratch;
    try {
      while (!stop_.load(std::memory_order_relaxed)) {
        const size_t u = next_unit_.fetch_add(1, std::memory_order_relaxed);
        if (u >= plan_.units.size()) return;
        const PlanUnit& unit = plan_.units[u];
        for (uint32_t c = 0; c < unit.chunk_count; ++c) {
          if (stop_.load(std::memory_order_relaxed)) return;
          Status s = chunk(id, unit.first_chunk + c, &hasher, &scratch);
          if (!s.is_ok()) {
            fail(std::move(s));
            return;
          }
        }
      }
    } catch (const std::exception& e) {  // bad_alloc from a sink or the hasher
      fail(internal_error(file_.path() + ": restore worker: " + e.what()));
    }
  }

  Status first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  void fail(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.is_ok()) error_ = std::move(s);
    stop_.store(true, std::memory_order_relaxed);
    if (file_hash_ != nullptr) file_hash_->stop();
  }

  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> chunks{0};
  std::atomic<uint64_t> scattered{0};
  std::atomic<uint64_t> hashed_in_cache{0};

 private:
  struct Hashers {  // a worker's: of the tensor it is in, and of the tensor's chunk
    Hasher whole;
    Hasher chunk;
  };
  struct Scratch {  // a worker's, reused from chunk to chunk
    std::vector<ReadSpan> spans;
    std::vector<const unsigned char*> piece_bytes;
  };

  Status chunk(unsigned id, size_t index, Hashers* hasher, Scratch* scratch) {
    const PlanChunk& c = plan_.chunks[index];
    if (file_hash_ == nullptr && c.piece_count > 1) {
      scratch->spans.clear();
      scratch->piece_bytes.clear();
      if (sink_->scatter(id, c, &scratch->spans, &scratch->piece_bytes)) {
        if (scratch->piece_bytes.size() != c.piece_count) {
          return internal_error(file_.path() + ": restore sink scattered a chunk wrongly");
        }
        const ReadSpan* spans = scratch->spans.data();
        const size_t count = scratch->spans.size();
        CKPT_RETURN_IF_ERROR(options_.verify_hashes
                                 ? file_.read_scatter_at(c.offset, spans, count)
                                 : file_.read_scatter_streaming(c.offset, spans, count));
        if (options_.verify_hashes) {
          CKPT_RETURN_IF_ERROR(hash_pieces(c, nullptr, scratch->piece_bytes.data(), hasher));
        }
        read_bytes.fetch_add(c.nbytes, std::memory_order_relaxed);
        chunks.fetch_add(1, std::memory_order_relaxed);
        scattered.fetch_add(1, std::memory_order_relaxed);
        return Status::ok();
      }
    }
    if (file_hash_ == nullptr && options_.verify_hashes && sink_->hash_only(c)) {
      HashVisit visit{this, &c, hasher, 0, Status::ok()};
      CKPT_ASSIGN_OR_RETURN(const bool visited,
                            file_.visit_at(c.offset, c.nbytes, &HashVisit::run, &visit));
      if (visited) {
        CKPT_RETURN_IF_ERROR(visit.finished());
        read_bytes.fetch_add(c.nbytes, std::memory_order_relaxed);
        hashed_in_cache.fetch_add(c.nbytes, std::memory_order_relaxed);
        chunks.fetch_add(1, std::memory_order_relaxed);
        return Status::ok();
      }
    }
    CKPT_ASSIGN_OR_RETURN(unsigned char* buf, sink_->acquire(id, c));
    Status s = Status::ok();
    bool hashed = false;
    if (!options_.verify_hashes && file_hash_ == nullptr && sink_->bytes_stay(c)) {
      const ReadSpan whole{buf, static_cast<size_t>(c.nbytes)};  // into place, read no more
      s = file_.read_scatter_streaming(c.offset, &whole, 1);
    } else if (options_.verify_hashes && file_hash_ == nullptr && in_parts_) {
      // Each part hashed as it lands, still in cache.
      HashVisit visit{this, &c, hasher, 0, Status::ok()};
      s = file_.read_visiting(c.offset, buf, c.nbytes, &HashVisit::run, &visit);
      if (s.is_ok()) s = visit.finished();
      hashed = true;
    } else {
      s = file_.read_at(c.offset, buf, c.nbytes);
    }
    if (s.is_ok()) s = sink_->deliver(id, c, buf);
    if (s.is_ok() && options_.verify_hashes && !hashed) s = hash_pieces(c, buf, nullptr, hasher);
    if (s.is_ok() && file_hash_ != nullptr && !file_hash_->feed(index, buf, sink_->bytes_stay(c))) {
      s = internal_error(file_.path() + ": restore stopped by an earlier error");
    }
    Status r = sink_->release(id, c, buf);
    CKPT_RETURN_IF_ERROR(s);
    CKPT_RETURN_IF_ERROR(r);
    read_bytes.fetch_add(c.nbytes, std::memory_order_relaxed);
    chunks.fetch_add(1, std::memory_order_relaxed);
    return Status::ok();
  }

  // A chunk hashed as the file shows it (visit_at, read_visiting): in one part or several,
  // consecutive and in order. If the file shrinks underneath, run() stops anywhere inside
  // hash_part: it holds no lock and nothing to destroy until it returns, and `status` and `at`
  // are written only then. After the first error the other parts are not hashed.
  struct HashVisit {
    Run* owner;
    const PlanChunk* chunk;
    Hashers* hasher;
    uint64_t at = 0;  // bytes of the chunk shown so far
    Status status;
    static void run(const unsigned char* bytes, size_t n, void* arg) {
      auto* v = static_cast<HashVisit*>(arg);
      if (v->status.is_ok()) v->status = v->owner->hash_part(*v->chunk, v->at, bytes, n, v->hasher);
      v->at += n;
    }
    // The first mismatch, or an error if the file showed less or more than the chunk.
    Status finished() const {
      CKPT_RETURN_IF_ERROR(status);
      if (at == chunk->nbytes) return Status::ok();
      return internal_error(owner->file_.path() + ": a read showed " + std::to_string(at) +
                            " of a chunk's " + std::to_string(chunk->nbytes) + " bytes");
    }
  };

  // Piece k's bytes are at buf + its chunk offset, or at piece_bytes[k] for a scattered chunk.
  Status hash_pieces(const PlanChunk& c, const unsigned char* buf,
                     const unsigned char* const* piece_bytes, Hashers* h) {
    if (piece_bytes == nullptr) return hash_part(c, 0, buf, c.nbytes, h);
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      CKPT_RETURN_IF_ERROR(hash_piece(p, p.tensor_offset, piece_bytes[k], p.nbytes, h));
    }
    return Status::ok();
  }

  // The chunk's bytes [from, from + n), at `bytes`: what of each piece lies there.
  Status hash_part(const PlanChunk& c, uint64_t from, const unsigned char* bytes, uint64_t n,
                   Hashers* h) {
    const uint64_t to = from + n;
    for (uint32_t k = 0; k < c.piece_count; ++k) {
      const PlanPiece& p = plan_.pieces[c.first_piece + k];
      const uint64_t begin = std::max(from, p.chunk_offset);
      const uint64_t end = std::min(to, p.chunk_offset + p.nbytes);
      if (begin >= end) continue;
      CKPT_RETURN_IF_ERROR(hash_piece(p, p.tensor_offset + (begin - p.chunk_offset),
                                      bytes + (begin - from), end - begin, h));
    }
    return Status::ok();
  }

  // Bytes [at, at + n) of piece p's tensor. Its bytes arrive in order within a unit, so one
  // Hasher per worker suffices: reset at a tensor's first byte, digest at its last (the same for
  // its chunks).
  Status hash_piece(const PlanPiece& p, uint64_t at, const unsigned char* bytes, uint64_t n,
                    Hashers* h) {
    const PlanTensor& t = plan_.tensors[p.tensor];
    if (!t.chunk_xxh3.empty()) CKPT_RETURN_IF_ERROR(hash_chunks(t, at, bytes, n, &h->chunk));
    if (at == 0 && n == t.nbytes) {
      const uint64_t got = xxh3_64(bytes, n);
      if (got != t.xxh3) return hash_mismatch(t.path, file_.path(), t.offset, t.xxh3, got);
      return Status::ok();
    }
    if (at == 0) h->whole.reset();
    h->whole.update(bytes, n);
    if (at + n == t.nbytes) {
      const uint64_t got = h->whole.digest();
      if (got != t.xxh3) return hash_mismatch(t.path, file_.path(), t.offset, t.xxh3, got);
    }
    return Status::ok();
  }

  // Bytes [at, at + n) of tensor t against its chunk digests, chunk by chunk.
  Status hash_chunks(const PlanTensor& t, uint64_t at, const unsigned char* bytes, uint64_t n,
                     Hasher* hasher) {
    const uint64_t size = t.chunk_bytes;
    for (const uint64_t end = at + n; at < end;) {
      const uint64_t k = at / size;
      const uint64_t first = k * size, last = std::min(first + size, t.nbytes);
      const uint64_t take = std::min(end, last) - at;
      uint64_t got = 0;
      if (at == first && take == last - first) {
        got = xxh3_64(bytes, take);
      } else {
        if (at == first) hasher->reset();
        hasher->update(bytes, take);
        if (at + take == last) got = hasher->digest();
      }
      at += take;
      bytes += take;
      if (at != last) continue;  // the chunk goes on in the next piece
      if (k >= t.chunk_xxh3.size() || got != t.chunk_xxh3[k]) {
        return corrupt("tensor \"" + t.path + "\" in " + file_.path() +
                       ": xxh3 mismatch in bytes [" + std::to_string(first) + ", " +
                       std::to_string(last) + ") (chunk " + std::to_string(k) + "; expected " +
                       (k < t.chunk_xxh3.size() ? hex64(t.chunk_xxh3[k]) : std::string("none")) +
                       ", got " + hex64(got) + ")");
      }
    }
    return Status::ok();
  }

  const RandomAccessFile& file_;
  const ReadPlan& plan_;
  ChunkSink* sink_;
  PipelineOptions options_;
  FileHash* file_hash_;
  // Hash each part of a chunk as it lands (read_visiting), while it is in cache; not when the
  // sink's deliver() starts a device copy that the hash should overlap.
  const bool in_parts_;
  std::atomic<size_t> next_unit_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  Status error_;
};

}  // namespace

Status hash_mismatch(const std::string& tensor, const std::string& file, uint64_t offset,
                     uint64_t expected, uint64_t got) {
  char off[32];
  std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(offset));
  return corrupt("tensor \"" + tensor + "\" in " + file + ": xxh3 mismatch at offset " + off +
                 " (expected " + hex64(expected) + ", got " + hex64(got) + ")");
}

unsigned default_io_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return std::clamp(hw == 0 ? 2u : hw, 2u, 16u);
}

unsigned io_threads_for(const RandomAccessFile& file, unsigned requested) {
  if (requested != 0) return requested;
  return std::clamp(file.read_profile().parallel_reads, default_io_threads(), 64u);
}

Status run_pipeline(const RandomAccessFile& file, const ReadPlan& plan, ChunkSink* sink,
                    const PipelineOptions& options, PipelineStats* stats) {
  // Zero-byte tensors have no chunk; their recorded hash must still be the empty input's.
  if (options.verify_hashes) {
    const uint64_t empty = xxh3_64(nullptr, 0);
    for (const PlanTensor& t : plan.tensors) {
      if (t.nbytes == 0 && t.xxh3 != empty) {
        return hash_mismatch(t.path, file.path(), t.offset, t.xxh3, empty);
      }
    }
  }
  const unsigned threads = static_cast<unsigned>(
      std::min<size_t>(std::max(1u, options.io_threads), std::max<size_t>(1, plan.units.size())));
  const bool check_file = options.verify_hashes && options.check_file_hash;
  if (check_file && plan.file_bytes == 0 && !plan.chunks.empty()) {
    return invalid_argument(file.path() + ": a file hash needs a plan that covers the file");
  }
  std::unique_ptr<FileHash> file_hash;
  if (check_file) file_hash = std::make_unique<FileHash>(plan);
  Run run(file, plan, sink, options, file_hash.get());
  std::vector<std::thread> pool;
  try {
    pool.reserve(threads - 1);
    for (unsigned k = 1; k < threads; ++k) pool.emplace_back(&Run::worker, &run, k);
  } catch (const std::exception& e) {  // thread creation failed: stop what started
    run.fail(internal_error(file.path() + ": cannot start restore threads: " + e.what()));
  }
  run.worker(0);
  for (auto& th : pool) th.join();
  Status finished = sink->finish();
  Status s = run.first_error();
  if (stats != nullptr) {
    stats->read_bytes = run.read_bytes.load();
    stats->chunks = run.chunks.load();
    stats->scattered = run.scattered.load();
    stats->hashed_in_cache = run.hashed_in_cache.load();
    stats->threads = static_cast<unsigned>(pool.size() + 1);
  }
  CKPT_RETURN_IF_ERROR(s);
  CKPT_RETURN_IF_ERROR(finished);
  if (check_file) {
    if (!file_hash->complete()) return internal_error(file.path() + ": file hash incomplete");
    if (file_hash->digest() != options.file_xxh3) {
      return corrupt(file.path() + ": whole-file xxh3 mismatch (commit record: expected " +
                     hex64(options.file_xxh3) + ", got " + hex64(file_hash->digest()) + ")" +
                     " although every tensor read matches its own hash: bytes outside them " +
                     "(HDF5 metadata, padding or tensors not restored) differ from the commit");
    }
  }
  return Status::ok();
}

}  // namespace ckpt::resume
