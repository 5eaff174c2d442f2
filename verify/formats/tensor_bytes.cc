#include "verify/formats/tensor_bytes.h"

#include <cstring>

#include "verify/zip/zip_reader.h"

namespace ckpt::verify {
namespace {

// numpy typestrs with a byte order we can copy as is: little-endian or single-byte. The pickle
// names the dtype without its byte order ("u4": numpy.dtype's first argument; the order is in
// its BUILD state), and numpy pickles arrays in native order: little-endian on every machine
// PyTorch supports.
std::optional<DType> numpy_dtype(std::string code) {
  if (!code.empty() && code[0] != '<' && code[0] != '|' && code[0] != '=' && code[0] != '>')
    code = "=" + code;
  if (code.size() < 3 || (code[0] != '<' && code[0] != '|' && code[0] != '=')) return std::nullopt;
  static const std::map<std::string, DType> kTable = {
      {"b1", DType::kBool},      {"u1", DType::kUInt8},      {"i1", DType::kInt8},
      {"i2", DType::kInt16},     {"i4", DType::kInt32},      {"i8", DType::kInt64},
      {"u2", DType::kUInt16},    {"u4", DType::kUInt32},     {"u8", DType::kUInt64},
      {"f2", DType::kFloat16},   {"f4", DType::kFloat32},    {"f8", DType::kFloat64},
      {"c8", DType::kComplex64}, {"c16", DType::kComplex128}};
  auto it = kTable.find(code.substr(1));
  if (it == kTable.end()) return std::nullopt;
  if (code[0] == '|' && dtype_size(it->second) != 1) return std::nullopt;
  return it->second;
}

std::shared_ptr<const std::string> share(std::string bytes) {
  return std::make_shared<const std::string>(std::move(bytes));
}

Tensor borrowed(DType dtype, const std::vector<int64_t>& shape,
                const std::shared_ptr<const std::string>& owner, size_t offset, size_t n) {
  Tensor out = Tensor::borrow(dtype, shape, n == 0 ? nullptr : owner->data() + offset, n);
  out.keepalive = owner;
  return out;
}

// Copies a strided view element by element, odometer order (the last dimension fastest).
std::string gather(const char* base, const std::vector<int64_t>& shape,
                   const std::vector<int64_t>& stride, size_t es, int64_t numel) {
  std::string out(static_cast<size_t>(numel) * es, '\0');
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t src = 0;
  for (int64_t n = 0; n < numel; ++n) {
    std::memcpy(&out[static_cast<size_t>(n) * es], base + src * static_cast<int64_t>(es), es);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) {
        src += stride[d];
        break;
      }
      src -= stride[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace

std::optional<DType> dtype_of_record(const AnyDType& dtype) {
  if (dtype.known()) return dtype.known();
  const std::string spelling = dtype.name();
  if (spelling.rfind("numpy ", 0) == 0) return numpy_dtype(spelling.substr(6));
  return std::nullopt;
}

Result<Tensor> view_of_storage(const TensorRecord& t, DType dtype,
                               const std::shared_ptr<const std::string>& storage,
                               const std::string& where) {
  const size_t es = dtype_size(dtype);
  const int64_t numel = t.numel();
  if (numel < 0) return corrupt(where + ": tensor shape overflows");
  if (numel == 0) return Tensor::copy_of(dtype, t.shape, nullptr, 0);
  if (t.storage_offset < 0) return corrupt(where + ": negative storage offset");
  std::vector<int64_t> stride = t.stride;
  if (stride.empty()) {  // no strides recorded: C order
    stride.assign(t.shape.size(), 1);
    for (size_t d = t.shape.size(); d-- > 1;) stride[d - 1] = stride[d] * t.shape[d];
  }
  if (stride.size() != t.shape.size()) return corrupt(where + ": stride and shape disagree");
  // The furthest element the view touches, and whether it is the plain C-order layout.
  __int128 last = t.storage_offset, expect = 1;
  bool contiguous = true;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (stride[d] < 0) return corrupt(where + ": negative stride");
    last += static_cast<__int128>(stride[d]) * (t.shape[d] - 1);
    if (t.shape[d] != 1 && stride[d] != expect) contiguous = false;
    expect *= t.shape[d];
  }
  const __int128 storage_elems = static_cast<__int128>(storage->size() / es);
  if (last >= storage_elems) {
    return corrupt(where + ": tensor reaches element " +
                   std::to_string(static_cast<int64_t>(last)) + " of a storage of " +
                   std::to_string(static_cast<int64_t>(storage_elems)) + " elements");
  }
  const size_t begin = static_cast<size_t>(t.storage_offset) * es;
  if (contiguous) return borrowed(dtype, t.shape, storage, begin, static_cast<size_t>(numel) * es);
  std::string bytes = gather(storage->data() + begin, t.shape, stride, es, numel);
  return borrowed(dtype, t.shape, share(std::move(bytes)), 0, static_cast<size_t>(numel) * es);
}

Result<std::shared_ptr<const std::string>> TorchFileTensors::storage(const std::string& key) {
  auto it = storages_.find(key);
  if (it != storages_.end()) return it->second;
  std::string bytes;
  if (tf_->zip == nullptr) {  // legacy stream: (offset, bytes) located by the reader
    auto rec = tf_->legacy_records.find(key);
    if (rec == tf_->legacy_records.end())
      return corrupt(label_ + ": storage " + key + " has no bytes in the legacy stream");
    CKPT_ASSIGN_OR_RETURN(bytes, tf_->file->read_string(rec->second.first, rec->second.second));
  } else {
    const std::string name = tf_->prefix + "/data/" + key;
    const ZipEntry* e = tf_->zip->find(name);
    if (e == nullptr) return corrupt(label_ + ": record " + name + " is missing");
    if (e->method == 0) {
      CKPT_ASSIGN_OR_RETURN(uint64_t off, tf_->zip->data_offset(*e));
      CKPT_ASSIGN_OR_RETURN(bytes, tf_->file->read_string(off, e->size));
    } else {
      bytes.reserve(e->size);
      CKPT_RETURN_IF_ERROR(tf_->zip->stream_record(*e, [&](const char* p, size_t n) {
        bytes.append(p, n);
        return Status::ok();
      }));
    }
    const uint32_t crc = crc32_update(0, bytes.data(), bytes.size());
    if (crc != e->crc32) {
      char b[96];
      std::snprintf(b, sizeof b, ": CRC-32 mismatch (central directory %08x, bytes %08x)", e->crc32,
                    crc);
      return corrupt(label_ + ": record " + name + b);
    }
  }
  auto shared = share(std::move(bytes));
  storages_[key] = shared;
  return shared;
}

Result<Tensor> TorchFileTensors::fetch(const TensorRecord& t) {
  auto dtype = dtype_of_record(t.dtype);
  if (!dtype) return unsupported("dtype \"" + t.dtype.name() + "\" has no ckpt equivalent");
  if (t.element_size != 0 && t.element_size != dtype_size(*dtype))
    return corrupt(label_ + ": " + t.dtype.name() + " tensor with element size " +
                   std::to_string(t.element_size));
  if (t.inline_bytes != nullptr) {  // numpy: the bytes are in the pickle
    return view_of_storage(t, *dtype, share(t.inline_bytes->s), label_);
  }
  if (t.location == "meta") return unsupported("a meta tensor has no bytes");
  if (t.storage_key.empty()) return unsupported("a tensor without storage bytes");
  CKPT_ASSIGN_OR_RETURN(auto st, storage(t.storage_key));
  return view_of_storage(t, *dtype, st, label_ + ": storage " + t.storage_key);
}

Result<Tensor> read_safetensors_tensor(const RandomAccessFile& file, const SafetensorsHeader& h,
                                       const SafetensorsTensor& t) {
  const auto dtype = t.dtype.known();
  if (!dtype) return unsupported("dtype \"" + t.st_dtype + "\" has no ckpt equivalent");
  CKPT_ASSIGN_OR_RETURN(std::string bytes,
                        file.read_string(h.data_start + t.begin, t.end - t.begin));
  auto owner = share(std::move(bytes));
  return borrowed(*dtype, t.shape, owner, 0, owner->size());
}

namespace {

// Copies a chunk (C order, `sizes`) into the whole tensor (C order, `shape`) at `offsets`.
void place_chunk(const std::string& chunk, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes, size_t es,
                 std::string* whole) {
  const size_t nd = shape.size();
  if (nd == 0) {
    std::memcpy(&(*whole)[0], chunk.data(), es);
    return;
  }
  // Rows of the last dimension are contiguous in both; walk the others.
  const size_t row = static_cast<size_t>(sizes[nd - 1]) * es;
  std::vector<int64_t> idx(nd - 1, 0);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < nd; ++d) rows *= sizes[d];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t dst = 0;
    for (size_t d = 0; d + 1 < nd; ++d) dst = dst * shape[d] + offsets[d] + idx[d];
    dst = dst * shape[nd - 1] + offsets[nd - 1];
    std::memcpy(&(*whole)[static_cast<size_t>(dst) * es], chunk.data() + r * row, row);
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

bool plain_relative(const std::string& name) {
  return !name.empty() && name.find("..") == std::string::npos && name[0] != '/';
}

// One chunk's bytes in C order: raw, or the tensor of a torch.save blob. Its name and byte range
// were checked by check_chunks.
Result<std::string> chunk_bytes(Env* env, const std::string& dir, const DcpChunk& c,
                                const TensorRecord& t, DType dtype) {
  const std::string where = c.file + ": \"" + t.storage_key + "\"";
  if (c.transformed)
    return unsupported(where + ": chunk written through DCP storage extensions (not read here)");
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path_join(dir, c.file)));
  if (c.offset < 0 || c.length < 0 ||
      static_cast<uint64_t>(c.offset) + static_cast<uint64_t>(c.length) > f->size())
    return corrupt(where + ": chunk bytes lie outside the file");
  CKPT_ASSIGN_OR_RETURN(std::string bytes, f->read_string(c.offset, c.length));
  __int128 numel = 1;
  for (int64_t s : c.sizes) numel *= s;
  const uint64_t want = static_cast<uint64_t>(numel) * dtype_size(dtype);
  if (!c.raw && bytes.compare(0, 2, "PK") == 0) {
    CKPT_ASSIGN_OR_RETURN(TorchFile tf, open_torch_file(memory_file(where, std::move(bytes))));
    if (tf.doc->root == nullptr || tf.doc->root->kind != Kind::kTensor)
      return corrupt(where + ": chunk blob does not hold a tensor");
    TorchFileTensors tensors(&tf, where);
    CKPT_ASSIGN_OR_RETURN(Tensor x, tensors.fetch(*tf.doc->root->tensor));
    if (x.dtype != dtype || x.nbytes != want)
      return corrupt(where + ": chunk blob holds " + dtype_name(x.dtype) + " of " +
                     std::to_string(x.nbytes) + " bytes, expected " + dtype_name(dtype) + " of " +
                     std::to_string(want));
    return std::string(static_cast<const char*>(x.data), x.nbytes);
  }
  if (bytes.size() != want)
    return corrupt(where + ": chunk of " + std::to_string(bytes.size()) +
                   " bytes is neither a torch.save blob (no PK header) nor the " +
                   std::to_string(want) + " raw bytes its shape needs");
  return bytes;
}

// The chunks' geometry (each inside the shape, together tiling it) and byte ranges (inside
// existing files), before anything is allocated: the files the tensor's chunks lie in must hold
// at least its bytes, so a hostile .metadata cannot make us allocate more than the folder holds.
Status check_chunks(Env* env, const std::string& dir, const std::vector<DcpChunk>& chunks,
                    const TensorRecord& t, __int128 numel, size_t es) {
  const std::string key = "\"" + t.storage_key + "\"";
  __int128 covered = 0;
  std::map<std::string, uint64_t> sizes;  // distinct files → their sizes
  for (const DcpChunk& c : chunks) {
    if (c.offsets.size() != t.shape.size() || c.sizes.size() != t.shape.size())
      return corrupt(".metadata: a chunk of " + key + " has the wrong rank");
    __int128 n = 1;
    for (size_t d = 0; d < c.sizes.size(); ++d) {
      if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] > t.shape[d] - c.sizes[d])
        return corrupt(".metadata: a chunk of " + key + " lies outside its shape");
      n *= c.sizes[d];
    }
    covered += n;
    if (n == 0) continue;
    const std::string where = c.file + ": " + key;
    if (!plain_relative(c.file))
      return corrupt(where + ": chunk file name is not a plain relative name");
    auto it = sizes.find(c.file);
    if (it == sizes.end()) {
      CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path_join(dir, c.file)));
      it = sizes.emplace(c.file, f->size()).first;
    }
    if (c.offset < 0 || c.length < 0 ||
        static_cast<uint64_t>(c.offset) + static_cast<uint64_t>(c.length) > it->second)
      return corrupt(where + ": chunk bytes [" + std::to_string(c.offset) + ", +" +
                     std::to_string(c.length) + ") lie outside the file (" +
                     std::to_string(it->second) + " bytes)");
  }
  if (covered != numel)
    return corrupt(".metadata: the chunks of " + key + " do not tile its shape");
  __int128 on_disk = 0;
  for (const auto& [f, n] : sizes) on_disk += n;
  if (numel * static_cast<__int128>(es) > on_disk)
    return corrupt(".metadata: " + key + " needs " +
                   std::to_string(static_cast<uint64_t>(numel * static_cast<__int128>(es))) +
                   " bytes, more than its chunk files hold");
  return Status::ok();
}

}  // namespace

Result<Tensor> read_dcp_tensor(Env* env, const std::string& dir,
                               const std::map<std::string, std::vector<DcpChunk>>& chunks,
                               const TensorRecord& t) {
  const auto dtype = t.dtype.known();
  if (!dtype) return unsupported("dtype \"" + t.dtype.name() + "\" has no ckpt equivalent");
  const int64_t numel = t.numel();
  if (numel < 0) return corrupt(".metadata: \"" + t.storage_key + "\": shape overflows");
  const size_t es = dtype_size(*dtype);
  auto it = chunks.find(t.storage_key);
  if (numel == 0) return Tensor::copy_of(*dtype, t.shape, nullptr, 0);
  if (it == chunks.end())
    return corrupt(".metadata: \"" + t.storage_key + "\" has no stored chunks");
  CKPT_RETURN_IF_ERROR(check_chunks(env, dir, it->second, t, numel, es));
  std::string whole(static_cast<size_t>(numel) * es, '\0');
  for (const DcpChunk& c : it->second) {
    int64_t n = 1;
    for (int64_t s : c.sizes) n *= s;
    if (n == 0) continue;
    CKPT_ASSIGN_OR_RETURN(std::string bytes, chunk_bytes(env, dir, c, t, *dtype));
    place_chunk(bytes, t.shape, c.offsets, c.sizes, es, &whole);
  }
  auto owner = share(std::move(whole));
  return borrowed(*dtype, t.shape, owner, 0, owner->size());
}

}  // namespace ckpt::verify
