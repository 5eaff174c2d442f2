#include "resume/read_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace ckpt::resume {
namespace {

class PlanBuilder {
 public:
  PlanBuilder(ReadPlan* plan, const PlanOptions& options)
      : plan_(plan),
        options_(options),
        coalesce_bytes_(options.coalesce_bytes == 0
                            ? options.chunk_bytes
                            : std::min(options.coalesce_bytes, options.chunk_bytes)) {}

  void add(uint32_t tensor_index) {
    const PlanTensor& t = plan_->tensors[tensor_index];
    if (t.nbytes == 0) return;
    if (t.nbytes > options_.chunk_bytes) {
      add_split(tensor_index);
      return;
    }
    if (open_ && (t.offset < end_ || t.offset - end_ > options_.max_gap ||
                  t.offset + t.nbytes - chunk().offset > coalesce_bytes_)) {
      close();
    }
    if (!open_) open_chunk(t.offset, /*new_unit=*/true);
    add_piece(tensor_index, 0, t.nbytes);
  }

  void close() { open_ = false; }

 private:
  PlanChunk& chunk() { return plan_->chunks.back(); }

  // A tensor larger than a chunk: its own chunks, all in one unit so one worker hashes them in
  // order.
  void add_split(uint32_t tensor_index) {
    close();
    const PlanTensor& t = plan_->tensors[tensor_index];
    bool first = true;
    for (uint64_t done = 0; done < t.nbytes; done += options_.chunk_bytes) {
      const uint64_t n = std::min(options_.chunk_bytes, t.nbytes - done);
      open_chunk(t.offset + done, first);
      add_piece(tensor_index, done, n);
      first = false;
    }
    close();
  }

  void open_chunk(uint64_t offset, bool new_unit) {
    PlanChunk c;
    c.offset = offset;
    c.first_piece = static_cast<uint32_t>(plan_->pieces.size());
    plan_->chunks.push_back(c);
    if (new_unit) {
      PlanUnit u;
      u.first_chunk = static_cast<uint32_t>(plan_->chunks.size() - 1);
      plan_->units.push_back(u);
    }
    ++plan_->units.back().chunk_count;
    open_ = true;
    end_ = offset;
  }

  void add_piece(uint32_t tensor_index, uint64_t tensor_offset, uint64_t n) {
    PlanChunk& c = chunk();
    const uint64_t file_offset = plan_->tensors[tensor_index].offset + tensor_offset;
    PlanPiece p;
    p.tensor = tensor_index;
    p.tensor_offset = tensor_offset;
    p.chunk_offset = file_offset - c.offset;
    p.nbytes = n;
    plan_->pieces.push_back(p);
    ++c.piece_count;
    c.nbytes = file_offset + n - c.offset;
    end_ = file_offset + n;
  }

  ReadPlan* plan_;
  PlanOptions options_;
  uint64_t coalesce_bytes_;
  bool open_ = false;
  uint64_t end_ = 0;  // file offset just past the open chunk's last piece
};

}  // namespace

Result<ReadPlan> make_read_plan(const Manifest& manifest, const std::vector<size_t>& indices,
                                const PlanOptions& options) {
  if (options.chunk_bytes == 0) return invalid_argument("read plan: chunk_bytes must be > 0");
  ReadPlan plan;
  plan.chunk_bytes = options.chunk_bytes;
  plan.tensors.reserve(indices.size());
  for (size_t i : indices) {
    if (i >= manifest.tensors.size()) {
      return invalid_argument("read plan: tensor index " + std::to_string(i) + " out of range (" +
                              std::to_string(manifest.tensors.size()) + " tensors)");
    }
    const ManifestEntry& e = manifest.tensors[i];
    if (e.offset + e.nbytes < e.offset) {
      return invalid_argument("read plan: tensor \"" + e.path + "\" extent overflows");
    }
    plan.tensors.push_back({e.path, e.offset, e.nbytes, e.xxh3, i, e.chunk_bytes, e.chunk_xxh3});
    plan.tensor_bytes += e.nbytes;
  }
  std::stable_sort(plan.tensors.begin(), plan.tensors.end(),
                   [](const PlanTensor& a, const PlanTensor& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < plan.tensors.size(); ++i) {
    const PlanTensor& a = plan.tensors[i - 1];
    const PlanTensor& b = plan.tensors[i];
    if (a.nbytes > 0 && b.nbytes > 0 && a.offset + a.nbytes > b.offset) {
      return invalid_argument("read plan: tensors \"" + a.path + "\" and \"" + b.path +
                              "\" overlap in the file");
    }
  }
  if (plan.tensors.size() > std::numeric_limits<uint32_t>::max()) {
    return invalid_argument("read plan: too many tensors");
  }
  PlanBuilder builder(&plan, options);
  for (size_t i = 0; i < plan.tensors.size(); ++i) builder.add(static_cast<uint32_t>(i));
  builder.close();
  for (const PlanChunk& c : plan.chunks) plan.read_bytes += c.nbytes;
  return plan;
}

Status cover_file(ReadPlan* plan, uint64_t file_bytes, const std::string& file) {
  if (!plan->chunks.empty()) {
    const PlanChunk& last = plan->chunks.back();
    if (last.offset + last.nbytes > file_bytes) {
      return corrupt(file + ": tensors end at byte " + std::to_string(last.offset + last.nbytes) +
                     ", past the " + std::to_string(file_bytes) + " bytes the commit record lists");
    }
  }
  std::vector<PlanChunk> chunks;
  std::vector<PlanUnit> units;
  uint64_t at = 0;
  auto fill_to = [&](uint64_t end) {
    for (; at < end; at += std::min(plan->chunk_bytes, end - at)) {
      PlanChunk c;
      c.offset = at;
      c.nbytes = std::min(plan->chunk_bytes, end - at);
      c.first_piece = static_cast<uint32_t>(plan->pieces.size());
      units.push_back({static_cast<uint32_t>(chunks.size()), 1});
      chunks.push_back(c);
    }
  };
  for (const PlanUnit& u : plan->units) {  // holes lie only between units (see PlanBuilder)
    fill_to(plan->chunks[u.first_chunk].offset);
    units.push_back({static_cast<uint32_t>(chunks.size()), u.chunk_count});
    for (uint32_t k = 0; k < u.chunk_count; ++k) chunks.push_back(plan->chunks[u.first_chunk + k]);
    const PlanChunk& last = chunks.back();
    at = last.offset + last.nbytes;
  }
  fill_to(file_bytes);
  plan->chunks = std::move(chunks);
  plan->units = std::move(units);
  plan->read_bytes = file_bytes;
  plan->file_bytes = file_bytes;
  return Status::ok();
}

Result<ReadPlan> make_read_plan(const std::vector<ManifestEntry>& entries,
                                const PlanOptions& options) {
  Manifest m;
  m.tensors = entries;
  std::vector<size_t> indices(entries.size());
  std::iota(indices.begin(), indices.end(), size_t{0});
  return make_read_plan(m, indices, options);
}

std::vector<std::pair<uint64_t, uint64_t>> chunk_ranges(const ReadPlan& plan) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.reserve(plan.chunks.size());
  for (const PlanChunk& c : plan.chunks) out.emplace_back(c.offset, c.offset + c.nbytes);
  return out;
}

}  // namespace ckpt::resume
