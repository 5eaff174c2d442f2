#include "verify/formats/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ckpt::verify {
namespace {

struct StDtype {
  const char* st;
  const char* name;
  size_t bits;
};
constexpr StDtype kDtypes[] = {{"BOOL", "bool", 8},
                               {"U8", "uint8", 8},
                               {"I8", "int8", 8},
                               {"F8_E5M2", "float8_e5m2", 8},
                               {"F8_E4M3", "float8_e4m3fn", 8},
                               {"F8_E8M0", "float8_e8m0fnu", 8},
                               {"F8_E4M3FNUZ", "float8_e4m3fnuz", 8},
                               {"F8_E5M2FNUZ", "float8_e5m2fnuz", 8},
                               {"I16", "int16", 16},
                               {"U16", "uint16", 16},
                               {"F16", "float16", 16},
                               {"BF16", "bfloat16", 16},
                               {"I32", "int32", 32},
                               {"U32", "uint32", 32},
                               {"F32", "float32", 32},
                               {"C64", "complex64", 64},
                               {"F64", "float64", 64},
                               {"I64", "int64", 64},
                               {"U64", "uint64", 64},
                               {"F4", "float4_e2m1", 4},
                               {"F6_E2M3", "float6_e2m3", 6},
                               {"F6_E3M2", "float6_e3m2", 6}};

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(const std::string& text, uint64_t file_size,
                                                   const std::string& where) {
  auto bad = [&](const std::string& what) {
    return corrupt(where + ": safetensors header " + what);
  };
  if (text.empty() || text[0] != '{') return bad("does not start with '{'");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("is not a JSON object");
  SafetensorsHeader h;
  h.header_size = text.size();
  h.data_start = 8 + text.size();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return bad("__metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) return bad("__metadata__[\"" + m.key() + "\"] is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const auto& v = it.value();
    SafetensorsTensor t;
    t.name = it.key();
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return bad("entry \"" + t.name + "\" lacks dtype, shape or data_offsets [begin, end]");
    }
    t.st_dtype = v["dtype"].get<std::string>();
    size_t bits = 0;
    for (const auto& d : kDtypes) {
      if (t.st_dtype == d.st) {
        t.dtype = AnyDType::from_name(d.name);
        bits = d.bits;
      }
    }
    if (bits == 0) return bad("entry \"" + t.name + "\" has unknown dtype \"" + t.st_dtype + "\"");
    t.element_size = (bits + 7) / 8;
    unsigned __int128 numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned())
        return bad("entry \"" + t.name + "\" has a non-integer dimension");
      t.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      numel *= d.get<uint64_t>();
      if (numel > (static_cast<unsigned __int128>(1) << 64))
        return bad("entry \"" + t.name + "\" shape overflows");
    }
    for (const auto& o : v["data_offsets"]) {
      if (!o.is_number_unsigned())
        return bad("entry \"" + t.name + "\" has a non-integer data offset");
    }
    t.begin = v["data_offsets"][0].get<uint64_t>();
    t.end = v["data_offsets"][1].get<uint64_t>();
    if (t.end < t.begin) return bad("entry \"" + t.name + "\" ends before it begins");
    unsigned __int128 nbits = numel * bits;
    if (nbits % 8 != 0 || nbits / 8 != t.end - t.begin) {
      return bad("entry \"" + t.name + "\" " + t.st_dtype + " spans " +
                 std::to_string(t.end - t.begin) + " bytes, its shape needs " +
                 std::to_string(static_cast<uint64_t>(nbits / 8)));
    }
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expect = 0;
  for (const auto& t : h.tensors) {
    if (t.begin != expect) {
      return bad("entry \"" + t.name + "\" starts at " + std::to_string(t.begin) + ", expected " +
                 std::to_string(expect) + " (gap or overlap)");
    }
    expect = t.end;
  }
  if (!range_inside(h.data_start, expect, file_size) || h.data_start + expect != file_size) {
    return bad("describes a buffer ending at " + std::to_string(expect) +
               " bytes after the header, "
               "but the file has " +
               std::to_string(file_size > h.data_start ? file_size - h.data_start : 0) +
               " (truncated or trailing bytes)");
  }
  return h;
}

Result<std::string> read_safetensors_header_text(const RandomAccessFile& file, uint64_t offset,
                                                 const std::string& where) {
  const uint64_t size = offset <= file.size() ? file.size() - offset : 0;
  if (size < 8) return corrupt(where + ": not safetensors: " + std::to_string(size) + " bytes");
  unsigned char len[8];
  CKPT_RETURN_IF_ERROR(file.read_at(offset, len, 8));
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | len[k];
  if (n > kSafetensorsMaxHeader || n > size - 8) {
    return corrupt(where + ": safetensors header length " + std::to_string(n) +
                   " exceeds the file or the 100 MB limit");
  }
  return file.read_string(offset + 8, n);
}

Result<SafetensorsHeader> parse_safetensors(const RandomAccessFile& file) {
  CKPT_ASSIGN_OR_RETURN(std::string text, read_safetensors_header_text(file, 0, file.path()));
  return parse_safetensors_header(text, file.size(), file.path());
}

}  // namespace ckpt::verify
