#include "ckpt/h5/types.h"

#include <cstring>
#include <memory>
#include <vector>

#include "ckpt/h5/stored_type.h"

namespace ckpt::h5 {
namespace {

// A float of the stored type's field layout (IEEE single and double are HDF5's own).
Handle float_type(const StoredType& s) {
  if (s.size == 4) return type_handle(H5Tcopy(H5T_IEEE_F32LE));
  if (s.size == 8) return type_handle(H5Tcopy(H5T_IEEE_F64LE));
  Handle t = type_handle(H5Tcopy(H5T_IEEE_F32LE));
  H5Tset_fields(t.get(), 8 * s.size - 1, s.exp_loc, s.exp_size, 0, s.mant_size);
  H5Tset_offset(t.get(), 0);
  H5Tset_precision(t.get(), 8 * s.size);
  H5Tset_size(t.get(), s.size);
  H5Tset_ebias(t.get(), s.bias);
  return t;
}

Handle complex_type(hid_t part, size_t part_size) {
  Handle t = type_handle(H5Tcreate(H5T_COMPOUND, 2 * part_size));
  H5Tinsert(t.get(), "r", 0, part);
  H5Tinsert(t.get(), "i", part_size, part);
  return t;
}

Handle bool_enum() {
  Handle t = type_handle(H5Tenum_create(H5T_NATIVE_INT8));
  int8_t f = 0, v = 1;
  H5Tenum_insert(t.get(), "FALSE", &f);
  H5Tenum_insert(t.get(), "TRUE", &v);
  return t;
}

Handle vlen_string() {
  Handle t = type_handle(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

Status put_attr(hid_t obj, const std::string& name, hid_t type, hid_t space, const void* buf,
                const std::string& where) {
  Handle a = attr_handle(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid()) return h5_error(where, "cannot create attribute \"" + name + "\"");
  // An empty vector has a null dataspace and nothing to write.
  if (H5Sget_simple_extent_type(space) != H5S_NULL && H5Awrite(a.get(), type, buf) < 0) {
    return h5_error(where, "cannot write attribute \"" + name + "\"");
  }
  return Status::ok();
}

Handle vector_space(size_t n) {
  if (n == 0) return space_handle(H5Screate(H5S_NULL));
  hsize_t dims[1] = {n};
  return space_handle(H5Screate_simple(1, dims, nullptr));
}

}  // namespace

Handle make_type(DType t) {
  const StoredType s = stored_type(t);
  switch (s.kind) {
    case StoredType::kFixed:
      switch (s.size) {
        case 1:
          return type_handle(H5Tcopy(s.is_signed ? H5T_STD_I8LE : H5T_STD_U8LE));
        case 2:
          return type_handle(H5Tcopy(s.is_signed ? H5T_STD_I16LE : H5T_STD_U16LE));
        case 4:
          return type_handle(H5Tcopy(s.is_signed ? H5T_STD_I32LE : H5T_STD_U32LE));
        default:
          return type_handle(H5Tcopy(s.is_signed ? H5T_STD_I64LE : H5T_STD_U64LE));
      }
    case StoredType::kFloat:
      return float_type(s);
    case StoredType::kComplex: {
      Handle part = float_type(s);
      return complex_type(part.get(), s.size);
    }
    case StoredType::kOpaque: {
      Handle o = type_handle(H5Tcreate(H5T_OPAQUE, 1));
      H5Tset_tag(o.get(), dtype_name(t));
      return o;
    }
  }
  return Handle();
}

Status write_attr(hid_t obj, const std::string& name, const AttrValue& v,
                  const std::string& where) {
  Handle scalar = space_handle(H5Screate(H5S_SCALAR));
  if (auto p = std::get_if<bool>(&v)) {
    Handle t = bool_enum();
    int8_t b = *p ? 1 : 0;
    return put_attr(obj, name, t.get(), scalar.get(), &b, where);
  }
  if (auto p = std::get_if<int64_t>(&v)) {
    return put_attr(obj, name, H5T_STD_I64LE, scalar.get(), p, where);
  }
  if (auto p = std::get_if<double>(&v)) {
    return put_attr(obj, name, H5T_IEEE_F64LE, scalar.get(), p, where);
  }
  if (auto p = std::get_if<std::string>(&v)) {
    Handle t = vlen_string();
    const char* s = p->c_str();
    return put_attr(obj, name, t.get(), scalar.get(), &s, where);
  }
  if (auto p = std::get_if<std::vector<int64_t>>(&v)) {
    Handle sp = vector_space(p->size());
    return put_attr(obj, name, H5T_STD_I64LE, sp.get(), p->data(), where);
  }
  if (auto p = std::get_if<std::vector<double>>(&v)) {
    Handle sp = vector_space(p->size());
    return put_attr(obj, name, H5T_IEEE_F64LE, sp.get(), p->data(), where);
  }
  const auto& strs = std::get<std::vector<std::string>>(v);
  std::vector<const char*> ptrs;
  ptrs.reserve(strs.size());
  for (const auto& s : strs) ptrs.push_back(s.c_str());
  Handle t = vlen_string();
  Handle sp = vector_space(strs.size());
  return put_attr(obj, name, t.get(), sp.get(), ptrs.data(), where);
}

namespace {

struct AttrReadCtx {
  std::map<std::string, AttrValue>* out;
  std::string where;
  std::string skip;
  Status status;
};

Result<AttrValue> read_one(hid_t a, const std::string& name, const std::string& where) {
  Handle type = type_handle(H5Aget_type(a));
  Handle space = space_handle(H5Aget_space(a));
  if (!type.valid() || !space.valid())
    return h5_error(where, "unreadable attribute " + name, Code::kCorrupt);
  const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
  const hssize_t n = sclass == H5S_NULL ? 0 : H5Sget_simple_extent_npoints(space.get());
  const bool is_scalar = sclass == H5S_SCALAR;
  if (n < 0 || n > (1 << 24))
    return corrupt(where + ": attribute \"" + name + "\" has an absurd size");
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_ENUM && is_scalar) {
    int8_t b = 0;
    if (H5Aread(a, H5T_NATIVE_INT8, &b) < 0)
      return h5_error(where, "cannot read " + name, Code::kCorrupt);
    return AttrValue(b != 0);
  }
  if (cls == H5T_INTEGER) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    if (n > 0 && H5Aread(a, H5T_NATIVE_INT64, v.data()) < 0) {
      return h5_error(where, "cannot read " + name, Code::kCorrupt);
    }
    if (is_scalar) return AttrValue(v.at(0));
    return AttrValue(std::move(v));
  }
  if (cls == H5T_FLOAT) {
    std::vector<double> v(static_cast<size_t>(n));
    if (n > 0 && H5Aread(a, H5T_NATIVE_DOUBLE, v.data()) < 0) {
      return h5_error(where, "cannot read " + name, Code::kCorrupt);
    }
    if (is_scalar) return AttrValue(v.at(0));
    return AttrValue(std::move(v));
  }
  if (cls == H5T_STRING) {
    Handle mem = vlen_string();
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    std::vector<std::string> v;
    if (H5Tis_variable_str(type.get()) > 0) {
      if (n > 0 && H5Aread(a, mem.get(), ptrs.data()) < 0) {
        return h5_error(where, "cannot read " + name, Code::kCorrupt);
      }
      for (char* p : ptrs) v.emplace_back(p ? p : "");
      if (n > 0) H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
    } else {
      const size_t len = H5Tget_size(type.get());
      if (len > (1u << 24)) return corrupt(where + ": attribute \"" + name + "\" too long");
      std::vector<char> buf(len * static_cast<size_t>(n) + 1, '\0');
      if (n > 0 && H5Aread(a, type.get(), buf.data()) < 0) {
        return h5_error(where, "cannot read " + name, Code::kCorrupt);
      }
      for (hssize_t i = 0; i < n; ++i) {
        const char* s = buf.data() + static_cast<size_t>(i) * len;
        v.emplace_back(s, strnlen(s, len));
      }
    }
    if (is_scalar) return AttrValue(v.at(0));
    return AttrValue(std::move(v));
  }
  return corrupt(where + ": attribute \"" + name + "\" has an HDF5 type ckpt does not store");
}

herr_t on_attr(hid_t obj, const char* name, const H5A_info_t*, void* data) {
  auto* ctx = static_cast<AttrReadCtx*>(data);
  const std::string n = name;
  if (("," + ctx->skip + ",").find("," + n + ",") != std::string::npos) return 0;
  Handle a = attr_handle(H5Aopen(obj, name, H5P_DEFAULT));
  if (!a.valid()) {
    ctx->status = h5_error(ctx->where, "cannot open attribute " + n, Code::kCorrupt);
    return -1;
  }
  auto v = read_one(a.get(), n, ctx->where);
  if (!v.is_ok()) {
    ctx->status = v.status();
    return -1;
  }
  (*ctx->out)[n] = std::move(v).value();
  return 0;
}

}  // namespace

Status read_attrs(hid_t obj, std::map<std::string, AttrValue>* out, const std::string& where,
                  const std::string& skip) {
  AttrReadCtx ctx{out, where, skip, Status::ok()};
  hsize_t idx = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, on_attr, &ctx) < 0) {
    if (!ctx.status.is_ok()) return ctx.status;
    return h5_error(where, "cannot list attributes", Code::kCorrupt);
  }
  return ctx.status;
}

Result<std::string> read_string_attr(hid_t obj, const std::string& name, const std::string& where) {
  if (H5Aexists(obj, name.c_str()) <= 0)
    return corrupt(where + ": attribute \"" + name + "\" missing");
  Handle a = attr_handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  CKPT_ASSIGN_OR_RETURN(AttrValue v, read_one(a.get(), name, where));
  if (auto p = std::get_if<std::string>(&v)) return *p;
  return corrupt(where + ": attribute \"" + name + "\" is not a string");
}

}  // namespace ckpt::h5
