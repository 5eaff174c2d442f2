// A minimal stored-zip writer for tests: builds torch.save-shaped archives in memory so the
// readers can be tested on inputs of any size or shape (including broken ones).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "verify/zip/zip_reader.h"

namespace ckpt::verify::testing {

inline void put16(std::string& s, uint32_t v) {
  s.push_back(char(v & 0xff));
  s.push_back(char((v >> 8) & 0xff));
}
inline void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

// members: (name, bytes). Stored, CRC-32 filled, no ZIP64 (tests stay small).
inline std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, cd;
  for (const auto& [name, data] : members) {
    uint32_t crc = crc32_update(0, data.data(), data.size());
    uint32_t off = static_cast<uint32_t>(out.size());
    put32(out, 0x04034b50);
    put16(out, 20);
    put16(out, 0);
    put16(out, 0);
    put16(out, 0);
    put16(out, 0);
    put32(out, crc);
    put32(out, uint32_t(data.size()));
    put32(out, uint32_t(data.size()));
    put16(out, uint32_t(name.size()));
    put16(out, 0);
    out += name;
    out += data;
    put32(cd, 0x02014b50);
    put16(cd, 20);
    put16(cd, 20);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, crc);
    put32(cd, uint32_t(data.size()));
    put32(cd, uint32_t(data.size()));
    put16(cd, uint32_t(name.size()));
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0);
    put32(cd, off);
    cd += name;
  }
  uint32_t cd_off = static_cast<uint32_t>(out.size());
  out += cd;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, uint32_t(members.size()));
  put16(out, uint32_t(members.size()));
  put32(out, uint32_t(cd.size()));
  put32(out, cd_off);
  put16(out, 0);
  return out;
}

// data.pkl of {"w": tensor float32 [n] on `loc`, storage "0"} (protocol 2).
inline std::string one_tensor_pickle(uint32_t n, const std::string& loc) {
  std::string p;
  auto str = [&p](const std::string& v) {
    p += 'X';
    put32(p, uint32_t(v.size()));
    p += v;
  };
  p += "\x80\x02}(";
  str("w");
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(";
  str("storage");
  p += "ctorch\nFloatStorage\n";
  str("0");
  str(loc);
  p += 'J';
  put32(p, n);
  p += "tQ";
  p += 'K';
  p.push_back('\0');
  p += 'J';
  put32(p, n);
  p += "\x85K\x01\x85\x89"
       "ccollections\nOrderedDict\n)R";
  p += "tRu.";
  return p;
}

}  // namespace ckpt::verify::testing
