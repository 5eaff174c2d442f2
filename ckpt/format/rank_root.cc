#include "ckpt/format/rank_root.h"

#include <nlohmann/json.hpp>

namespace ckpt {

void set_root_attrs(const RankRoot& r, Node* root) {
  root->attrs["format"] = std::string(kFormatName);
  root->attrs["format_version"] = kFormatVersion;
  root->attrs["producer"] = r.producer;
  root->attrs["libtorch_version"] = r.libtorch_version;
  root->attrs["step"] = r.step;
  root->attrs["rank"] = r.rank;
  root->attrs["world_size"] = r.world_size;
  root->attrs["components"] = r.components;
}

std::string environment_json(const EnvironmentRecord& env) {
  nlohmann::json j = {{"libtorch", env.libtorch},
                      {env.toolchain_key, env.toolchain},
                      {"cuda_available", env.cuda_available},
                      {"cuda_devices", env.cuda_devices},
                      {"cuda_runtime", env.cuda_runtime},
                      {"host", env.host}};
  return j.dump();
}

Status check_root_format(const Node& root, const std::string& where) {
  if (const AttrValue* fmt = root.find_attr("format")) {
    const auto* name = std::get_if<std::string>(fmt);
    if (name == nullptr || *name != kFormatName) {
      return corrupt(where + ": not a ckpt rank file (root attribute \"format\" is " +
                     (name != nullptr ? "\"" + *name + "\"" : std::string("not a string")) +
                     ", want \"" + kFormatName + "\")");
    }
  }
  if (const AttrValue* ver = root.find_attr("format_version")) {
    const auto* v = std::get_if<int64_t>(ver);
    if (v == nullptr)
      return corrupt(where + ": root attribute \"format_version\" is not an integer");
    if (*v < 1 || *v > kMaxFormatVersion) {
      return unsupported(where + ": format version " + std::to_string(*v) +
                         ", this build reads versions 1.." + std::to_string(kMaxFormatVersion));
    }
  }
  return Status::ok();
}

}  // namespace ckpt
