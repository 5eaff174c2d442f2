#include "verify/zip/zip_reader.h"

#include <zlib.h>

#include <algorithm>
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

namespace {

struct DirectoryLocation {
  uint64_t count = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

// The end-of-central-directory record (the last 22 bytes plus a comment of up to 65535 bytes),
// and its ZIP64 twin when a field is saturated.
Result<DirectoryLocation> locate_directory(const RandomAccessFile& file) {
  const std::string& fn = file.path();
  const uint64_t size = file.size();
  if (size < 22) return corrupt(fn + ": not a zip archive: " + std::to_string(size) + " bytes");
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
  DirectoryLocation d{le16(e + 10), le32(e + 12), le32(e + 16)};
  if (d.count != 0xFFFF && d.size != 0xFFFFFFFFu && d.offset != 0xFFFFFFFFu) return d;
  const uint64_t eocd_pos = size - tail_len + static_cast<uint64_t>(eocd);
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
  return DirectoryLocation{le64(rec + 32), le64(rec + 40), le64(rec + 48)};
}

// ZIP64 extended information: only the fields whose 32-bit value is saturated, in order.
bool apply_zip64_extra(const unsigned char* x, uint64_t extra_len, ZipEntry* ent) {
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
      if (ent->size == 0xFFFFFFFFu) ok = ok && take(&ent->size);
      if (ent->compressed_size == 0xFFFFFFFFu) ok = ok && take(&ent->compressed_size);
      if (ent->local_header_offset == 0xFFFFFFFFu) ok = ok && take(&ent->local_header_offset);
      if (!ok) return false;
    }
    xp += 4 + len;
  }
  return true;
}

}  // namespace

Result<ZipReader> ZipReader::open(const RandomAccessFile& file, const ZipLimits& limits) {
  const std::string& fn = file.path();
  CKPT_ASSIGN_OR_RETURN(DirectoryLocation d, locate_directory(file));
  if (d.count > limits.max_entries) {
    return corrupt(fn + ": zip claims " + std::to_string(d.count) + " entries (limit " +
                   std::to_string(limits.max_entries) + ")");
  }
  if (d.size > limits.max_central_directory || !range_inside(d.offset, d.size, file.size())) {
    return corrupt(fn + ": zip central directory [" + std::to_string(d.offset) + ", +" +
                   std::to_string(d.size) + ") is outside the " + std::to_string(file.size()) +
                   "-byte file");
  }
  CKPT_ASSIGN_OR_RETURN(std::string cd, file.read_string(d.offset, d.size));
  ZipReader z;
  z.file_ = &file;
  z.limits_ = limits;
  z.directory_offset_ = d.offset;
  CKPT_RETURN_IF_ERROR(z.parse_directory(cd, d.count));
  if (!limits.lenient) CKPT_RETURN_IF_ERROR(z.check_overlaps());
  return z;
}

Status ZipReader::parse_directory(const std::string& cd, uint64_t count) {
  const std::string& fn = file_->path();
  const auto* p = reinterpret_cast<const unsigned char*>(cd.data());
  const uint64_t cd_size = cd.size();
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
    if (!apply_zip64_extra(h + 46 + name_len, extra_len, &ent)) {
      return corrupt(fn + ": zip entry \"" + ent.name + "\": short ZIP64 extra field");
    }
    CKPT_RETURN_IF_ERROR(add_entry(std::move(ent)));
    pos += 46 + var;
  }
  return Status::ok();
}

// The checks on one directory entry; in lenient mode only those that make it unreadable.
Status ZipReader::add_entry(ZipEntry ent) {
  const std::string& fn = file_->path();
  const bool strict = !limits_.lenient;
  if (strict && !zip_name_is_safe(ent.name)) {
    return corrupt(fn + ": zip entry name \"" + ent.name +
                   "\" is unsafe (absolute, `..`, backslash or NUL)");
  }
  if (strict && ent.method != 0 && ent.method != 8) {
    return corrupt(fn + ": zip entry \"" + ent.name + "\" uses compression method " +
                   std::to_string(ent.method) + " (expected 0 stored or 8 deflate)");
  }
  if (!range_inside(ent.local_header_offset, ent.compressed_size, directory_offset_)) {
    return corrupt(fn + ": zip entry \"" + ent.name + "\" at offset " +
                   std::to_string(ent.local_header_offset) + " with " +
                   std::to_string(ent.compressed_size) + " bytes runs past the central directory");
  }
  if (strict && ent.method == 0 && ent.size != ent.compressed_size) {
    return corrupt(fn + ": stored zip entry \"" + ent.name + "\" has size " +
                   std::to_string(ent.size) + " but compressed size " +
                   std::to_string(ent.compressed_size));
  }
  if (!by_name_.emplace(ent.name, entries_.size()).second && strict) {
    return corrupt(fn + ": zip entry \"" + ent.name + "\" appears twice");
  }
  entries_.push_back(std::move(ent));
  return Status::ok();
}

// Each entry's local header + data must lie apart from every other's: entries that share bytes
// are how a small file claims terabytes (the same deflate stream listed thousands of times).
Status ZipReader::check_overlaps() const {
  std::vector<const ZipEntry*> order;
  order.reserve(entries_.size());
  for (const auto& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const ZipEntry* a, const ZipEntry* b) {
    return a->local_header_offset < b->local_header_offset;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const ZipEntry& prev = *order[k - 1];
    const ZipEntry& cur = *order[k];
    if (cur.local_header_offset < prev.local_header_offset + 30 + prev.compressed_size) {
      return corrupt(file_->path() + ": zip entries \"" + prev.name + "\" and \"" + cur.name +
                     "\" overlap (local headers at " + std::to_string(prev.local_header_offset) +
                     " and " + std::to_string(cur.local_header_offset) +
                     "): a zip bomb or a damaged archive");
    }
  }
  return Status::ok();
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
  std::string out;
  CKPT_RETURN_IF_ERROR(stream_record(e, [&out](const char* p, size_t n) {
    out.append(p, n);
    return Status::ok();
  }));
  return out;
}

Status ZipReader::stream_record(const ZipEntry& e,
                                const std::function<Status(const char*, size_t)>& sink) const {
  constexpr size_t kChunk = 1u << 20;
  const std::string where = file_->path() + ": zip entry \"" + e.name + "\"";
  if (e.method != 0 && e.method != 8) {
    return unsupported(where + " uses compression method " + std::to_string(e.method));
  }
  if (e.size > limits_.max_total_inflated - std::min(inflated_, limits_.max_total_inflated)) {
    return corrupt(where + ": inflating it would pass the archive's cap of " +
                   std::to_string(limits_.max_total_inflated) + " bytes (a zip bomb?)");
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t off, data_offset(e));
  std::string in(kChunk, '\0');
  if (e.method == 0) {
    for (uint64_t done = 0; done < e.size;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, e.size - done));
      CKPT_RETURN_IF_ERROR(file_->read_at(off + done, in.data(), n));
      CKPT_RETURN_IF_ERROR(sink(in.data(), n));
      done += n;
    }
    return Status::ok();
  }
  std::string out(kChunk, '\0');
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return internal_error("zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  uint64_t consumed = 0;
  uint64_t produced = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && consumed < e.compressed_size) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, e.compressed_size - consumed));
      CKPT_RETURN_IF_ERROR(file_->read_at(off + consumed, in.data(), n));
      consumed += n;
      zs.next_in = reinterpret_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(n);
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    const size_t got = out.size() - zs.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && got > 0)) break;
    produced += got;
    inflated_ += got;
    if (produced > e.size) break;  // more than the directory says: stop before the sink sees it
    if (got > 0) CKPT_RETURN_IF_ERROR(sink(out.data(), got));
    if (got == 0 && zs.avail_in == 0 && consumed >= e.compressed_size) break;  // input ran out
  }
  if (rc != Z_STREAM_END || produced != e.size) {
    return corrupt(where + ": deflate stream is corrupt (" + std::to_string(produced) + " of " +
                   std::to_string(e.size) + " bytes)");
  }
  return Status::ok();
}

std::string ZipReader::prefix() const {
  if (entries_.empty()) return "";
  const std::string& n = entries_.front().name;
  size_t slash = n.find('/');
  return slash == std::string::npos ? "" : n.substr(0, slash);
}

}  // namespace ckpt::verify
