// HDF5 file format specification version 2.0 (the parts HDF5 1.8+ writes with
// H5F_LIBVER_V18 as the low bound), byte for byte as HDF5 1.10 writes the same objects with the
// properties of rank_file_write.cc, less what a reader never needs (object times, slack space
// and continuation chunks in object headers). See encode.h.
#include "ckpt/h5/encode.h"

#include <cstring>
#include <string_view>

#include "ckpt/base/hash.h"
#include "ckpt/h5/stored_type.h"

namespace ckpt::h5 {

uint32_t lookup3(const void* data, size_t n) {
  const auto* k = static_cast<const unsigned char*>(data);
  auto rot = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t a = 0xdeadbeef + static_cast<uint32_t>(n), b = a, c = a;
  auto word = [&](size_t i) {
    return static_cast<uint32_t>(k[i]) | static_cast<uint32_t>(k[i + 1]) << 8 |
           static_cast<uint32_t>(k[i + 2]) << 16 | static_cast<uint32_t>(k[i + 3]) << 24;
  };
  while (n > 12) {
    a += word(0);
    b += word(4);
    c += word(8);
    a -= c, a ^= rot(c, 4), c += b;
    b -= a, b ^= rot(a, 6), a += c;
    c -= b, c ^= rot(b, 8), b += a;
    a -= c, a ^= rot(c, 16), c += b;
    b -= a, b ^= rot(a, 19), a += c;
    c -= b, c ^= rot(b, 4), b += a;
    n -= 12;
    k += 12;
  }
  if (n == 0) return c;
  uint32_t tail[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) tail[i / 4] |= static_cast<uint32_t>(k[i]) << (8 * (i % 4));
  a += tail[0];
  b += tail[1];
  c += tail[2];
  c ^= b, c -= rot(b, 14);
  a ^= c, a -= rot(c, 11);
  b ^= a, b -= rot(a, 25);
  c ^= b, c -= rot(b, 16);
  a ^= c, a -= rot(c, 4);
  b ^= a, b -= rot(a, 14);
  c ^= b, c -= rot(b, 24);
  return c;
}

namespace {

constexpr uint64_t kUndef = ~uint64_t{0};
constexpr uint64_t kAlign = 4096;      // every tensor extent (docs/format.md §3)
constexpr uint64_t kDataStart = 4096;  // the superblock's block
constexpr size_t kMaxMessage = 65535;  // a header message's size field is 16 bits
constexpr size_t kMaxRank = 32;        // H5S_MAX_RANK
constexpr size_t kHeapCap = 1u << 20;  // bytes of strings per global heap collection
constexpr uint16_t kHeapMaxIndex = 65535;
constexpr size_t kObjectHeaderBytes = 16;  // a global heap object's header

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Little-endian appends.
struct Bytes {
  std::string b;
  void u8(uint64_t v) { b.push_back(static_cast<char>(v & 0xff)); }
  void u16(uint64_t v) { put(v, 2); }
  void u32(uint64_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) u8(v >> (8 * i));
  }
  void raw(std::string_view s) { b.append(s.data(), s.size()); }
  void zeros(size_t n) { b.append(n, '\0'); }
};

// Datatype messages (§IV.A.2.d), as HDF5 encodes the types of types.cc.
void fixed_type(Bytes* o, uint64_t size, bool is_signed) {
  o->u8(0x10);  // class 0 (fixed point), version 1
  o->u8(is_signed ? 0x08 : 0x00), o->u8(0), o->u8(0);
  o->u32(size);
  o->u16(0), o->u16(8 * size);  // bit offset, precision
}

void float_type(Bytes* o, uint64_t size, unsigned exp_loc, unsigned exp_size, unsigned mant_size,
                unsigned bias) {
  o->u8(0x11);                                 // class 1 (floating point), version 1
  o->u8(0x20), o->u8(8 * size - 1), o->u8(0);  // implied MSB mantissa; sign bit position
  o->u32(size);
  o->u16(0), o->u16(8 * size);
  o->u8(exp_loc), o->u8(exp_size), o->u8(0), o->u8(mant_size);
  o->u32(bias);
}

template <typename PartType>
void complex_type(Bytes* o, uint64_t part, const PartType& part_type) {
  o->u8(0x36);                   // class 6 (compound), version 3
  o->u8(2), o->u8(0), o->u8(0);  // two members
  o->u32(2 * part);
  for (uint64_t m = 0; m < 2; ++m) {
    o->raw(m == 0 ? std::string_view("r\0", 2) : std::string_view("i\0", 2));
    o->u8(m * part);  // offset, in the one byte a size under 256 needs
    part_type(o);
  }
}

void f64(Bytes* o) { float_type(o, 8, 52, 11, 52, 1023); }

void bool_type(Bytes* o) {
  o->u8(0x38);  // class 8 (enumeration), version 3
  o->u8(2), o->u8(0), o->u8(0);
  o->u32(1);
  fixed_type(o, 1, true);
  o->raw(std::string_view("FALSE\0TRUE\0", 11));
  o->u8(0), o->u8(1);
}

void vlen_string_type(Bytes* o) {
  o->u8(0x19);                         // class 9 (variable length), version 1
  o->u8(0x01), o->u8(0x01), o->u8(0);  // a string, null-terminated padding, UTF-8
  o->u32(16);                          // length, heap address, object index
  fixed_type(o, 1, false);
}

void opaque_type(Bytes* o, std::string_view tag) {
  const size_t padded = align_up(tag.size() + 1, 8);
  o->u8(0x15);  // class 5 (opaque), version 1
  o->u8(padded), o->u8(0), o->u8(0);
  o->u32(1);
  o->raw(tag);
  o->zeros(padded - tag.size());
}

void dtype_message(Bytes* o, DType t) {
  const StoredType s = stored_type(t);
  auto part = [&s](Bytes* b) { float_type(b, s.size, s.exp_loc, s.exp_size, s.mant_size, s.bias); };
  switch (s.kind) {
    case StoredType::kFixed:
      return fixed_type(o, s.size, s.is_signed);
    case StoredType::kFloat:
      return part(o);
    case StoredType::kComplex:
      return complex_type(o, s.size, part);
    case StoredType::kOpaque:
      return opaque_type(o, dtype_name(t));
  }
}

// Dataspace messages, version 2: scalar, simple (with maximum dimensions equal to the dimensions,
// as H5Screate_simple(..., NULL) stores them) or null.
void scalar_space(Bytes* o) { o->u8(2), o->u8(0), o->u8(0), o->u8(0); }
void null_space(Bytes* o) { o->u8(2), o->u8(0), o->u8(0), o->u8(2); }
void simple_space(Bytes* o, const std::vector<uint64_t>& dims) {
  o->u8(2), o->u8(dims.size()), o->u8(1), o->u8(1);
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t d : dims) o->u64(d);
  }
}

// Where a string lives in the global heap.
struct HeapRef {
  uint64_t collection = 0;
  uint32_t index = 0;
};

// The strings of every attribute, in the order the encoder meets them, packed into global heap
// collections (§III.E) that start at `base`.
class Heap {
 public:
  void plan(const std::vector<std::string>& strings, uint64_t base) {
    uint64_t at = base, used = kObjectHeaderBytes;
    uint32_t index = 0;
    size_t first = 0;
    auto close = [&](size_t end) {
      const uint64_t size = align_up(used + kObjectHeaderBytes, kAlign);
      collections_.push_back({at, size, first, end});
      at += size;
      used = kObjectHeaderBytes;
      index = 0;
      first = end;
    };
    for (size_t i = 0; i < strings.size(); ++i) {
      const uint64_t need = kObjectHeaderBytes + align_up(strings[i].size(), 8);
      if (index > 0 && (used + need + kObjectHeaderBytes > kHeapCap || index == kHeapMaxIndex)) {
        close(i);
      }
      refs_.push_back({at, ++index});
      used += need;
    }
    if (!strings.empty()) close(strings.size());
  }
  const std::vector<HeapRef>& refs() const { return refs_; }

  void encode(const std::vector<std::string>& strings, Bytes* o) const {
    for (const Collection& c : collections_) {
      const size_t start = o->b.size();
      o->raw("GCOL");
      o->u8(1), o->zeros(3);
      o->u64(c.size);
      for (size_t i = c.first; i < c.end; ++i) {
        o->u16(refs_[i].index), o->u16(0), o->u32(0);  // index, reference count, reserved
        o->u64(strings[i].size());
        o->raw(strings[i]);
        o->zeros(align_up(strings[i].size(), 8) - strings[i].size());
      }
      const uint64_t used = o->b.size() - start;
      o->u16(0), o->u16(0), o->u32(0);  // object 0: the free space
      o->u64(c.size - used);
      o->zeros(c.size - used - kObjectHeaderBytes);
    }
  }
  uint64_t bytes() const {
    uint64_t n = 0;
    for (const Collection& c : collections_) n += c.size;
    return n;
  }

 private:
  struct Collection {
    uint64_t addr, size;
    size_t first, end;  // its strings
  };
  std::vector<Collection> collections_;
  std::vector<HeapRef> refs_;
};

bool valid_name(const std::string& name) {
  return !name.empty() && name != "." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Walks the tree as rank_file_write.cc's Writer does (attributes, tensors, then child groups,
// each in name order) and appends every object header to `out_`, children first. Run twice: a
// dry run (`heap_` null) that finds the headers' size and every string, then the real one with
// the heap placed after the headers.
class Encoder {
 public:
  Encoder(uint64_t tail_offset, const Heap* heap) : tail_(tail_offset), heap_(heap) {}

  // The address of the root group's header; false when the tree cannot be encoded here.
  bool encode(const Node& root, uint64_t* root_addr) { return group(root, "", root_addr); }

  const std::string& headers() const { return out_.b; }
  const std::vector<std::string>& strings() const { return strings_; }
  std::vector<DatasetExtent>& extents() { return extents_; }
  uint64_t data_end() const { return data_end_; }

 private:
  // A string's heap reference (16 bytes of attribute data). HDF5 writes a C string: what comes
  // after a NUL is not stored.
  void string_ref(Bytes* o, const std::string& s) {
    const size_t n = std::strlen(s.c_str());
    HeapRef r;
    if (heap_ == nullptr) {
      strings_.emplace_back(s.c_str(), n);
    } else {
      r = heap_->refs()[next_ref_];
    }
    ++next_ref_;
    o->u32(n), o->u64(r.collection), o->u32(r.index);
  }

  void vector_space(Bytes* o, size_t n) {
    if (n == 0) return null_space(o);
    simple_space(o, {n});
  }

  // An attribute message (version 3) for `value`.
  bool attribute(Bytes* msgs, const std::string& name, const AttrValue& value) {
    if (!valid_name(name)) return false;
    Bytes type, space, data;
    if (auto p = std::get_if<bool>(&value)) {
      bool_type(&type), scalar_space(&space), data.u8(*p ? 1 : 0);
    } else if (auto p = std::get_if<int64_t>(&value)) {
      fixed_type(&type, 8, true), scalar_space(&space), data.u64(static_cast<uint64_t>(*p));
    } else if (auto p = std::get_if<double>(&value)) {
      uint64_t bits;
      std::memcpy(&bits, p, 8);
      f64(&type), scalar_space(&space), data.u64(bits);
    } else if (auto p = std::get_if<std::string>(&value)) {
      vlen_string_type(&type), scalar_space(&space), string_ref(&data, *p);
    } else if (auto p = std::get_if<std::vector<int64_t>>(&value)) {
      fixed_type(&type, 8, true), vector_space(&space, p->size());
      for (int64_t x : *p) data.u64(static_cast<uint64_t>(x));
    } else if (auto p = std::get_if<std::vector<double>>(&value)) {
      f64(&type), vector_space(&space, p->size());
      for (double x : *p) {
        uint64_t bits;
        std::memcpy(&bits, &x, 8);
        data.u64(bits);
      }
    } else {
      const auto& v = std::get<std::vector<std::string>>(value);
      vlen_string_type(&type), vector_space(&space, v.size());
      for (const auto& s : v) string_ref(&data, s);
    }
    Bytes m;
    m.u8(3), m.u8(0);
    m.u16(name.size() + 1), m.u16(type.b.size()), m.u16(space.b.size());
    m.u8(0);  // the name's character set: ASCII, as H5Acreate2 with default properties
    m.raw(name), m.u8(0);
    m.raw(type.b), m.raw(space.b), m.raw(data.b);
    return message(msgs, 0x0C, 0, m);
  }

  static bool message(Bytes* msgs, uint8_t type, uint8_t flags, const Bytes& data) {
    if (data.b.size() > kMaxMessage) return false;
    msgs->u8(type), msgs->u16(data.b.size()), msgs->u8(flags);
    msgs->raw(data.b);
    return true;
  }

  static bool attribute_info(Bytes* msgs) {
    Bytes m;
    m.u8(0), m.u8(0), m.u64(kUndef), m.u64(kUndef);
    return message(msgs, 0x15, 0x04, m);
  }

  // Appends an object header holding `msgs`; its address.
  uint64_t header(const Bytes& msgs, size_t attrs) {
    const uint64_t addr = tail_ + out_.b.size();
    const size_t start = out_.b.size();
    const uint64_t n = msgs.b.size();
    const int width = n <= 0xff ? 1 : n <= 0xffff ? 2 : n <= 0xffffffffu ? 4 : 8;
    const uint8_t width_bits = width == 1 ? 0 : width == 2 ? 1 : width == 4 ? 2 : 3;
    const bool phase = attrs > 8;  // H5Pset_attr_phase_change(attrs, 6), as group_creation()
    out_.raw("OHDR");
    out_.u8(2), out_.u8(width_bits | (phase ? 0x10 : 0));
    if (phase) out_.u16(attrs), out_.u16(6);
    out_.put(n, width);
    out_.raw(msgs.b);
    out_.u32(lookup3(out_.b.data() + start, out_.b.size() - start));
    return addr;
  }

  bool attributes(Bytes* msgs, const std::map<std::string, AttrValue>& attrs) {
    if (attrs.size() > kEncodeMaxAttrs || !attribute_info(msgs)) return false;
    for (const auto& [name, value] : attrs) {
      if (!attribute(msgs, name, value)) return false;
    }
    return true;
  }

  bool dataset(const Tensor& t, const std::string& path, uint64_t* addr) {
    const bool alias = !t.alias_of.empty();
    const bool elsewhere = t.box_elsewhere();
    std::map<std::string, AttrValue> attrs;
    attrs["dtype"] = std::string(dtype_name(t.dtype));
    Bytes space;
    uint64_t extent = kUndef, nbytes = 0;
    if (alias || elsewhere) {
      simple_space(&space, {0});
      if (alias) attrs["alias_of"] = t.alias_of;
    } else {
      if (t.shape.size() > kMaxRank) return false;  // HDF5 refuses it: its writer says so
      std::vector<uint64_t> dims(t.shape.begin(), t.shape.end());
      uint64_t numel = 1;
      for (int64_t d : t.shape) {
        if (d < 0) return false;
        numel *= static_cast<uint64_t>(d);
      }
      if (numel * dtype_size(t.dtype) != t.nbytes) return false;  // HDF5's writer says what
      if (dims.empty()) {
        scalar_space(&space);
      } else {
        simple_space(&space, dims);
      }
      attrs["xxh3"] = hex64(t.xxh3);
      nbytes = t.nbytes;
      if (nbytes > 0) {
        extent = align_up(data_end_, kAlign);
        data_end_ = extent + nbytes;
      }
      extents_.push_back({path, &t, nbytes > 0 ? extent : 0});
    }
    if (t.box) {
      attrs["global_shape"] = t.box->global_shape;
      attrs["box_offsets"] = t.box->offsets;
      attrs["placement"] = t.box->placement;
      if (t.box->owner >= 0) attrs["box_owner"] = t.box->owner;
    }
    Bytes msgs, type, fill, layout;
    dtype_message(&type, t.dtype);
    fill.u8(3), fill.u8(0x05);  // allocated early, never filled
    layout.u8(3), layout.u8(1), layout.u64(extent), layout.u64(nbytes);  // contiguous
    if (!message(&msgs, 0x01, 0, space) || !message(&msgs, 0x03, 0x01, type) ||
        !message(&msgs, 0x05, 0x01, fill) || !message(&msgs, 0x08, 0, layout)) {
      return false;
    }
    // The attribute order of the Writer (dtype, alias_of or box attributes, then xxh3) is not
    // kept: HDF5 lists compact attributes by name either way.
    if (!attributes(&msgs, attrs)) return false;
    *addr = header(msgs, attrs.size());
    return true;
  }

  bool group(const Node& node, const std::string& path, uint64_t* addr) {
    const size_t links = node.tensors.size() + node.children.size();
    if (links > kEncodeMaxLinks) return false;
    std::vector<std::pair<const std::string*, uint64_t>> children;
    children.reserve(links);
    for (const auto& [name, t] : node.tensors) {
      uint64_t a = 0;
      if (!valid_name(name) || !dataset(t, path + "/" + name, &a)) return false;
      children.push_back({&name, a});
    }
    for (const auto& [name, child] : node.children) {
      uint64_t a = 0;
      if (!valid_name(name) || node.tensors.count(name) > 0 ||
          !group(child, path + "/" + name, &a)) {
        return false;
      }
      children.push_back({&name, a});
    }
    Bytes msgs, linfo, ginfo;
    linfo.u8(0), linfo.u8(0), linfo.u64(kUndef), linfo.u64(kUndef);
    ginfo.u8(0);
    if (links > 8) {  // H5Pset_link_phase_change(links, 6), as group_creation()
      ginfo.u8(1), ginfo.u16(links), ginfo.u16(6);
    } else {
      ginfo.u8(0);
    }
    if (!message(&msgs, 0x02, 0, linfo) || !message(&msgs, 0x0A, 0, ginfo)) return false;
    for (const auto& [name, a] : children) {
      Bytes l;
      const size_t n = name->size();
      const int width = n <= 0xff ? 1 : n <= 0xffff ? 2 : 4;
      l.u8(1), l.u8(width == 1 ? 0 : width == 2 ? 1 : 2);  // version 1; a hard link
      l.put(n, width);
      l.raw(*name);
      l.u64(a);
      if (!message(&msgs, 0x06, 0, l)) return false;
    }
    if (!attributes(&msgs, node.attrs)) return false;
    *addr = header(msgs, node.attrs.size());
    return true;
  }

  uint64_t tail_;
  const Heap* heap_;
  Bytes out_;
  std::vector<std::string> strings_;  // the dry run's
  size_t next_ref_ = 0;
  std::vector<DatasetExtent> extents_;
  uint64_t data_end_ = kDataStart;
};

std::string superblock(uint64_t eof, uint64_t root) {
  Bytes s;
  s.raw("\x89HDF\r\n\x1a\n");
  s.u8(2), s.u8(8), s.u8(8), s.u8(0);  // version 2, 8-byte offsets and lengths, no flags
  s.u64(0), s.u64(kUndef), s.u64(eof), s.u64(root);
  s.u32(lookup3(s.b.data(), s.b.size()));
  return s.b;
}

}  // namespace

std::optional<EncodedStructure> encode_structure(const Node& root) {
  // The dry run: where the tensors go (the tail starts after them), the headers' size, the
  // strings.
  Encoder dry(0, nullptr);
  uint64_t root_addr = 0;
  if (!dry.encode(root, &root_addr)) return std::nullopt;
  const uint64_t tail = align_up(dry.data_end() == kDataStart ? 48 : dry.data_end(), 8);
  Heap heap;
  heap.plan(dry.strings(), tail + dry.headers().size());
  Encoder real(tail, &heap);
  if (!real.encode(root, &root_addr)) return std::nullopt;
  EncodedStructure e;
  Bytes t;
  t.b = real.headers();
  heap.encode(dry.strings(), &t);
  e.tail_offset = tail;
  e.tail = std::move(t.b);
  e.file_bytes = tail + e.tail.size();
  e.superblock = superblock(e.file_bytes, root_addr);
  e.extents = std::move(real.extents());
  return e;
}

}  // namespace ckpt::h5
