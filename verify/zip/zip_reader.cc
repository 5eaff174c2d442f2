#include "verify/zip/zip_reader.h"

#include <zlib.h>

#include <cstring>

namespace ckpt::verify {
namespace {

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t le64(const unsigned char* p) {
  return static_cast<uint64_t>(le32(p)) | (static_cast<uint64_t>(le32(p + 4)) << 32);
}

constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kLocalSig = 0x04034b50;

}  // namespace

bool zip_name_is_safe(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  if (name.find('\\') != std::string::npos || name.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    if (name.compare(start, end - start, "..") == 0 && end - start == 2) return false;
    start = end + 1;
  }
  return true;
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t len) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (len > 0) {
    uInt chunk = len > (1u << 30) ? (1u << 30) : static_cast<uInt>(len);
    c = ::crc32(c, p, chunk);
    p += chunk;
    len -= chunk;
  }
  return static_cast<uint32_t>(c);
}

Result<ZipReader> ZipReader::open(const RandomAccessFile& file, const ZipLimits& limits) {
  const std::string& fn = file.path();
  const uint64_t size = file.size();
  if (size < 22) return corrupt(fn + ": not a zip archive: " + std::to_string(size) + " bytes");
  // The EOCD record is the last 22 bytes plus a comment of up to 65535 bytes.
  uint64_t tail_len = size < 22 + 65535 ? size : 22 + 65535;
  CKPT_ASSIGN_OR_RETURN(std::string tail, file.read_string(size - tail_len, tail_len));
  const auto* t = reinterpret_cast<const unsigned char*>(tail.data());
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tail_len) - 22; i >= 0; --i) {
    if (le32(t + i) == kEocdSig) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) return corrupt(fn + ": zip end-of-central-directory record not found");
  const unsigned char* e = t + eocd;
  uint64_t count = le16(e + 10);
  uint64_t cd_size = le32(e + 12);
  uint64_t cd_offset = le32(e + 16);
  const uint64_t eocd_pos = size - tail_len + static_cast<uint64_t>(eocd);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {
    if (eocd_pos < 20) return corrupt(fn + ": ZIP64 locator missing before the EOCD record");
    unsigned char loc[20];
    CKPT_RETURN_IF_ERROR(file.read_at(eocd_pos - 20, loc, 20));
    if (le32(loc) != kZip64LocatorSig) return corrupt(fn + ": ZIP64 locator signature missing");
    uint64_t z64 = le64(loc + 8);
    unsigned char rec[56];
    CKPT_RETURN_IF_ERROR(file.read_at(z64, rec, 56));
    if (le32(rec) != kZip64EocdSig) {
      return corrupt(fn + ": ZIP64 end-of-central-directory signature missing at offset " +
                     std::to_string(z64));
    }
    count = le64(rec + 32);
    cd_size = le64(rec + 40);
    cd_offset = le64(rec + 48);
  }
  if (count > limits.max_entries) {
    return corrupt(fn + ": zip claims " + std::to_string(count) + " entries (limit " +
                   std::to_string(limits.max_entries) + ")");
  }
  if (cd_size > limits.max_central_directory || !range_inside(cd_offset, cd_size, size)) {
    return corrupt(fn + ": zip central directory [" + std::to_string(cd_offset) + ", +" +
                   std::to_string(cd_size) + ") is outside the " + std::to_string(size) +
                   "-byte file");
  }
  CKPT_ASSIGN_OR_RETURN(std::string cd, file.read_string(cd_offset, cd_size));
  ZipReader z;
  z.file_ = &file;
  z.limits_ = limits;
  z.directory_offset_ = cd_offset;
  const auto* p = reinterpret_cast<const unsigned char*>(cd.data());
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (!range_inside(pos, 46, cd_size) || le32(p + pos) != kCentralSig) {
      return corrupt(fn + ": zip central directory entry " + std::to_string(i) +
                     " is truncated or has a bad signature");
    }
    const unsigned char* h = p + pos;
    ZipEntry ent;
    ent.method = le16(h + 10);
    ent.crc32 = le32(h + 16);
    ent.compressed_size = le32(h + 20);
    ent.size = le32(h + 24);
    uint64_t name_len = le16(h + 28), extra_len = le16(h + 30), comment_len = le16(h + 32);
    ent.local_header_offset = le32(h + 42);
    uint64_t var = name_len + extra_len + comment_len;
    if (!range_inside(pos + 46, var, cd_size)) {
      return corrupt(fn + ": zip central directory entry " + std::to_string(i) + " is truncated");
    }
    ent.name.assign(reinterpret_cast<const char*>(h + 46), name_len);
    // ZIP64 extended information: only the fields whose 32-bit value is saturated, in order.
    const unsigned char* x = h + 46 + name_len;
    uint64_t xp = 0;
    while (xp + 4 <= extra_len) {
      uint16_t id = le16(x + xp), len = le16(x + xp + 2);
      if (xp + 4 + len > extra_len) break;
      if (id == 0x0001) {
        const unsigned char* f = x + xp + 4;
        uint64_t fp = 0;
        auto take = [&](uint64_t* v) -> bool {
          if (fp + 8 > len) return false;
          *v = le64(f + fp);
          fp += 8;
          return true;
        };
        bool ok = true;
        if (ent.size == 0xFFFFFFFFu) ok = ok && take(&ent.size);
        if (ent.compressed_size == 0xFFFFFFFFu) ok = ok && take(&ent.compressed_size);
        if (ent.local_header_offset == 0xFFFFFFFFu) ok = ok && take(&ent.local_header_offset);
        if (!ok) return corrupt(fn + ": zip entry \"" + ent.name + "\": short ZIP64 extra field");
      }
      xp += 4 + len;
    }
    if (!zip_name_is_safe(ent.name)) {
      return corrupt(fn + ": zip entry name \"" + ent.name +
                     "\" is unsafe (absolute, `..`, backslash or NUL)");
    }
    if (ent.method != 0 && ent.method != 8) {
      return corrupt(fn + ": zip entry \"" + ent.name + "\" uses compression method " +
                     std::to_string(ent.method) + " (expected 0 stored or 8 deflate)");
    }
    if (!range_inside(ent.local_header_offset, ent.compressed_size, cd_offset)) {
      return corrupt(fn + ": zip entry \"" + ent.name + "\" at offset " +
                     std::to_string(ent.local_header_offset) + " with " +
                     std::to_string(ent.compressed_size) +
                     " bytes runs past the central directory");
    }
    if (ent.method == 0 && ent.size != ent.compressed_size) {
      return corrupt(fn + ": stored zip entry \"" + ent.name + "\" has size " +
                     std::to_string(ent.size) + " but compressed size " +
                     std::to_string(ent.compressed_size));
    }
    if (!z.by_name_.emplace(ent.name, z.entries_.size()).second) {
      return corrupt(fn + ": zip entry \"" + ent.name + "\" appears twice");
    }
    z.entries_.push_back(std::move(ent));
    pos += 46 + var;
  }
  return z;
}

const ZipEntry* ZipReader::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

Result<uint64_t> ZipReader::data_offset(const ZipEntry& e) const {
  unsigned char h[30];
  CKPT_RETURN_IF_ERROR(file_->read_at(e.local_header_offset, h, 30));
  if (le32(h) != kLocalSig) {
    return corrupt(file_->path() + ": zip entry \"" + e.name +
                   "\": bad local header signature at " + std::to_string(e.local_header_offset));
  }
  uint64_t off = e.local_header_offset + 30 + le16(h + 26) + le16(h + 28);
  if (!range_inside(off, e.compressed_size, directory_offset_)) {
    return corrupt(file_->path() + ": zip entry \"" + e.name + "\": data at " +
                   std::to_string(off) + " (+" + std::to_string(e.compressed_size) +
                   ") runs past the central directory");
  }
  return off;
}

Result<std::string> ZipReader::read_record(const ZipEntry& e) const {
  if (e.size > limits_.max_record_read || e.compressed_size > limits_.max_record_read) {
    return corrupt(file_->path() + ": zip entry \"" + e.name + "\" is " + std::to_string(e.size) +
                   " bytes (limit " + std::to_string(limits_.max_record_read) + ")");
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t off, data_offset(e));
  CKPT_ASSIGN_OR_RETURN(std::string raw, file_->read_string(off, e.compressed_size));
  if (e.method == 0) return raw;
  std::string out(e.size, '\0');
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return internal_error("zlib inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&zs, Z_FINISH);
  uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != e.size) {
    return corrupt(file_->path() + ": zip entry \"" + e.name + "\": deflate stream is corrupt (" +
                   std::to_string(produced) + " of " + std::to_string(e.size) + " bytes)");
  }
  return out;
}

std::string ZipReader::prefix() const {
  if (entries_.empty()) return "";
  const std::string& n = entries_.front().name;
  size_t slash = n.find('/');
  return slash == std::string::npos ? "" : n.substr(0, slash);
}

}  // namespace ckpt::verify
