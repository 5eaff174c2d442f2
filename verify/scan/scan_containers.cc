// The containers a pickle hides in: zip archives (torch.save, TorchScript, .npz), numpy .npy,
// legacy torch.save streams, torch.save blobs inside DCP .distcp files, bytes inside pickles.
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "verify/scan/scan_internal.h"
#include "verify/zip/zip_reader.h"

namespace ckpt::verify::scan_detail {
namespace {

uint16_t le16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
}
uint32_t le32(const char* p) {
  return static_cast<uint32_t>(le16(p)) | (static_cast<uint32_t>(le16(p + 2)) << 16);
}

bool has_suffix(const std::string& s, const char* suffix) {
  const std::string x = suffix;
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

bool is_pickle_start(const std::string& b) {
  return b.size() >= 2 && static_cast<uint8_t>(b[0]) == 0x80 && static_cast<uint8_t>(b[1]) <= 5;
}

// One member of a zip, seen through its local header (used when the directory cannot be read).
struct LocalMember {
  std::string name;
  uint16_t method = 0;
  uint64_t data_offset = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
};

Result<std::string> inflate_member(const std::string& raw, uint64_t size, uint64_t cap) {
  if (size > cap) return corrupt("member of " + std::to_string(size) + " bytes is over the cap");
  std::string out(size, '\0');
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return internal_error("zlib inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) return corrupt("deflate stream is damaged");
  return out;
}

// Walks local headers from `offset` while they chain; stops at the first that does not parse.
std::vector<LocalMember> walk_local_headers(const RandomAccessFile& f, uint64_t offset,
                                            size_t max_members) {
  std::vector<LocalMember> out;
  char h[30];
  while (out.size() < max_members && offset + 30 <= f.size()) {
    if (!f.read_at(offset, h, 30).is_ok() || le32(h) != 0x04034b50u) break;
    LocalMember m;
    m.method = le16(h + 8);
    m.compressed_size = le32(h + 18);
    m.size = le32(h + 22);
    const uint64_t name_len = le16(h + 26), extra_len = le16(h + 28);
    auto name = f.read_string(offset + 30, name_len);
    if (!name.is_ok()) break;
    m.name = *name;
    m.data_offset = offset + 30 + name_len + extra_len;
    if (m.data_offset + m.compressed_size > f.size()) break;
    out.push_back(m);
    offset = m.data_offset + m.compressed_size;
    if (le16(h + 6) & 0x8) {  // a data descriptor follows, with or without its signature
      char d[4];
      if (f.read_at(offset, d, 4).is_ok() && le32(d) == 0x08074b50u) offset += 4;
      offset += 12;
    }
  }
  return out;
}

// A member that may carry a pickle: .pkl anywhere, .npy in an .npz.
void scan_member(const std::string& name, const std::string& bytes, const std::string& where,
                 int depth, FileContext* ctx, WeightsOnlyInput* keep) {
  if (has_suffix(name, ".npy")) {
    scan_npy(bytes, where, depth, ctx);
  } else {
    scan_pickles(bytes, 0, where, 0, depth, ctx, keep);
  }
}

bool wanted_member(const std::string& name) {
  return has_suffix(name, ".pkl") || has_suffix(name, ".npy");
}

// Every local header in the first options.max_search_bytes of `f`, found by signature (no chain
// to follow: torch streams its records with data descriptors, so the headers hold no sizes).
// Each member that may hold a pickle is scanned; a stored member of unknown size is read as far
// as its pickle goes (a pickle ends itself with STOP).
void scan_local_headers(const RandomAccessFile& f, const std::string& label, int depth,
                        FileContext* ctx) {
  constexpr size_t kChunk = 4u << 20;
  constexpr uint64_t kUnknownSizeWindow = 64u << 20;
  const uint64_t limit = std::min<uint64_t>(f.size(), ctx->options.max_search_bytes);
  for (uint64_t off = 0; off < limit; off += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk + 3, f.size() - off));
    auto buf = f.read_string(off, n);
    if (!buf.is_ok()) break;
    for (size_t p = buf->find("PK\x03\x04", 0, 4); p != std::string::npos && p < kChunk;
         p = buf->find("PK\x03\x04", p + 1, 4)) {
      for (LocalMember m : walk_local_headers(f, off + p, 1)) {
        if (!wanted_member(m.name)) continue;
        const std::string where = label + "@" + std::to_string(off + p) + ":" + m.name;
        const bool unknown_size = m.compressed_size == 0 && m.method == 0;
        if (unknown_size) {
          m.compressed_size = std::min<uint64_t>(kUnknownSizeWindow, f.size() - m.data_offset);
          m.size = m.compressed_size;
        }
        if (m.compressed_size > ctx->options.max_pickle_bytes) continue;
        auto raw = f.read_string(m.data_offset, m.compressed_size);
        if (!raw.is_ok()) continue;
        Result<std::string> bytes = std::string();
        if (m.method == 0) {
          bytes = std::move(raw).value();
        } else if (m.method == 8) {
          bytes = inflate_member(*raw, m.size, ctx->options.max_pickle_bytes);
        } else {
          ctx->out->errors.push_back(where + ": compression method " + std::to_string(m.method));
          continue;
        }
        if (!bytes.is_ok()) {
          ctx->out->errors.push_back(where + ": " + bytes.status().message());
        } else if (unknown_size && !has_suffix(m.name, ".npy")) {
          scan_pickles(*bytes, 0, where, 1, depth, ctx, nullptr);
        } else {
          scan_member(m.name, *bytes, where, depth, ctx, nullptr);
        }
      }
    }
  }
  if (f.size() > limit) {
    ctx->out->errors.push_back(label + ": only the first " + std::to_string(limit) +
                               " bytes were searched for zip members");
  }
}

}  // namespace

void scan_zip(const RandomAccessFile& f, const std::string& label, int depth, FileContext* ctx) {
  ZipLimits limits;
  limits.lenient = true;
  limits.max_record_read = ctx->options.max_pickle_bytes;
  auto z = ZipReader::open(f, limits);
  if (!z.is_ok()) {
    // No usable central directory: what torch.load would read is still in the local headers.
    ctx->out->errors.push_back(z.status().message());
    if (ctx->out->format.empty()) ctx->out->format = "zip";
    scan_local_headers(f, label, depth, ctx);
    return;
  }
  const std::string prefix = z->prefix();
  const bool torch = !prefix.empty() && z->find(prefix + "/data.pkl") != nullptr;
  const bool script = torch && z->find(prefix + "/constants.pkl") != nullptr;
  bool npz = !z->entries().empty();
  for (const auto& e : z->entries()) npz = npz && has_suffix(e.name, ".npy");
  if (ctx->out->format.empty()) {
    ctx->out->format = script ? "torchscript" : torch ? "torch.save" : npz ? "numpy .npz" : "zip";
  }
  WeightsOnlyInput wo;
  for (const auto& e : z->entries()) {
    if (!wanted_member(e.name)) continue;
    const std::string where = label + ":" + e.name;
    auto bytes = z->read_record(e);
    if (!bytes.is_ok()) {
      ctx->out->errors.push_back(bytes.status().message());
      continue;
    }
    const bool data_pkl = torch && e.name == prefix + "/data.pkl" && wo.docs.empty();
    scan_member(e.name, *bytes, where, depth, ctx, data_pkl ? &wo : nullptr);
  }
  if (torch && !script && depth == 0) predict_weights_only(wo, true, ctx);
}

namespace {

// The header of a .npy: \x93NUMPY, major, minor, header length (2 bytes in 1.0, 4 in 2.0/3.0),
// a dict literal. Returns false (with `why`) when it does not parse.
bool npy_header(const std::string& bytes, uint64_t* data_offset, std::string* descr,
                std::string* why) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY", 6) != 0) {
    *why = "not a .npy array (bad magic)";
    return false;
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const uint64_t hlen = major == 1 ? le16(bytes.data() + 8)
                                   : (bytes.size() >= 12 ? le32(bytes.data() + 8) : UINT64_MAX);
  const uint64_t hstart = major == 1 ? 10 : 12;
  if (hlen > bytes.size() - std::min<uint64_t>(bytes.size(), hstart)) {
    *why = ".npy header runs past the end";
    return false;
  }
  const std::string header = bytes.substr(hstart, hlen);
  const size_t d = header.find("descr");
  const size_t f = header.find("fortran_order");
  *descr = header.substr(d == std::string::npos ? 0 : d,
                         f == std::string::npos || f < d ? std::string::npos : f - d);
  *data_offset = hstart + hlen;
  return true;
}

// Object arrays ('|O', or an 'O' field of a structured dtype) are stored as a pickle.
bool object_descr(const std::string& descr) {
  return descr.find("'|O'") != std::string::npos || descr.find("'O'") != std::string::npos ||
         descr.find("\"|O\"") != std::string::npos || descr.find("'<O") != std::string::npos;
}

}  // namespace

bool npy_holds_pickle(const std::string& head) {
  uint64_t off = 0;
  std::string descr, why;
  return !npy_header(head, &off, &descr, &why) || object_descr(descr);
}

void scan_npy(const std::string& bytes, const std::string& where, int depth, FileContext* ctx) {
  uint64_t off = 0;
  std::string descr, why;
  if (!npy_header(bytes, &off, &descr, &why)) {
    ctx->out->errors.push_back(where + ": " + why);
    return;
  }
  if (object_descr(descr)) scan_pickles(bytes, off, where, 1, depth, ctx, nullptr);
}

void scan_legacy(const RandomAccessFile& f, const std::string& label, FileContext* ctx) {
  ctx->out->format = "torch.save legacy";
  // magic, protocol version, sys info, the object, the storage keys: five pickles, then raw
  // storage bytes. Only the pickles are read: a window that widens while they run past it.
  const uint64_t limit = std::min<uint64_t>(f.size(), ctx->options.max_pickle_bytes);
  for (uint64_t window = std::min<uint64_t>(16u << 20, limit);;
       window = std::min(window * 4, limit)) {
    auto bytes = f.read_string(0, window);
    if (!bytes.is_ok()) {
      ctx->out->errors.push_back(bytes.status().message());
      return;
    }
    FileScan attempt;
    attempt.file = ctx->out->file;
    attempt.format = ctx->out->format;
    FileContext actx{&attempt, ctx->options, {}};
    WeightsOnlyInput wo;
    scan_pickles(*bytes, 0, label, 5, 0, &actx, &wo);
    if (wo.docs.size() < 5 || !wo.complete) {
      wo.complete = false;
      if (window < limit) continue;
    }
    predict_weights_only(wo, true, &actx);
    *ctx->out = std::move(attempt);
    return;
  }
}

void scan_embedded_zips(const RandomAccessFile& f, const std::string& label, FileContext* ctx) {
  // DCP writes non-tensor values (loader state, extra objects) as torch.save blobs at offsets its
  // .metadata records; searching for their local headers finds them without trusting it.
  scan_local_headers(f, label, 1, ctx);
}

void scan_nested_bytes(const std::string& bytes, const std::string& where, int depth,
                       FileContext* ctx) {
  if (depth > ctx->options.max_nesting) return;
  if (is_pickle_start(bytes)) {
    scan_pickles(bytes, 0, where, 0, depth, ctx, nullptr);
  } else if (bytes.compare(0, 4, "PK\x03\x04", 4) == 0) {
    auto mf = memory_file(where, bytes);
    scan_zip(*mf, where, depth, ctx);
  } else if (bytes.compare(0, 6, "\x93NUMPY", 6) == 0) {
    scan_npy(bytes, where, depth, ctx);
  }
}

}  // namespace ckpt::verify::scan_detail
