#include "ckpt/format/attrs_digest.h"

#include <cstring>
#include <string>

#include "ckpt/base/hash.h"

namespace ckpt {
namespace {

void put(Hasher& h, const std::string& s) {
  const uint64_t n = s.size();
  h.update(&n, sizeof n);
  h.update(s.data(), s.size());
}

void put_value(Hasher& h, const AttrValue& v) {
  const uint8_t tag = static_cast<uint8_t>(v.index());
  h.update(&tag, 1);
  std::visit(
      [&h](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          const uint8_t b = x ? 1 : 0;
          h.update(&b, 1);
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          h.update(&x, sizeof x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          put(h, x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          const uint64_t n = x.size();
          h.update(&n, sizeof n);
          for (const auto& s : x) put(h, s);
        } else {
          const uint64_t n = x.size();
          h.update(&n, sizeof n);
          h.update(x.data(), x.size() * sizeof(x[0]));
        }
      },
      v);
}

void walk(Hasher& h, const Node& node, const std::string& path) {
  for (const auto& [name, value] : node.attrs) {  // std::map: sorted
    put(h, path);
    put(h, name);
    put_value(h, value);
  }
  for (const auto& [name, t] : node.tensors) {
    if (t.alias_of.empty()) continue;
    put(h, path + "/" + name);
    put(h, "alias_of");
    put(h, t.alias_of);
  }
  for (const auto& [name, child] : node.children) walk(h, child, path + "/" + name);
}

}  // namespace

uint64_t attrs_digest(const Node& root) {
  Hasher h;
  walk(h, root, "");
  return h.digest();
}

}  // namespace ckpt
