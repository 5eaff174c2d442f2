// Step 2 of hf_dcp_shards.h: tiling, dtypes and the rank x file grid of the names.
//
// What the names can and cannot say: torch's writer gives rank r (from 1) one file per index K
// of fqn_to_index_mapping that rank saved a tensor for, all named "-of-N". A hole in the grid
// ranks 1..R x files 1..N (R the highest rank named) is a lost file (an error) when the other
// ranks' file K holds sharded tensors: rank r held chunks of them too. When it holds only whole
// tensors (one chunk at offset 0) nothing tells a file never written (DCP saves replicated state
// from one rank) from a lost one whose chunks lay past the one left: a warning says both. A lost
// file of the highest rank whose other files are lost too leaves no trace in the names, and
// torch's reader (like this one) then infers shorter global shapes from the chunks left, which
// tile them.
#include <algorithm>
#include <cstdio>
#include <set>

#include "ckpt/store/box_tiling.h"
#include "verify/formats/hf_dcp_shards.h"
#include "verify/pickle/value.h"

namespace ckpt::verify::hf_shards {
namespace {

constexpr uint64_t kMaxGridCells = 1'000'000;
constexpr size_t kMaxNamed = 16;  // files (and file indices) named one by one, then a count

std::string shard_file_name(int64_t rank, int64_t k, int64_t n) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "shard-%05lld-model-%05lld-of-%05lld.safetensors",
                static_cast<long long>(rank), static_cast<long long>(k), static_cast<long long>(n));
  return buf;
}

struct Grid {
  int64_t ranks = 0, n = 0;
  std::map<int64_t, std::vector<int64_t>> missing;  // file index K -> the ranks without it
};

// The grid the names imply and its holes; findings for names that cannot form one.
Grid grid_of(ShardFolder* folder) {
  Grid g;
  std::set<int64_t> ns;
  std::set<std::pair<int64_t, int64_t>> have;
  for (const ShardFile& f : folder->files) {
    if (!f.shard) continue;
    ns.insert(f.shard->n);
    g.ranks = std::max(g.ranks, f.shard->rank);
    have.insert({f.shard->rank, f.shard->k});
  }
  if (ns.empty()) return g;
  g.n = *ns.rbegin();
  if (ns.size() > 1) {
    add(folder, Severity::kError,
        "the file names disagree on how many model files each rank wrote (-of-" +
            std::to_string(*ns.begin()) + " and -of-" + std::to_string(g.n) +
            "): files of different saves are mixed in this folder");
  }
  if (static_cast<__int128>(g.ranks) * g.n > kMaxGridCells) {
    add(folder, Severity::kWarning,
        "the file names imply " + std::to_string(g.ranks) + " ranks x " + std::to_string(g.n) +
            " files: too many to check which are missing");
    g.ranks = 0;
    return g;
  }
  for (int64_t r = 1; r <= g.ranks; ++r) {
    for (int64_t k = 1; k <= g.n; ++k) {
      if (have.count({r, k}) == 0) g.missing[k].push_back(r);
    }
  }
  return g;
}

// The model files (K) that hold chunks of each tensor.
std::map<std::string, std::set<int64_t>> files_of_tensors(const ShardFolder& folder) {
  std::map<std::string, std::set<int64_t>> out;
  for (const Chunk& c : folder.chunks) {
    const ShardFile& f = folder.files[c.file];
    if (f.shard) out[c.fqn].insert(f.shard->k);
  }
  return out;
}

// Damaged files and grid holes that may have held chunks of `fqn`.
std::string suspects(const ShardFolder& folder, const GlobalTensor& t, const std::set<int64_t>& ks,
                     const Grid& grid) {
  std::set<std::string> names;
  for (size_t i : t.chunks) {
    if (!folder.chunks[i].present) names.insert(folder.files[folder.chunks[i].file].name);
  }
  for (int64_t k : ks) {
    const auto m = grid.missing.find(k);
    if (m == grid.missing.end()) continue;
    for (int64_t r : m->second) {
      if (names.size() > kMaxNamed) break;
      names.insert(shard_file_name(r, k, grid.n) + " (missing)");
    }
  }
  std::string s;
  size_t listed = 0;
  for (const std::string& n : names) {
    if (listed++ == kMaxNamed) {
      s += " and more";
      break;
    }
    s += (s.empty() ? "" : ", ") + n;
  }
  return s.empty() ? s : " (lost with " + s + ")";
}

void check_dtypes(ShardFolder* folder, const std::string& fqn, GlobalTensor* t) {
  for (size_t i : t->chunks) {
    const Chunk& c = folder->chunks[i];
    if (c.dtype.name() == t->dtype.name()) continue;
    const Chunk& first = folder->chunks[t->chunks.front()];
    t->problem = "tensor \"" + fqn + "\": its chunks disagree on the dtype: " + t->dtype.name() +
                 " in " + folder->files[first.file].name + ", " + c.dtype.name() + " in " +
                 folder->files[c.file].name;
    add(folder, Severity::kError,
        t->problem + " (torch's reader copies each chunk into the model's dtype without a word)");
    return;
  }
}

// The tiling of one tensor's present chunks; whether it tiles. *gap: whether elements are in no
// chunk.
bool check_tiling(ShardFolder* folder, const std::string& fqn, GlobalTensor* tensor,
                  const std::string& lost_with, uint64_t* chunks, bool* gap) {
  const GlobalTensor& t = *tensor;
  if (!t.ranks_agree) {
    tensor->problem = "tensor \"" + fqn + "\": its chunks disagree on the number of dimensions";
    add(folder, Severity::kError, tensor->problem);
    return false;
  }
  if (t.shape.size() > static_cast<size_t>(store::kMaxBoxDims)) return true;  // not checked
  std::vector<store::Extent> extents;
  std::vector<size_t> owners;
  for (size_t i : t.chunks) {
    const Chunk& c = folder->chunks[i];
    if (!c.present) continue;
    extents.push_back(store::make_extent(c.offsets, c.sizes));
    owners.push_back(i);
  }
  *chunks += extents.size();
  store::TilingReport report;
  store::check_tensor_tiling(fqn, t.shape, extents, &report, 8, [&](size_t i) {
    return "chunk " + store::extent_string(extents[i]) + " in " +
           folder->files[folder->chunks[owners[i]].file].name;
  });
  for (const store::TilingFinding& f : report.findings) {
    *gap = *gap || f.problem == store::TilingProblem::kGap;
    if (tensor->problem.empty()) tensor->problem = f.message + lost_with;
    add(folder, Severity::kError,
        f.message + (f.problem == store::TilingProblem::kGap ? lost_with : std::string()));
  }
  if (report.left_off > 0) {
    add(folder, Severity::kError,
        "tensor \"" + fqn + "\": " + std::to_string(report.left_off) + " more tiling problems");
  }
  return report.ok();
}

// What the other ranks keep in file K: the tensors (quoted, up to 8), whether any is sharded (more
// than one chunk, or one not at offset 0), whether any shows a gap, and their inferred shapes.
struct FileContents {
  std::vector<std::string> tensors;
  bool sharded = false, gap = false;
  std::string list, shapes;
};

FileContents contents_of(const ShardFolder& folder, int64_t k,
                         const std::map<std::string, std::set<int64_t>>& ks,
                         const std::set<std::string>& gapped) {
  FileContents out;
  for (const auto& [fqn, files] : ks) {
    if (files.count(k) == 0) continue;
    out.tensors.push_back(fqn);
    const GlobalTensor& t = folder.tensors.at(fqn);
    const Chunk& c = folder.chunks[t.chunks.front()];
    const bool whole = t.chunks.size() == 1 && std::all_of(c.offsets.begin(), c.offsets.end(),
                                                           [](int64_t o) { return o == 0; });
    out.sharded = out.sharded || !whole;
    out.gap = out.gap || gapped.count(fqn) != 0;
    if (out.tensors.size() > 8) continue;
    out.list += (out.tensors.size() > 1 ? ", \"" : "\"") + fqn + "\"";
    out.shapes += (out.tensors.size() > 1 ? ", " : " ") + fqn + " " + shape_text(t.shape);
  }
  if (out.tensors.size() > 8)
    out.list += " and " + std::to_string(out.tensors.size() - 8) + " more";
  return out;
}

// One finding per hole of the grid (up to kMaxNamed of each severity, then a count): what the
// other ranks keep in that file says what it held.
void report_holes(ShardFolder* folder, const Grid& grid,
                  const std::map<std::string, std::set<int64_t>>& ks,
                  const std::set<std::string>& gapped) {
  size_t errors = 0, warnings = 0;
  std::vector<int64_t> nobody;  // file indices no rank has
  for (const auto& [k, ranks] : grid.missing) {
    const FileContents kept = contents_of(*folder, k, ks, gapped);
    if (kept.tensors.empty()) {
      nobody.push_back(k);
      continue;
    }
    for (int64_t rank : ranks) {
      const std::string name = shard_file_name(rank, k, grid.n);
      const std::string where = " (rank " + std::to_string(rank) + "'s file " + std::to_string(k) +
                                " of " + std::to_string(grid.n) + ")";
      if (!kept.sharded) {
        if (warnings++ >= kMaxNamed) continue;
        add(folder, Severity::kWarning,
            name + " is not here" + where +
                ": either it was never written, the other ranks keeping only whole tensors in "
                "file " +
                std::to_string(k) + " (" + kept.list +
                ") as DCP saves replicated state from one rank, or it is lost with rank " +
                std::to_string(rank) +
                "'s chunks of them, and then the global shapes inferred from the chunks left are "
                "short:" +
                kept.shapes);
        continue;
      }
      if (errors++ >= kMaxNamed) continue;
      std::string m = name + " is missing" + where + ": the file names say ranks 1.." +
                      std::to_string(grid.ranks) + " each wrote files 1.." +
                      std::to_string(grid.n) + "; rank " + std::to_string(rank) + "'s chunks of " +
                      kept.list + " are lost with it";
      if (kept.gap) {
        m += "; the gaps they leave are named";
      } else {
        m += "; no gap shows, so unless they were empty they lay at the end of their dimension "
             "and the global shapes, inferred from the chunks left as torch's reader infers "
             "them, are short:" +
             kept.shapes;
      }
      add(folder, Severity::kError, m);
    }
  }
  if (errors > kMaxNamed) {
    add(folder, Severity::kError,
        std::to_string(errors - kMaxNamed) + " more files of the rank x file grid are missing");
  }
  if (warnings > kMaxNamed) {
    add(folder, Severity::kWarning,
        std::to_string(warnings - kMaxNamed) +
            " more files of the rank x file grid are not here (never written or lost)");
  }
  if (!nobody.empty()) {
    std::string list;
    for (size_t i = 0; i < nobody.size() && i < kMaxNamed; ++i)
      list += (i ? ", " : "") + std::to_string(nobody[i]);
    if (nobody.size() > kMaxNamed)
      list += " and " + std::to_string(nobody.size() - kMaxNamed) + " more";
    add(folder, Severity::kWarning,
        "no rank has file " + list + " of " + std::to_string(grid.n) +
            ": either fqn_to_index_mapping maps no tensor there, or every rank's file is lost, "
            "with tensors nothing left names");
  }
}

}  // namespace

bool check_shard_folder(ShardFolder* folder) {
  const Grid grid = grid_of(folder);
  const auto ks = files_of_tensors(*folder);
  static const std::set<int64_t> kNone;
  bool all_tile = true;
  uint64_t chunks = 0;
  std::set<std::string> gapped;
  for (auto& [fqn, t] : folder->tensors) {
    check_dtypes(folder, fqn, &t);
    const auto k = ks.find(fqn);
    const std::string lost_with = suspects(*folder, t, k == ks.end() ? kNone : k->second, grid);
    bool gap = false;
    all_tile = check_tiling(folder, fqn, &t, lost_with, &chunks, &gap) && all_tile;
    if (gap) gapped.insert(fqn);
  }
  report_holes(folder, grid, ks, gapped);
  if (all_tile && !folder->tensors.empty()) {
    add(folder, Severity::kInfo,
        "the chunks of every tensor tile it exactly (" + std::to_string(folder->tensors.size()) +
            " tensors, " + std::to_string(chunks) +
            " chunks: no gap, no overlap; global shapes as torch's HuggingFaceStorageReader "
            "infers them, per dimension the largest chunk offset + size)");
  }
  return all_tile;
}

}  // namespace ckpt::verify::hf_shards
