// The FormatReader for `dcp-hf-shards` folders (hf_dcp_shards.h): the model is every global
// tensor with the shape torch's HuggingFaceStorageReader infers; the format holds weights only.
// With ReadOptions::deep every present chunk is scanned for NaN/Inf (safetensors has no
// checksum); with tensor_values (ckpt diff --deep) each tensor is assembled from its chunks
// (read_dcp_tensor, which proves the tiling and byte ranges first).
#include <algorithm>
#include <sstream>

#include "verify/formats/builtin_readers.h"
#include "verify/formats/hf_dcp_shards.h"
#include "verify/formats/tensor_bytes.h"
#include "verify/formats/torch_file.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {
namespace {

using hf_shards::Chunk;
using hf_shards::GlobalTensor;
using hf_shards::ShardFolder;

constexpr uint64_t kProbeHeaderBytes = 64u << 10;
constexpr uint64_t kMaxValueBytes = uint64_t{1} << 32;

std::string range(const Chunk& c) {
  std::ostringstream s;
  s << "[";
  for (size_t d = 0; d < c.offsets.size(); ++d)
    s << (d ? ", " : "") << c.offsets[d] << ":" << c.offsets[d] + c.sizes[d];
  s << "]";
  return s.str();
}

uint64_t tensor_bytes(const GlobalTensor& t) {
  using u128 = unsigned __int128;
  u128 n = t.element_size;
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  return n > (u128{1} << 63) ? 0 : static_cast<uint64_t>(n);
}

// The `ckpt inspect` node of one file: its metadata and chunks.
InspectNode file_node(const ShardFolder& folder, size_t index) {
  const hf_shards::ShardFile& f = folder.files[index];
  InspectNode node{f.name, "file", "", "", {}, 0, "", {}};
  if (f.shard) {
    node.summary = "rank " + std::to_string(f.shard->rank) + ", model file " +
                   std::to_string(f.shard->k) + " of " + std::to_string(f.shard->n) + "; ";
  }
  if (!f.damage.empty()) {
    node.summary += "damaged: " + f.damage;
  } else if (f.header) {
    node.summary += "safetensors, header " + std::to_string(f.header->header_size) + " B, " +
                    std::to_string(f.header->tensors.size()) + " chunks";
  }
  if (f.header) {
    for (const auto& [k, v] : f.header->metadata)
      node.children.push_back({"__metadata__." + k, "str", "'" + v + "'", "", {}, 0, "", {}});
  }
  for (const Chunk& c : folder.chunks) {
    if (c.file != index) continue;
    const GlobalTensor& t = folder.tensors.at(c.fqn);
    std::ostringstream s;
    s << c.dtype.name() << " " << shape_text(c.sizes) << " at " << range(c) << " of "
      << shape_text(t.shape) << ", " << c.length << " B @" << c.begin;
    node.children.push_back({c.fqn, "tensor", s.str(), c.dtype.name(), c.sizes, c.length, "", {}});
  }
  return node;
}

// --deep: NaN/Inf in every present chunk. Returns the bytes read.
Result<uint64_t> scan_chunks(Env* env, const std::string& dir, const ShardFolder& folder,
                             const ReadOptions& options, CheckpointView* view) {
  uint64_t total = 0, read = 0;
  for (const Chunk& c : folder.chunks) total += c.present ? c.length : 0;
  ProgressBar bar(options.progress, total, "ckpt audit --deep " + path_basename(dir));
  std::string buf;
  for (size_t index = 0; index < folder.files.size(); ++index) {
    std::unique_ptr<RandomAccessFile> file;
    for (const Chunk& c : folder.chunks) {
      if (c.file != index || !c.present || !c.dtype.known()) continue;
      const std::string& name = folder.files[index].name;
      if (!file) {
        CKPT_ASSIGN_OR_RETURN(file, env->open_random(path_join(dir, name)));
      }
      uint64_t bad = 0;
      constexpr uint64_t kStep = 4u << 20;
      for (uint64_t off = 0; off < c.length;) {
        uint64_t n = std::min(kStep, c.length - off);
        n -= n % std::max<size_t>(1, c.element_size);
        if (n == 0) break;
        buf.resize(n);
        CKPT_RETURN_IF_ERROR(file->read_at(c.begin + off, buf.data(), n));
        bad += count_nonfinite(*c.dtype.known(), buf.data(), n);
        off += n;
        bar.advance(n);
      }
      if (bad > 0) {
        view->findings.push_back({Severity::kError, AuditComponent::kModel,
                                  name + ": tensor \"" + c.fqn + "\" " + range(c) + " holds " +
                                      std::to_string(bad) + " NaN/Inf values",
                                  true});
      }
    }
    if (file) read += file->bytes_read();
  }
  return read;
}

// ckpt diff --deep: the tensor's elements assembled from its present chunks; null when its dtype
// has no ckpt name or it is over 4 GiB; Corrupt when the chunks do not make it up.
Result<std::shared_ptr<const std::string>> values_of(Env* env, const std::string& dir,
                                                     const ShardFolder& folder,
                                                     const std::string& fqn,
                                                     const GlobalTensor& t) {
  using Values = std::shared_ptr<const std::string>;
  if (tensor_bytes(t) > kMaxValueBytes || !t.ranks_agree) return Values();
  std::map<std::string, std::vector<DcpChunk>> chunks;
  if (!t.problem.empty()) return corrupt(dir + ": " + t.problem);
  for (size_t i : t.chunks) {
    const Chunk& c = folder.chunks[i];
    if (!c.present) continue;
    chunks[fqn].push_back({c.offsets, c.sizes, folder.files[c.file].name,
                           static_cast<int64_t>(c.begin), static_cast<int64_t>(c.length), true,
                           false});
  }
  TensorRecord r;
  r.dtype = t.dtype;
  r.element_size = t.element_size;
  r.shape = t.shape;
  r.storage_key = fqn;
  auto x = read_dcp_tensor(env, dir, chunks, r);
  if (!x.is_ok()) {
    if (x.status().code() == Code::kUnsupported) return Values();
    return Status(x.status().code(), dir + "/" + x.status().message());
  }
  return std::make_shared<const std::string>(static_cast<const char*>(x->data), x->nbytes);
}

void add_model(const std::string& dir, const ShardFolder& folder, CheckpointView* view) {
  ModelPart& m = view->model;
  size_t readable = 0, present = 0;
  int64_t ranks = 0;
  for (const auto& f : folder.files) {
    readable += f.damage.empty() ? 1 : 0;
    if (f.shard) ranks = std::max(ranks, f.shard->rank);
  }
  for (const Chunk& c : folder.chunks) present += c.present ? 1 : 0;
  m.found = present > 0;
  m.weights_only_format = true;
  m.source = path_basename(dir);
  m.evidence = std::to_string(folder.tensors.size()) + " tensors in " +
               std::to_string(folder.chunks.size()) + " chunks over " +
               std::to_string(folder.files.size()) + " safetensors files (ranks 1.." +
               std::to_string(ranks) + "; " + std::to_string(folder.files.size() - readable) +
               " damaged)";
  if (!m.found) m.evidence += ": no chunk of any tensor can be read";
  for (const auto& [fqn, t] : folder.tensors) {
    const Chunk& first = folder.chunks[t.chunks.front()];
    std::string file = folder.files[first.file].name;
    if (t.chunks.size() > 1) file += " and " + std::to_string(t.chunks.size() - 1) + " more";
    m.tensors.push_back({fqn, t.dtype, t.shape, "", file, "", tensor_bytes(t)});
  }
}

class HfDcpShardsReader : public FormatReader {
 public:
  CheckpointFormat format() const override { return CheckpointFormat::kDcpHfShards; }

  // A folder holding a file named as the writer names them: 60 when its header's __metadata__
  // has DCP_SHARDING_INFO, 30 on the name alone (the file may be damaged).
  int probe(Env* env, const std::string& path) const override {
    if (!env->is_dir(path)) return 0;
    for (const std::string& n : env->list_dir_or_empty(path)) {
      if (!hf_shards::parse_shard_name(n)) continue;
      auto f = env->open_random(path_join(path, n));
      if (!f.is_ok() || (*f)->size() < 9) return 30;
      auto head = (*f)->read_string(8, std::min<uint64_t>((*f)->size() - 8, kProbeHeaderBytes));
      return head.is_ok() && head->find("\"DCP_SHARDING_INFO\"") != std::string::npos ? 60 : 30;
    }
    return 0;
  }

  Result<CheckpointView> read(Env* env, const std::string& path,
                              const ReadOptions& options) const override {
    CKPT_ASSIGN_OR_RETURN(ShardFolder folder, hf_shards::read_shard_folder(env, path));
    hf_shards::check_shard_folder(&folder);
    CheckpointView view;
    view.path = path;
    view.format = CheckpointFormat::kDcpHfShards;
    view.contents.name = path;
    view.contents.kind = "dir";
    add_model(path, folder, &view);
    for (const auto& f : folder.files) view.bytes_read += f.bytes_read;
    if (options.tensor_values) {
      for (TensorInfo& ti : view.model.tensors) {
        CKPT_ASSIGN_OR_RETURN(ti.values,
                              values_of(env, path, folder, ti.name, folder.tensors.at(ti.name)));
        if (ti.values) view.bytes_read += ti.values->size();
      }
    }
    view.findings = std::move(folder.findings);
    if (options.deep) {
      CKPT_ASSIGN_OR_RETURN(uint64_t b, scan_chunks(env, path, folder, options, &view));
      view.bytes_read += b;
    }
    mark_weights_only(
        "torch.distributed.checkpoint's HuggingFaceStorageWriter saves the model's tensors as "
        "safetensors only: this state cannot be in the folder",
        &view);
    view.devices_known = false;
    if (options.inspect) {
      for (size_t i = 0; i < folder.files.size(); ++i)
        view.contents.children.push_back(file_node(folder, i));
    }
    return view;
  }
};

}  // namespace

std::unique_ptr<FormatReader> make_hf_dcp_shards_reader() {
  return std::make_unique<HfDcpShardsReader>();
}

}  // namespace ckpt::verify
