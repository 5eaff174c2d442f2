#include "ckpt/store/rank_io.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "ckpt/base/hash.h"
#include "ckpt/format/attrs_digest.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/store/hdf5_view.h"

namespace ckpt::store {

Result<Manifest> read_manifest(Env* env, const std::string& step_dir, int64_t rank,
                               std::shared_ptr<RandomAccessFile>* opened) {
  const std::string mpath = path_join(step_dir, rank_manifest_name(rank));
  CKPT_ASSIGN_OR_RETURN(std::string text, env->read_all(mpath, 64u << 20));
  CKPT_ASSIGN_OR_RETURN(Manifest m, decode_manifest(text, mpath));
  const std::string fpath = path_join(step_dir, m.file);
  if (m.file != rank_file_name(rank)) {
    return corrupt(mpath + ": describes \"" + m.file + "\", expected \"" + rank_file_name(rank) +
                   "\"");
  }
  uint64_t size = 0;
  if (opened != nullptr && env->object_store(fpath) != nullptr) {
    CKPT_ASSIGN_OR_RETURN(*opened, env->open_random(fpath));
    size = (*opened)->size();
  } else {
    CKPT_ASSIGN_OR_RETURN(size, env->file_size(fpath));
  }
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
    if (!d.alias_of.empty() || (d.box && d.box->owner >= 0)) continue;  // no bytes here
    auto it = by_path.find(d.path);
    if (it == by_path.end()) {
      return corrupt(fpath + ": dataset \"" + d.path + "\" is not in the manifest");
    }
    const ManifestEntry& e = *it->second;
    ++seen;
    if (e.box != d.box) {
      return corrupt(fpath + ": dataset \"" + d.path +
                     "\" disagrees with the manifest about the box it holds of its tensor");
    }
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

Result<RankStructure> open_rank_structure(Env* env, const std::string& step_dir, int64_t rank,
                                          DatasetCheck check) {
  RankStructure rs;
  CKPT_ASSIGN_OR_RETURN(rs.manifest, read_manifest(env, step_dir, rank, &rs.opened));
  rs.file = path_join(step_dir, rs.manifest.file);
  h5::TrustedDatasets trusted;
  if (check == DatasetCheck::kFromManifest) {
    for (const ManifestEntry& e : rs.manifest.tensors) {
      h5::DatasetInfo& d = trusted[e.path];
      d.path = e.path;
      d.dtype = e.dtype;
      d.shape = e.shape;
      d.offset = e.offset;
      d.nbytes = e.nbytes;
      d.xxh3 = e.xxh3;
      d.box = e.box;
    }
  }
  CKPT_ASSIGN_OR_RETURN(auto view, hdf5_view(env, rs.file, &rs.manifest, rs.opened.get()));
  CKPT_ASSIGN_OR_RETURN(
      rs.root, h5::read_structure(view->path(), &rs.datasets,
                                  check == DatasetCheck::kFromManifest ? &trusted : nullptr));
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

  std::shared_ptr<RandomAccessFile> file = rs.opened;  // on a store, opened already
  if (file == nullptr) {
    CKPT_ASSIGN_OR_RETURN(file, env->open_random(fpath));
  }
  RankReadStats local;
  // Each tensor's destination first (options.place in manifest order = offset order), then the
  // reads: small tensors close together in one read each run, copied out (on an object store
  // each read is a request; a file of 300 small tensors took 300 GETs), larger ones straight in.
  struct Dest {
    const ManifestEntry* e;
    Tensor* t;
    void* dst;
    std::shared_ptr<unsigned char[]> owned;
  };
  std::vector<Dest> dests;
  for (const ManifestEntry& e : m.tensors) {
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
    dests.push_back({&e, t, dst, std::move(owned)});
  }
  constexpr uint64_t kSmall = 64u << 10, kGap = 4096, kRunMax = 4u << 20;
  std::vector<unsigned char> run;
  for (size_t i = 0; i < dests.size();) {
    const ManifestEntry& first = *dests[i].e;
    size_t j = i + 1;
    uint64_t end = first.offset + first.nbytes;
    if (first.nbytes > 0 && first.nbytes <= kSmall) {
      while (j < dests.size() && dests[j].e->nbytes > 0 && dests[j].e->nbytes <= kSmall &&
             dests[j].e->offset >= end && dests[j].e->offset - end <= kGap &&
             dests[j].e->offset + dests[j].e->nbytes - first.offset <= kRunMax) {
        end = dests[j].e->offset + dests[j].e->nbytes;
        ++j;
      }
    }
    if (j == i + 1) {
      if (first.nbytes > 0)
        CKPT_RETURN_IF_ERROR(file->read_at(first.offset, dests[i].dst, first.nbytes));
    } else {
      run.resize(static_cast<size_t>(end - first.offset));
      CKPT_RETURN_IF_ERROR(file->read_at(first.offset, run.data(), run.size()));
      for (size_t k = i; k < j; ++k) {
        std::memcpy(dests[k].dst, run.data() + (dests[k].e->offset - first.offset),
                    static_cast<size_t>(dests[k].e->nbytes));
      }
    }
    i = j;
  }
  for (Dest& d : dests) {
    const ManifestEntry& e = *d.e;
    if (options.verify_hashes) {
      const uint64_t got = xxh3_64(d.dst, e.nbytes);
      if (got != e.xxh3) {
        char off[32];
        std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(e.offset));
        return corrupt("tensor \"" + e.path + "\" in " + fpath + ": xxh3 mismatch at offset " +
                       off + " (expected " + hex64(e.xxh3) + ", got " + hex64(got) + ")");
      }
    }
    d.t->data = d.dst;
    if (d.owned) d.t->keepalive = std::shared_ptr<const void>(d.owned, d.owned.get());
    local.tensor_bytes += e.nbytes;
    ++local.tensors;
  }
  CKPT_RETURN_IF_ERROR(link_aliases(rs.datasets, &root, fpath));
  if (stats != nullptr) *stats = local;
  return std::move(rs.root);
}

}  // namespace ckpt::store
