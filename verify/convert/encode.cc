#include "verify/convert/encode.h"

#include "ckpt/base/text.h"

namespace ckpt::verify::convert {
namespace {

constexpr int kMaxDepth = 64;

bool homogeneous(const Value& v) {
  if (v.items.empty()) return false;
  for (Kind k : {Kind::kFloat, Kind::kStr, Kind::kInt}) {
    bool all = true;
    for (const Value* x : v.items) all = all && x->kind == k;
    if (all) return true;
  }
  return false;
}

AttrValue array_attr(const Value& v) {
  switch (v.items[0]->kind) {
    case Kind::kFloat: {
      std::vector<double> out;
      for (const Value* x : v.items) out.push_back(x->f);
      return out;
    }
    case Kind::kStr: {
      std::vector<std::string> out;
      for (const Value* x : v.items) out.push_back(x->s);
      return out;
    }
    default: {
      std::vector<int64_t> out;
      for (const Value* x : v.items) out.push_back(x->i);
      return out;
    }
  }
}

// A dict key as a group member name: all-int dicts are intdicts, all-str dicts dicts.
bool name_ok(const std::string& n) {
  return !n.empty() && n != "." && n.find('/') == std::string::npos && n.rfind("ckpt.", 0) != 0;
}

// HDF5 strings and the manifest's JSON are UTF-8; pickled str values normally are, but a
// damaged or hostile pickle can carry anything. RFC 3629's table: no overlong forms, no
// surrogates, nothing past U+10FFFF.
bool valid_utf8(const std::string& s) {
  auto at = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = at(i);
    size_t more = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c < 0x80) {
      more = 0;
    } else if (c >= 0xc2 && c <= 0xdf) {
      more = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      more = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      more = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (i + more >= s.size() && more > 0) return false;
    for (size_t k = 1; k <= more; ++k) {
      const unsigned char b = at(i + k);
      if (k == 1 ? (b < lo || b > hi) : (b >> 6) != 0x2) return false;
    }
    i += more + 1;
  }
  return true;
}

bool strings_utf8(const Value& v) {
  for (const Value* x : v.items) {
    if (x->kind == Kind::kStr && !valid_utf8(x->s)) return false;
  }
  return true;
}

// The path of `name` inside `path`: "a.b", "a[0]", or "file.pt:a" at a labelled tree's root
// (whose path ends with ':').
std::string join(const std::string& path, const std::string& name, bool list) {
  if (list) return path + "[" + name + "]";
  if (path.empty() || path.back() == ':') return path + printable(name);
  return path + "." + printable(name);
}

}  // namespace

std::string printable(const std::string& key) {
  if (valid_utf8(key)) return key;
  return escape_bytes(key, std::string::npos, Backslash::kKeep);
}

std::string path_text(const std::string& path) {
  if (path.empty()) return "(top level)";
  return path.back() == ':' ? path.substr(0, path.size() - 1) : path;
}

std::string why_unmappable(const Value& v) {
  switch (v.kind) {
    case Kind::kBigInt:
      return "an integer outside the int64 range";
    case Kind::kSet:
      return "a set (a state dict holds no sets)";
    case Kind::kGlobal:
      return "a reference to " + v.qualname() + " (code, not data; never imported)";
    case Kind::kObject:
      return "a pickled " + v.qualname() + " object (never constructed)";
    case Kind::kStorage:
      return "a bare storage without a tensor";
    default:
      return std::string("a ") + kind_name(v.kind) + " value";
  }
}

void TreeEncoder::skip(const std::string& name, const std::string& path, const std::string& why,
                       std::map<std::string, std::vector<std::string>>* lists) {
  tally_->unmapped.push_back({path_text(path), why});
  (*lists)["ckpt.skipped"].push_back(name);
}

Result<bool> TreeEncoder::tensor(const Value& v, const std::string& path, Tensor* out) {
  auto t = fetch_(*v.tensor);
  if (!t.is_ok()) {
    if (t.status().code() != Code::kUnsupported) return t.status();
    tally_->unmapped.push_back({path_text(path), t.status().message()});
    return false;
  }
  *out = std::move(*t);
  ++tally_->tensors;
  tally_->bytes += out->nbytes;
  if (tally_->progress) tally_->progress(out->nbytes);
  return true;
}

Result<bool> TreeEncoder::container(const Value& v, const std::string& path, Node* out, int depth) {
  std::vector<std::pair<std::string, const Value*>> items;
  std::string kind;
  if (v.kind == Kind::kDict) {
    bool all_int = !v.entries.empty(), all_str = true;
    for (const auto& [k, x] : v.entries) {
      all_int = all_int && k->kind == Kind::kInt;
      all_str = all_str && k->kind == Kind::kStr;
    }
    if (!all_int && !all_str) {
      tally_->unmapped.push_back(
          {path_text(path), "a dict whose keys are neither all strings nor all ints"});
      return false;
    }
    kind = all_int ? "intdict" : "dict";
    for (const auto& [k, x] : v.entries)
      items.emplace_back(all_int ? std::to_string(k->i) : k->s, x);
  } else if (v.kind == Kind::kList || v.kind == Kind::kTuple) {
    kind = v.kind == Kind::kList ? "list" : "tuple";
    out->attrs["ckpt.len"] = static_cast<int64_t>(v.items.size());
    for (size_t i = 0; i < v.items.size(); ++i) items.emplace_back(std::to_string(i), v.items[i]);
  } else {
    tally_->unmapped.push_back({path_text(path), why_unmappable(v)});
    return false;
  }
  out->attrs["ckpt.kind"] = kind;
  std::map<std::string, std::vector<std::string>> lists;
  std::set<std::string> names;
  for (const auto& [name, x] : items) {
    const std::string sub = join(path, name, v.kind != Kind::kDict);
    if (!valid_utf8(name)) {
      tally_->unmapped.push_back({sub, "a key that is not valid UTF-8"});
      continue;
    }
    if (!name_ok(name)) {
      tally_->unmapped.push_back({sub, "key \"" + name.substr(0, 80) +
                                           "\" is not a group member name (empty, \".\", "
                                           "with '/' or starting \"ckpt.\")"});
      continue;
    }
    if (!names.insert(name).second) {
      skip(name, sub, "a second entry with the same key", &lists);
      continue;
    }
    CKPT_RETURN_IF_ERROR(entry(name, *x, sub, out, &lists, depth));
  }
  for (auto& [k, names_of] : lists) {
    if (!names_of.empty()) out->attrs[k] = names_of;
  }
  return true;
}

Status TreeEncoder::entry(const std::string& name, const Value& x, const std::string& path,
                          Node* out, std::map<std::string, std::vector<std::string>>* lists,
                          int depth) {
  if (auto m = moved_->find(&x); m != moved_->end()) {
    (*lists)["ckpt.none"].push_back(name);
    (*lists)["ckpt.moved"].push_back(name + "=" + m->second);
    return Status::ok();
  }
  switch (x.kind) {
    case Kind::kNone:
      (*lists)["ckpt.none"].push_back(name);
      return Status::ok();
    case Kind::kBool:
      out->attrs[name] = x.b;
      return Status::ok();
    case Kind::kInt:
      out->attrs[name] = x.i;
      return Status::ok();
    case Kind::kFloat:
      out->attrs[name] = x.f;
      return Status::ok();
    case Kind::kStr:
      if (!valid_utf8(x.s)) {
        skip(name, path, "a string that is not valid UTF-8", lists);
      } else {
        out->attrs[name] = x.s;
      }
      return Status::ok();
    case Kind::kBytes:
      out->tensors[name] = Tensor::copy_of(DType::kUInt8, {static_cast<int64_t>(x.s.size())},
                                           x.s.data(), x.s.size());
      (*lists)["ckpt.bytes"].push_back(name);
      return Status::ok();
    case Kind::kTensor: {
      Tensor t;
      CKPT_ASSIGN_OR_RETURN(bool ok, tensor(x, path, &t));
      if (ok) {
        out->tensors[name] = std::move(t);
      } else {
        (*lists)["ckpt.skipped"].push_back(name);
      }
      return Status::ok();
    }
    case Kind::kList:
    case Kind::kTuple:
      if (homogeneous(x) && strings_utf8(x)) {
        out->attrs[name] = array_attr(x);
        if (x.kind == Kind::kTuple) (*lists)["ckpt.tuples"].push_back(name);
        return Status::ok();
      }
      [[fallthrough]];
    case Kind::kDict: {
      if (depth >= kMaxDepth) {
        skip(name, path, "nested deeper than " + std::to_string(kMaxDepth) + " levels", lists);
        return Status::ok();
      }
      Node child;
      CKPT_ASSIGN_OR_RETURN(bool ok, container(x, path, &child, depth + 1));
      if (ok) {
        out->children[name] = std::move(child);
      } else {
        (*lists)["ckpt.skipped"].push_back(name);
      }
      return Status::ok();
    }
    default:
      skip(name, path, why_unmappable(x), lists);
      return Status::ok();
  }
}

}  // namespace ckpt::verify::convert
