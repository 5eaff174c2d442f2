// Tensor bytes out of foreign checkpoints, without executing anything: the storage records of a
// torch.save zip (CRC-32 checked against the central directory) or legacy stream, the data
// buffer of a safetensors file, the chunks of a DCP tensor. Every result is the tensor's bytes in
// C order, `numel × element size` long; strided views are gathered, a contiguous view of a
// storage borrows the storage's buffer (the Tensor's keepalive owns it). Every offset is checked
// against the bytes that exist; a tensor whose bytes do not add up is Corrupt, naming the file.
// A fetcher is used by one thread. Used by `ckpt convert` and by the DCP reader (diff --deep).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "ckpt/format/tree.h"
#include "verify/formats/dcp.h"
#include "verify/formats/safetensors.h"
#include "verify/formats/torch_file.h"
#include "verify/pickle/value.h"

namespace ckpt::verify {

// Our dtype for a record's spelling: ckpt names ("float32", "bfloat16") and little-endian or
// byte-sized numpy ones ("<f4", "|u1"); nullopt for anything else (big-endian, object, ...).
std::optional<DType> dtype_of_record(const AnyDType& dtype);

// The bytes of one tensor record; Unsupported when the record cannot be turned into bytes by
// design (a meta tensor, an unknown dtype), Corrupt when its bytes are damaged or missing.
using TensorFetch = std::function<Result<Tensor>(const TensorRecord&)>;

// The C-order bytes of `t` (shape, stride, storage_offset in elements) from its whole storage
// `storage`; `where` names the file in errors. Borrows `storage` when the view is contiguous.
Result<Tensor> view_of_storage(const TensorRecord& t, DType dtype,
                               const std::shared_ptr<const std::string>& storage,
                               const std::string& where);

// Fetches tensors of one torch.save file; storages are read once and shared between views.
class TorchFileTensors {
 public:
  TorchFileTensors(const TorchFile* file, std::string label)
      : tf_(file), label_(std::move(label)) {}
  Result<Tensor> fetch(const TensorRecord& t);

 private:
  Result<std::shared_ptr<const std::string>> storage(const std::string& key);
  const TorchFile* tf_;
  std::string label_;
  std::map<std::string, std::shared_ptr<const std::string>> storages_;
};

// A tensor of a safetensors file: `begin`/`end` relative to the data buffer.
Result<Tensor> read_safetensors_tensor(const RandomAccessFile& file, const SafetensorsHeader& h,
                                       const SafetensorsTensor& t);

// A whole DCP tensor (`t.storage_key` is its flat key) assembled from its chunks, each raw bytes
// or a torch.save blob, read from the folder `dir`. The chunks' geometry and byte ranges are
// checked before anything is allocated: they must tile the shape, lie inside existing files whose
// sizes add up to at least the tensor's bytes, and each hold exactly its part. Files are read
// through `env`.
Result<Tensor> read_dcp_tensor(Env* env, const std::string& dir,
                               const std::map<std::string, std::vector<DcpChunk>>& chunks,
                               const TensorRecord& t);
inline Result<Tensor> read_dcp_tensor(Env* env, const std::string& dir, const DcpTree& tree,
                                      const TensorRecord& t) {
  return read_dcp_tensor(env, dir, tree.chunks, t);
}

}  // namespace ckpt::verify
