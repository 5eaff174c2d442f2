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

}  // namespace ckpt
