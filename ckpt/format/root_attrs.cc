#include "ckpt/format/root_attrs.h"

namespace ckpt {

std::string producer_string(const std::string& suffix) {
  std::string p = std::string(kFormatName) + " " + kVersion;
  if (!suffix.empty()) p += " " + suffix;
  return p;
}

void stamp_root_attrs(const RootAttrs& a, Node* root) {
  root->attrs["format"] = std::string(kFormatName);
  root->attrs["format_version"] = kFormatVersion;
  root->attrs["producer"] = a.producer;
  root->attrs["libtorch_version"] = a.libtorch_version;
  root->attrs["step"] = a.step;
  root->attrs["rank"] = a.rank;
  root->attrs["world_size"] = a.world_size;
  root->attrs["components"] = a.components;
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
