#include "ckpt/loader/sampler_node.h"

#include <limits>
#include <string>

namespace ckpt::loader {
namespace {

template <typename T>
Result<T> read_attr(const Node& node, const std::string& name, const char* expected) {
  const AttrValue* v = node.find_attr(name);
  if (v == nullptr) return corrupt("loader: attribute \"" + name + "\" is missing");
  if (const T* p = std::get_if<T>(v)) return *p;
  return corrupt("loader: attribute \"" + name + "\" is " + attr_type_name(*v) + ", expected " +
                 expected);
}

Result<uint64_t> read_count(const Node& node, const std::string& name, uint64_t max) {
  CKPT_ASSIGN_OR_RETURN(int64_t v, read_attr<int64_t>(node, name, "an int64"));
  if (v < 0 || static_cast<uint64_t>(v) > max) {
    return corrupt("loader: attribute \"" + name + "\" = " + std::to_string(v) + " outside [0, " +
                   std::to_string(max) + "]");
  }
  return static_cast<uint64_t>(v);
}

}  // namespace

void sampler_to_node(const SamplerSpec& spec, const LoaderCursor& cursor, Node* loader) {
  auto& a = loader->attrs;
  a["dataset_size"] = static_cast<int64_t>(spec.dataset_size);
  a["dataset_fingerprint"] = spec.dataset_fingerprint;
  // HDF5 attributes here are signed; the seed keeps its 64 bits through a two's-complement cast.
  a["seed"] = static_cast<int64_t>(spec.seed);
  a["shuffle"] = spec.shuffle;
  a["drop_last"] = spec.drop_last;
  a["world_size"] = static_cast<int64_t>(spec.world_size);
  a["batch_size"] = static_cast<int64_t>(spec.batch_size);
  a["epoch"] = static_cast<int64_t>(cursor.epoch);
  a["position"] = static_cast<int64_t>(cursor.position);
  a["order"] = std::string(kOrderAlgorithm);
}

Result<std::pair<SamplerSpec, LoaderCursor>> sampler_from_node(const Node& loader) {
  constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();
  constexpr uint64_t kI64 = std::numeric_limits<int64_t>::max();
  SamplerSpec spec;
  LoaderCursor cursor;
  CKPT_ASSIGN_OR_RETURN(spec.dataset_size, read_count(loader, "dataset_size", kMaxDatasetSize));
  CKPT_ASSIGN_OR_RETURN(spec.dataset_fingerprint,
                        read_attr<std::string>(loader, "dataset_fingerprint", "a string"));
  CKPT_ASSIGN_OR_RETURN(int64_t seed, read_attr<int64_t>(loader, "seed", "an int64"));
  spec.seed = static_cast<uint64_t>(seed);
  CKPT_ASSIGN_OR_RETURN(spec.shuffle, read_attr<bool>(loader, "shuffle", "a bool"));
  CKPT_ASSIGN_OR_RETURN(spec.drop_last, read_attr<bool>(loader, "drop_last", "a bool"));
  CKPT_ASSIGN_OR_RETURN(uint64_t world, read_count(loader, "world_size", kU32));
  CKPT_ASSIGN_OR_RETURN(uint64_t batch, read_count(loader, "batch_size", kU32));
  spec.world_size = static_cast<uint32_t>(world);
  spec.batch_size = static_cast<uint32_t>(batch);
  CKPT_ASSIGN_OR_RETURN(cursor.epoch, read_count(loader, "epoch", kI64));
  CKPT_ASSIGN_OR_RETURN(cursor.position, read_count(loader, "position", kI64));
  if (loader.find_attr("order") != nullptr) {
    CKPT_ASSIGN_OR_RETURN(std::string order, read_attr<std::string>(loader, "order", "a string"));
    if (order != kOrderAlgorithm) {
      return unsupported("loader: order algorithm \"" + order +
                         "\" is not known (this build has \"" + kOrderAlgorithm + "\")");
    }
  }
  if (Status s = validate_spec(spec); !s.is_ok()) return corrupt(s.message());
  if (Status s = validate_cursor(spec, cursor); !s.is_ok()) return corrupt(s.message());
  return std::make_pair(std::move(spec), cursor);
}

}  // namespace ckpt::loader
