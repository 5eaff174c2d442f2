#include "verify/convert/sources.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "ckpt/format/python_json.h"
#include "verify/formats/dcp.h"
#include "verify/formats/format_reader.h"
#include "verify/formats/hf_dcp_shards.h"
#include "verify/formats/path_hint.h"

namespace ckpt::verify::convert {
namespace {

constexpr uint64_t kMaxJsonBytes = 64ull << 20;
constexpr int kMaxJsonDepth = 64;

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}
bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

void add_tree(Source* s, std::string label, const Value* root, TensorFetch fetch,
              std::shared_ptr<void> owner) {
  s->trees.push_back({std::move(label), root});
  s->fetch.push_back(std::move(fetch));
  s->owners.push_back(std::move(owner));
}

Status add_torch_file(Env* env, Source* s, const std::string& path, const std::string& label) {
  CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(path));
  CKPT_ASSIGN_OR_RETURN(TorchFile opened, open_torch_file(std::move(file)));
  auto tf = std::make_shared<TorchFile>(std::move(opened));
  auto tensors = std::make_shared<TorchFileTensors>(tf.get(), path_basename(path));
  auto fetch = [tf, tensors](const TensorRecord& t) { return tensors->fetch(t); };
  add_tree(s, label, tf->doc->root, fetch, tf);
  return Status::ok();
}

// The tensors of every safetensors file, by name, as one dict (shards merge).
Status add_safetensors(Env* env, Source* s, const std::vector<std::string>& paths,
                       const std::string& label) {
  struct Files {
    PickleDoc doc;
    std::vector<std::unique_ptr<RandomAccessFile>> files;
    std::vector<SafetensorsHeader> headers;
    std::vector<std::pair<size_t, size_t>> where;  // storage_key (index) → (file, tensor)
  };
  auto f = std::make_shared<Files>();
  Value* dict = f->doc.make(Kind::kDict);
  f->doc.root = dict;
  for (const std::string& p : paths) {
    CKPT_ASSIGN_OR_RETURN(auto file, env->open_random(p));
    CKPT_ASSIGN_OR_RETURN(SafetensorsHeader h, parse_safetensors(*file));
    for (size_t i = 0; i < h.tensors.size(); ++i) {
      const SafetensorsTensor& t = h.tensors[i];
      Value* key = f->doc.make(Kind::kStr);
      key->s = t.name;
      Value* v = f->doc.make(Kind::kTensor);
      v->tensor = std::make_unique<TensorRecord>();
      v->tensor->dtype = t.dtype;
      v->tensor->element_size = t.element_size;
      v->tensor->shape = t.shape;
      v->tensor->location = "cpu";
      v->tensor->storage_key = std::to_string(f->where.size());
      f->where.emplace_back(f->files.size(), i);
      dict->entries.emplace_back(key, v);
    }
    f->files.push_back(std::move(file));
    f->headers.push_back(std::move(h));
  }
  auto fetch = [f](const TensorRecord& t) -> Result<Tensor> {
    const auto& [fi, ti] = f->where.at(std::stoul(t.storage_key));
    return read_safetensors_tensor(*f->files[fi], f->headers[fi], f->headers[fi].tensors[ti]);
  };
  add_tree(s, label, dict, fetch, f);
  return Status::ok();
}

Value* json_value(const nlohmann::json& j, PickleDoc* doc, int depth) {
  Value* v = nullptr;
  if (j.is_null() || depth > kMaxJsonDepth) {
    v = doc->make(Kind::kNone);
  } else if (j.is_boolean()) {
    v = doc->make(Kind::kBool);
    v->b = j.get<bool>();
  } else if (j.is_number_integer() && !(j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX)) {
    v = doc->make(Kind::kInt);
    v->i = j.get<int64_t>();
  } else if (j.is_number()) {
    v = doc->make(Kind::kFloat);
    v->f = j.get<double>();
  } else if (j.is_string()) {
    v = doc->make(Kind::kStr);
    v->s = j.get<std::string>();
  } else if (j.is_array()) {
    v = doc->make(Kind::kList);
    for (const auto& x : j) v->items.push_back(json_value(x, doc, depth + 1));
  } else {
    v = doc->make(Kind::kDict);
    for (const auto& [k, x] : j.items()) {
      Value* key = doc->make(Kind::kStr);
      key->s = k;
      v->entries.emplace_back(key, json_value(x, doc, depth + 1));
    }
  }
  return v;
}

Status add_json(Env* env, Source* s, const std::string& path, const std::string& label) {
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path));
  if (f->size() > kMaxJsonBytes) return corrupt(path + ": JSON file larger than 64 MiB");
  CKPT_ASSIGN_OR_RETURN(std::string text, f->read_string(0, f->size()));
  // Python's json.dumps writes NaN / Infinity literals: null, outside strings only, in one pass.
  auto parsed = parse_python_json(text, path);
  if (!parsed.is_ok()) return corrupt(path + ": not valid JSON");
  const nlohmann::json j = std::move(parsed).value();
  auto doc = std::make_shared<PickleDoc>();
  doc->root = json_value(j, doc.get(), 0);
  add_tree(
      s, label, doc->root,
      [](const TensorRecord&) -> Result<Tensor> {
        return unsupported("a JSON file holds no tensors");
      },
      doc);
  return Status::ok();
}

Status add_dcp(Env* env, Source* s, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(DcpTree opened, open_dcp_tree(env, path));
  if (!opened.errors.empty()) return corrupt(path + ": " + opened.errors.front());
  auto tree = std::make_shared<DcpTree>(std::move(opened));
  auto fetch = [env, tree, path](const TensorRecord& t) {
    return read_dcp_tensor(env, path, *tree, t);
  };
  add_tree(s, "", tree->root, fetch, tree);
  return Status::ok();
}

// DCP's Hugging Face shard folder (format dcp-hf-shards): every global tensor, assembled from its
// chunks (raw bytes in the safetensors files) when read. A folder the audit finds damaged (a
// chunk that does not tile, a damaged or missing shard file) is refused with its first error.
Status add_hf_shards(Env* env, Source* s, const std::string& dir) {
  struct Owned {
    PickleDoc doc;
    std::map<std::string, std::vector<DcpChunk>> chunks;
  };
  CKPT_ASSIGN_OR_RETURN(hf_shards::ShardFolder folder, hf_shards::read_shard_folder(env, dir));
  hf_shards::check_shard_folder(&folder);
  for (const ReaderFinding& f : folder.findings) {
    if (f.severity == Severity::kError) return corrupt(dir + ": " + f.message);
  }
  auto o = std::make_shared<Owned>();
  Value* dict = o->doc.make(Kind::kDict);
  o->doc.root = dict;
  for (const auto& [fqn, t] : folder.tensors) {
    Value* key = o->doc.make(Kind::kStr);
    key->s = fqn;
    Value* v = o->doc.make(Kind::kTensor);
    v->tensor = std::make_unique<TensorRecord>();
    v->tensor->dtype = t.dtype;
    v->tensor->element_size = t.element_size;
    v->tensor->shape = t.shape;
    v->tensor->location = "cpu";
    v->tensor->storage_key = fqn;
    dict->entries.emplace_back(key, v);
    for (size_t i : t.chunks) {
      const hf_shards::Chunk& c = folder.chunks[i];
      o->chunks[fqn].push_back({c.offsets, c.sizes, folder.files[c.file].name,
                                static_cast<int64_t>(c.begin), static_cast<int64_t>(c.length), true,
                                false});
    }
  }
  auto fetch = [env, dir, o](const TensorRecord& t) {
    return read_dcp_tensor(env, dir, o->chunks, t);
  };
  add_tree(s, "", dict, fetch, o);
  return Status::ok();
}

bool torch_like(const std::string& n) {
  return ends_with(n, ".pt") || ends_with(n, ".pth") || ends_with(n, ".bin") ||
         ends_with(n, ".ckpt") || (starts_with(n, "random_states_") && ends_with(n, ".pkl")) ||
         (starts_with(n, "custom_checkpoint_") && ends_with(n, ".pkl"));
}

// A Trainer / Accelerate folder: the safetensors weights as one dict (or the .bin weights when
// there are none), every torch.save file and every JSON file as its own tree.
Status add_hf_folder(Env* env, Source* s, const std::string& dir) {
  const auto names = env->list_dir_or_empty(dir);
  std::vector<std::string> safetensors;
  for (const auto& n : names) {
    if (ends_with(n, ".safetensors")) safetensors.push_back(path_join(dir, n));
  }
  if (!safetensors.empty()) {
    const std::string label =
        safetensors.size() == 1 ? path_basename(safetensors[0]) : "model-*.safetensors";
    CKPT_RETURN_IF_ERROR(add_safetensors(env, s, safetensors, label));
  }
  for (const auto& n : names) {
    const std::string p = path_join(dir, n);
    if (ends_with(n, ".safetensors")) continue;
    if (env->is_dir(p)) {
      s->unmapped.push_back({n + "/", "a subfolder (convert reads the files of the folder)"});
    } else if (torch_like(n)) {
      if (!safetensors.empty() && starts_with(n, "pytorch_model")) {
        s->unmapped.push_back({n, "weights also in safetensors form (those were converted)"});
        continue;
      }
      CKPT_RETURN_IF_ERROR(add_torch_file(env, s, p, n).with_context(n));
    } else if (ends_with(n, ".json")) {
      CKPT_RETURN_IF_ERROR(add_json(env, s, p, n));
    } else {
      s->unmapped.push_back({n, "not a torch.save, safetensors or JSON file (not read)"});
    }
  }
  return Status::ok();
}

// As the audit names them: a Trainer checkpoint (trainer_state.json), an Accelerate folder
// (training state without it), or save_pretrained weights (no training state at all).
CheckpointFormat hf_kind(Env* env, const std::string& dir) {
  const auto names = env->list_dir_or_empty(dir);
  bool training = false;
  for (const auto& n : names) {
    // what only the Trainer writes (as the audit's reader decides it)
    if (n == "trainer_state.json" || starts_with(n, "rng_state"))
      return CheckpointFormat::kHfTrainer;
    training = training || starts_with(n, "optimizer") || starts_with(n, "scheduler") ||
               starts_with(n, "random_states_") || starts_with(n, "rng_state");
  }
  return training ? CheckpointFormat::kAccelerate : CheckpointFormat::kHfModel;
}

bool is_lightning(const Value* root) {
  return root != nullptr && root->kind == Kind::kDict &&
         (root->get("pytorch-lightning_version") != nullptr ||
          (root->get("loops") != nullptr && root->get("state_dict") != nullptr));
}

bool is_ckpt_run(Env* env, const std::string& path) {
  if (!env->is_dir(path))
    return ends_with(path, ".h5") && starts_with(path_basename(path), "rank-");
  return env->exists(path_join(path, "LATEST")) || env->exists(path_join(path, "COMMIT.json")) ||
         env->exists(path_join(path, "rank-00000.manifest.json"));
}

}  // namespace

Result<Source> open_source(Env* env, const ReaderSet& readers, const std::string& path) {
  if (!env->exists(path)) return not_found(path + ": no such file or directory");
  if (is_ckpt_run(env, path))
    return unsupported(path + ": already a ckpt checkpoint (ckpt verify / ckpt inspect read it)");
  if (const std::string piece = dcp_piece_hint(env, path); !piece.empty())
    return corrupt(path + ": not a checkpoint by itself: " + piece);
  const FormatReader* reader = readers.best(env, path);
  if (reader == nullptr) {
    if (const std::string inside = readers.checkpoints_inside(env, path); !inside.empty())
      return corrupt(path + ": not a checkpoint: " + inside);
    return corrupt(path +
                   ": not a checkpoint convert reads (torch.save, Lightning, safetensors, "
                   "HF Trainer / Accelerate folder, DCP folder)");
  }
  Source s;
  s.format = reader->format();
  switch (s.format) {
    case CheckpointFormat::kTorchSave:
      CKPT_RETURN_IF_ERROR(add_torch_file(env, &s, path, ""));
      if (is_lightning(s.trees[0].root)) s.format = CheckpointFormat::kLightning;
      break;
    case CheckpointFormat::kSafetensors:
      CKPT_RETURN_IF_ERROR(add_safetensors(env, &s, {path}, ""));
      break;
    case CheckpointFormat::kHfTrainer:
      CKPT_RETURN_IF_ERROR(add_hf_folder(env, &s, path));
      s.format = hf_kind(env, path);
      break;
    case CheckpointFormat::kDcp:
      CKPT_RETURN_IF_ERROR(add_dcp(env, &s, path));
      break;
    case CheckpointFormat::kDcpHfShards:
      CKPT_RETURN_IF_ERROR(add_hf_shards(env, &s, path));
      break;
    default:
      return unsupported(path + ": " + format_name(s.format) +
                         " checkpoints are not converted yet");
  }
  return s;
}

}  // namespace ckpt::verify::convert
