// scan_manifest (manifest_scan.h): a one-pass reader of exactly the JSON encode_manifest writes.
// Every read is bounds-checked against the end of the text; any byte it does not expect ends
// the scan with nullopt (decode_manifest then parses the text as JSON). No recursion: the
// schema's depth is fixed (top object, "tensors" array, entry object, "box"/"chunks" object,
// their arrays).
#include "ckpt/format/manifest_scan.h"

#include <limits>

#include "ckpt/base/hash.h"

namespace ckpt {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }
  // `c` after optional whitespace.
  bool take(char c) {
    ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return p_ < end_ && *p_ == c;
  }
  // A string of printable ASCII without escapes (JSON's other strings are left to nlohmann,
  // which checks their UTF-8 and decodes their escapes).
  bool str(std::string_view* out) {
    if (!take('"')) return false;
    const char* from = p_;
    while (p_ < end_ && *p_ != '"') {
      const auto c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c >= 0x80 || c == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *out = std::string_view(from, static_cast<size_t>(p_ - from));
    ++p_;
    return true;
  }
  // An integer as JSON writes one ("0" or no leading zero), no fraction or exponent, its
  // magnitude at most `max`. nlohmann reads a non-negative one as unsigned, a negative one as
  // signed.
  bool integer(bool* negative, uint64_t* magnitude, uint64_t max) {
    ws();
    *negative = p_ < end_ && *p_ == '-';
    if (*negative) ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0' && p_ + 1 < end_ && p_[1] >= '0' && p_[1] <= '9') return false;
    uint64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      const auto d = static_cast<uint64_t>(*p_ - '0');
      if (v > (max - d) / 10) return false;
      v = v * 10 + d;
      ++p_;
    }
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    *magnitude = v;
    return true;
  }
  // What get_u64 takes: an unsigned number.
  bool u64(uint64_t* out) {
    bool negative = false;
    return integer(&negative, out, std::numeric_limits<uint64_t>::max()) && !negative;
  }
  // What get_i64 takes, where it does not wrap: an integer within int64_t.
  bool i64(int64_t* out) {
    bool negative = false;
    uint64_t v = 0;
    if (!integer(&negative, &v, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      return false;
    }
    *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }
  // 16 lowercase hex digits in a string (parse_hex64).
  bool hash(uint64_t* out) {
    std::string_view s;
    return str(&s) && parse_hex64(s, out);
  }
  // [int, ...]
  bool ints(std::vector<int64_t>* out) {
    if (!take('[')) return false;
    if (take(']')) return true;
    do {
      int64_t v = 0;
      if (!i64(&v)) return false;
      out->push_back(v);
    } while (take(','));
    return take(']');
  }
  // The members of an object: `member(index of its key in `keys`)` reads each value; a key not
  // in `keys`, or one met twice, ends the scan. `seen` gets a bit per key read.
  template <size_t N, typename Member>
  bool object(const std::string_view (&keys)[N], uint32_t* seen, Member member) {
    static_assert(N <= 32, "a bit per key");
    *seen = 0;
    if (!take('{')) return false;
    if (take('}')) return true;
    do {
      std::string_view key;
      if (!str(&key) || !take(':')) return false;
      size_t k = 0;
      while (k < N && keys[k] != key) ++k;
      if (k == N || (*seen & (1u << k)) != 0) return false;
      *seen |= 1u << k;
      if (!member(k)) return false;
    } while (take(','));
    return take('}');
  }

 private:
  const char* p_;
  const char* end_;
};

constexpr uint32_t all_of(size_t n) { return n >= 32 ? ~0u : (1u << n) - 1; }

bool scan_box(Scanner* s, BoxOf* box) {
  static constexpr std::string_view kKeys[] = {"global_shape", "offsets", "placement"};
  uint32_t seen = 0;
  std::string_view placement;
  const bool ok = s->object(kKeys, &seen, [&](size_t k) {
    switch (k) {
      case 0:
        return s->ints(&box->global_shape);
      case 1:
        return s->ints(&box->offsets);
      default:
        return s->str(&placement);
    }
  });
  box->placement = std::string(placement);
  return ok && seen == all_of(3);
}

bool scan_chunks(Scanner* s, ManifestDraftEntry* d) {
  static constexpr std::string_view kKeys[] = {"bytes", "xxh3"};
  uint32_t seen = 0;
  const bool ok = s->object(kKeys, &seen, [&](size_t k) {
    if (k == 0) return s->u64(&d->chunk_bytes);
    if (!s->take('[')) return false;
    if (s->take(']')) return true;
    do {
      uint64_t h = 0;
      if (!s->hash(&h)) return false;
      d->chunk_xxh3.push_back(h);
    } while (s->take(','));
    return s->take(']');
  });
  d->chunk_count = d->chunk_xxh3.size();
  return ok && seen == all_of(2);
}

bool scan_entry(Scanner* s, ManifestDraftEntry* d) {
  static constexpr std::string_view kKeys[] = {"path",   "dtype", "shape", "offset",
                                               "nbytes", "xxh3",  "box",   "chunks"};
  ManifestEntry& e = d->entry;
  uint32_t seen = 0;
  std::string_view path, dtype;
  const bool ok = s->object(kKeys, &seen, [&](size_t k) {
    switch (k) {
      case 0:
        return s->str(&path);
      case 1:
        return s->str(&dtype);
      case 2:
        return s->ints(&e.shape);
      case 3:
        return s->u64(&e.offset);
      case 4:
        return s->u64(&e.nbytes);
      case 5:
        return s->hash(&e.xxh3);
      case 6:
        d->has_box = true;
        return scan_box(s, &d->box);
      default:
        d->has_chunks = true;
        return scan_chunks(s, d);
    }
  });
  e.path = std::string(path);
  d->dtype = std::string(dtype);
  return ok && (seen & all_of(6)) == all_of(6);
}

}  // namespace

std::optional<ManifestDraft> scan_manifest(std::string_view text) {
  static constexpr std::string_view kKeys[] = {"format",  "version",   "file",        "file_bytes",
                                               "step",    "rank",      "world_size",  "attrs_xxh3",
                                               "tensors", "file_xxh3", "regions_xxh3"};
  Scanner s(text);
  ManifestDraft draft;
  Manifest& m = draft.header;
  uint32_t seen = 0;
  const bool ok = s.object(kKeys, &seen, [&](size_t k) {
    std::string_view v;
    int64_t version = 0;
    uint64_t h = 0;
    switch (k) {
      case 0:
        return s.str(&v) && v == "ckpt-manifest";
      case 1:
        return s.i64(&version) && version == 1;
      case 2:
        if (!s.str(&v)) return false;
        m.file = std::string(v);
        return true;
      case 3:
        return s.u64(&m.file_bytes);
      case 4:
        return s.i64(&m.step);
      case 5:
        return s.i64(&m.rank);
      case 6:
        return s.i64(&m.world_size);
      case 7:
        return s.hash(&m.attrs_xxh3);
      case 8:
        if (!s.take('[')) return false;
        if (s.take(']')) return true;
        do {
          draft.tensors.emplace_back();
          if (!scan_entry(&s, &draft.tensors.back())) return false;
        } while (s.take(','));
        return s.take(']');
      case 9:
        if (!s.hash(&h)) return false;
        m.file_xxh3 = h;
        return true;
      default:
        if (!s.hash(&h)) return false;
        m.regions_xxh3 = h;
        return true;
    }
  });
  if (!ok || (seen & all_of(9)) != all_of(9) || !s.at_end()) return std::nullopt;
  return draft;
}

}  // namespace ckpt
