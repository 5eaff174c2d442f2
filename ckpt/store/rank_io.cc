#include "ckpt/store/rank_io.h"

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/attrs_digest.h"
#include "ckpt/h5/rank_file.h"

namespace ckpt::store {
namespace {

struct TensorRef {
  std::string path;
  Tensor* tensor;
};

void collect(Node& node, const std::string& path, std::vector<TensorRef>* out) {
  for (auto& [name, t] : node.tensors) out->push_back({path + "/" + name, &t});
  for (auto& [name, child] : node.children) collect(child, path + "/" + name, out);
}

// Hashes every tensor; large states use every core (the write that follows is I/O bound).
void hash_all(const std::vector<TensorRef>& refs) {
  uint64_t total = 0;
  for (const auto& r : refs) total += r.tensor->nbytes;
  const unsigned threads =
      total > (64u << 20) ? std::max(1u, std::thread::hardware_concurrency()) : 1u;
  auto work = [&](unsigned k) {
    for (size_t i = k; i < refs.size(); i += threads) {
      Tensor* t = refs[i].tensor;
      if (t->alias_of.empty()) t->xxh3 = xxh3_64(t->data, t->nbytes);
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
    if (r.tensor->alias_of.empty() && r.tensor->nbytes > 0 && r.tensor->data == nullptr) {
      return invalid_argument(where + ": tensor \"" + r.path + "\" has " +
                              std::to_string(r.tensor->nbytes) + " bytes but no data");
    }
  }
  return Status::ok();
}

// Step 1b: the tensor bytes into the extents HDF5 allocated, then fsync.
Status fill_extents(Env* env, const std::string& tmp_path,
                    const std::vector<h5::DatasetExtent>& extents) {
  CKPT_ASSIGN_OR_RETURN(auto file, env->open_for_update(tmp_path));
  for (const auto& e : extents) {
    if (e.tensor->nbytes == 0) continue;
    CKPT_RETURN_IF_ERROR(file->write_at(e.offset, e.tensor->data, e.tensor->nbytes));
  }
  CKPT_RETURN_IF_ERROR(file->sync());
  return file->close();
}

}  // namespace

Result<Manifest> write_rank(Env* env, const std::string& step_dir, int64_t rank, int64_t step,
                            int64_t world_size, Node* root, RankWriteStats* stats) {
  const std::string name = rank_file_name(rank);
  const std::string final_path = path_join(step_dir, name);
  const std::string tmp_path = final_path + ".tmp";

  std::vector<TensorRef> refs;
  collect(*root, "", &refs);
  CKPT_RETURN_IF_ERROR(check_aliases(refs, final_path));
  hash_all(refs);

  auto extents = h5::write_structure(tmp_path, *root);
  Status filled = extents.is_ok() ? fill_extents(env, tmp_path, *extents) : extents.status();
  if (!filled.is_ok()) {
    // A full disk or an I/O error leaves nothing behind (a crash leaves the .tmp, which
    // retention and the next save of this step clean up).
    if (env->exists(tmp_path)) (void)env->remove_file(tmp_path);
    return filled;
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t file_bytes, env->file_size(tmp_path));

  Manifest m;
  m.file = name;
  m.file_bytes = file_bytes;
  m.step = step;
  m.rank = rank;
  m.world_size = world_size;
  m.attrs_xxh3 = attrs_digest(*root);
  for (const auto& e : *extents) {
    const Tensor& t = *e.tensor;
    m.tensors.push_back({e.path, t.dtype, t.shape, e.offset, t.nbytes, t.xxh3});
  }
  CKPT_RETURN_IF_ERROR(env->rename(tmp_path, final_path));
  CKPT_RETURN_IF_ERROR(
      env->write_atomic(path_join(step_dir, rank_manifest_name(rank)), encode_manifest(m)));
  if (stats != nullptr) {
    stats->file_bytes = file_bytes;
    stats->tensors = m.tensors.size();
    for (const auto& e : m.tensors) stats->tensor_bytes += e.nbytes;
  }
  return m;
}

Result<Manifest> read_manifest(Env* env, const std::string& step_dir, int64_t rank) {
  const std::string mpath = path_join(step_dir, rank_manifest_name(rank));
  CKPT_ASSIGN_OR_RETURN(std::string text, env->read_all(mpath, 64u << 20));
  CKPT_ASSIGN_OR_RETURN(Manifest m, decode_manifest(text, mpath));
  const std::string fpath = path_join(step_dir, m.file);
  if (m.file != rank_file_name(rank)) {
    return corrupt(mpath + ": describes \"" + m.file + "\", expected \"" + rank_file_name(rank) +
                   "\"");
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t size, env->file_size(fpath));
  if (size != m.file_bytes) {
    return corrupt(fpath + ": " + std::to_string(size) + " bytes, the manifest says " +
                   std::to_string(m.file_bytes) + (size < m.file_bytes ? " (truncated)" : ""));
  }
  return m;
}

Tensor* find_tensor(Node* root, const std::string& path) {
  Node* node = root;
  size_t start = 1;
  while (true) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) {
      auto it = node->tensors.find(path.substr(start));
      return it == node->tensors.end() ? nullptr : &it->second;
    }
    auto it = node->children.find(path.substr(start, slash - start));
    if (it == node->children.end()) return nullptr;
    node = &it->second;
    start = slash + 1;
  }
}

std::string top_component(const std::string& path) {
  size_t slash = path.find('/', 1);
  return path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
}

namespace {

Status cross_check(const Manifest& m, const std::vector<h5::DatasetInfo>& datasets,
                   const std::string& fpath) {
  std::map<std::string, const ManifestEntry*> by_path;
  for (const auto& e : m.tensors) by_path[e.path] = &e;
  size_t seen = 0;
  for (const auto& d : datasets) {
    if (!d.alias_of.empty()) continue;
    auto it = by_path.find(d.path);
    if (it == by_path.end()) {
      return corrupt(fpath + ": dataset \"" + d.path + "\" is not in the manifest");
    }
    const ManifestEntry& e = *it->second;
    ++seen;
    if (e.dtype != d.dtype || e.shape != d.shape || e.xxh3 != d.xxh3 ||
        (e.nbytes > 0 && e.offset != d.offset)) {
      return corrupt(fpath + ": dataset \"" + d.path + "\" disagrees with the manifest (dtype " +
                     dtype_name(d.dtype) + " vs " + dtype_name(e.dtype) + ", offset " +
                     std::to_string(d.offset) + " vs " + std::to_string(e.offset) + ")");
    }
  }
  if (seen != m.tensors.size()) {
    return corrupt(fpath + ": the manifest lists " + std::to_string(m.tensors.size()) +
                   " tensors, the file has " + std::to_string(seen));
  }
  return Status::ok();
}

}  // namespace

Result<RankStructure> open_rank_structure(Env* env, const std::string& step_dir, int64_t rank) {
  RankStructure rs;
  CKPT_ASSIGN_OR_RETURN(rs.manifest, read_manifest(env, step_dir, rank));
  rs.file = path_join(step_dir, rs.manifest.file);
  CKPT_ASSIGN_OR_RETURN(rs.root, h5::read_structure(rs.file, &rs.datasets));
  CKPT_RETURN_IF_ERROR(cross_check(rs.manifest, rs.datasets, rs.file));
  const uint64_t digest = attrs_digest(rs.root);
  if (digest != rs.manifest.attrs_xxh3) {
    return corrupt(rs.file + ": attributes damaged: their xxh3 is " + hex64(digest) +
                   ", the manifest says " + hex64(rs.manifest.attrs_xxh3));
  }
  return rs;
}

Status link_aliases(const std::vector<h5::DatasetInfo>& datasets, Node* root,
                    const std::string& fpath) {
  for (const auto& d : datasets) {
    if (d.alias_of.empty()) continue;
    Tensor* alias = find_tensor(root, d.path);
    Tensor* target = find_tensor(root, d.alias_of);
    if (alias == nullptr || target == nullptr || !target->alias_of.empty()) {
      return corrupt(fpath + ": \"" + d.path + "\" is an alias of \"" + d.alias_of +
                     "\", which is not a tensor in this file");
    }
    alias->shape = target->shape;
    alias->dtype = target->dtype;
    alias->nbytes = target->nbytes;
    alias->data = target->data;
    alias->keepalive = target->keepalive;
    alias->xxh3 = target->xxh3;
  }
  return Status::ok();
}

Result<Node> read_rank(Env* env, const std::string& step_dir, int64_t rank,
                       const ReadOptions& options, RankReadStats* stats) {
  CKPT_ASSIGN_OR_RETURN(RankStructure rs, open_rank_structure(env, step_dir, rank));
  const Manifest& m = rs.manifest;
  const std::string& fpath = rs.file;
  Node& root = rs.root;

  CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(fpath));
  RankReadStats local;
  for (const ManifestEntry& e : m.tensors) {  // manifest order = offset order: sequential reads
    if (options.metadata_only ||
        (!options.components.empty() && options.components.count(top_component(e.path)) == 0)) {
      continue;
    }
    Tensor* t = find_tensor(&root, e.path);
    if (t == nullptr) return internal_error(fpath + ": \"" + e.path + "\" vanished from the tree");
    void* dst = nullptr;
    if (options.place) {
      CKPT_ASSIGN_OR_RETURN(dst, options.place(e.path, *t));
    }
    std::shared_ptr<unsigned char[]> owned;
    if (dst == nullptr) {
      owned.reset(new unsigned char[e.nbytes == 0 ? 1 : e.nbytes]);
      dst = owned.get();
    } else {
      ++local.placed;
    }
    if (e.nbytes > 0) CKPT_RETURN_IF_ERROR(file->read_at(e.offset, dst, e.nbytes));
    if (options.verify_hashes) {
      const uint64_t got = xxh3_64(dst, e.nbytes);
      if (got != e.xxh3) {
        char off[32];
        std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(e.offset));
        return corrupt("tensor \"" + e.path + "\" in " + fpath + ": xxh3 mismatch at offset " +
                       off + " (expected " + hex64(e.xxh3) + ", got " + hex64(got) + ")");
      }
    }
    t->data = dst;
    if (owned) t->keepalive = std::shared_ptr<const void>(owned, owned.get());
    local.tensor_bytes += e.nbytes;
    ++local.tensors;
  }
  CKPT_RETURN_IF_ERROR(link_aliases(rs.datasets, &root, fpath));
  if (stats != nullptr) *stats = local;
  return std::move(rs.root);
}

}  // namespace ckpt::store
