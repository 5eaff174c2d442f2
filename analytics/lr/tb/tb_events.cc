#include "analytics/lr/tb/tb_events.h"

#include <cmath>
#include <optional>

#include "analytics/lr/tb/proto_wire.h"
#include "analytics/lr/tb/tfrecord.h"

namespace ckpt::analytics::tb {
namespace {

constexpr uint64_t kDtFloat = 1;
constexpr uint64_t kDtDouble = 2;

// Elements of a repeated float (fixed32) or double (fixed64) field: packed (one length-delimited
// run) or one field per element. Appends; false on a malformed packed run.
bool append_repeated(const WireField& f, bool is_double, std::vector<double>* out) {
  const size_t width = is_double ? 8 : 4;
  if (f.type == WireType::kBytes) {
    if (f.bytes.size() % width != 0) return false;
    for (size_t i = 0; i < f.bytes.size() && out->size() < 2; i += width) {
      const char* p = f.bytes.data() + i;
      out->push_back(is_double ? load_double_le(p) : load_float_le(p));
    }
    if (f.bytes.size() / width > 1) out->resize(2);  // more than one element: not a scalar
    return true;
  }
  if (is_double && f.type == WireType::kFixed64) out->push_back(f.as_double());
  if (!is_double && f.type == WireType::kFixed32) out->push_back(f.as_float());
  return true;
}

// The one element of a float/double TensorProto; nullopt for other dtypes or sizes.
std::optional<double> tensor_scalar(std::string_view msg, bool* malformed) {
  WireReader r(msg);
  WireField f;
  uint64_t dtype = 0;
  std::string_view content;
  std::vector<double> floats, doubles;
  while (r.next(&f)) {
    if (f.number == 1 && f.type == WireType::kVarint) dtype = f.varint;
    if (f.number == 4 && f.type == WireType::kBytes) content = f.bytes;
    if (f.number == 5 && !append_repeated(f, false, &floats)) *malformed = true;
    if (f.number == 6 && !append_repeated(f, true, &doubles)) *malformed = true;
  }
  if (!r.ok()) *malformed = true;
  if (*malformed) return std::nullopt;
  if (dtype == kDtFloat) {
    if (content.size() == 4) return load_float_le(content.data());
    if (content.empty() && floats.size() == 1) return floats[0];
  }
  if (dtype == kDtDouble) {
    if (content.size() == 8) return load_double_le(content.data());
    if (content.empty() && doubles.size() == 1) return doubles[0];
  }
  return std::nullopt;
}

// One Summary.Value: appends a scalar when it is one. False when malformed.
bool read_value(std::string_view msg, const ScalarValue& proto, std::vector<ScalarValue>* out) {
  WireReader r(msg);
  WireField f;
  ScalarValue v = proto;
  std::optional<double> value;
  bool malformed = false;
  while (r.next(&f)) {
    if (f.number == 1 && f.type == WireType::kBytes) v.tag = std::string(f.bytes);
    if (f.number == 2 && f.type == WireType::kFixed32) value = f.as_float();
    if (f.number == 8 && f.type == WireType::kBytes && !value) {
      value = tensor_scalar(f.bytes, &malformed);
    }
  }
  if (!r.ok() || malformed) return false;
  if (value && !v.tag.empty()) {
    v.value = *value;
    out->push_back(std::move(v));
  }
  return true;
}

// One Event record. False when malformed.
bool read_event(std::string_view record, EventFile* file) {
  WireReader r(record);
  WireField f;
  ScalarValue proto;
  std::vector<std::string_view> summaries;
  while (r.next(&f)) {
    if (f.number == 1 && f.type == WireType::kFixed64) proto.wall_time = f.as_double();
    if (f.number == 2 && f.type == WireType::kVarint) proto.step = static_cast<int64_t>(f.varint);
    if (f.number == 5 && f.type == WireType::kBytes) summaries.push_back(f.bytes);
  }
  if (!r.ok()) return false;
  if (file->events++ == 0 && std::isfinite(proto.wall_time)) {
    file->first_wall_time = proto.wall_time;
  }
  for (std::string_view summary : summaries) {
    WireReader s(summary);
    while (s.next(&f)) {
      if (f.number == 1 && f.type == WireType::kBytes &&
          !read_value(f.bytes, proto, &file->scalars))
        return false;
    }
    if (!s.ok()) return false;
  }
  return true;
}

}  // namespace

Result<EventFile> parse_event_file(std::string_view bytes, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(TfRecords recs, split_tfrecords(bytes, path));
  EventFile out;
  out.path = path;
  out.torn = recs.torn;
  for (size_t i = 0; i < recs.records.size(); ++i) {
    if (!read_event(recs.records[i], &out)) {
      return corrupt(path + ": record " + std::to_string(i) +
                     " is not a well-formed Event message (protobuf wire format)");
    }
  }
  return out;
}

}  // namespace ckpt::analytics::tb
