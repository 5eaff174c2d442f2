// The in-memory shape of one rank's checkpoint: a tree of named groups holding typed attributes
// and tensors. It is what the libtorch adapter produces on save and consumes on restore, and what
// the HDF5 store writes and reads; it knows nothing of either. Pure: no torch, no HDF5.
//
// Ownership: on save a Tensor usually *borrows* its bytes (`data` points into live memory that the
// caller keeps alive until the save returns; `keepalive` may pin it). On restore the reader either
// writes straight into memory the caller placed (see ckpt/store) or allocates and owns the bytes.
// Not thread-safe; a tree is built and consumed by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ckpt/format/dtype.h"

namespace ckpt {

// A non-tensor value, stored as a typed HDF5 attribute (readable by h5py and h5dump).
using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

// "an int64", "a double array", ...: for error messages about ill-typed attributes.
const char* attr_type_name(const AttrValue& v);

// A piece of a global tensor (format version 2, docs/format.md §8): the dataset holds the
// elements offsets[d] .. offsets[d] + shape[d] of a tensor of `global_shape`, row-major. With
// owner >= 0 the piece is a replica another rank writes: this rank's file records where it is
// and holds none of its bytes (the Tensor then has no bytes and an empty shape).
struct BoxOf {
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;
  std::string placement = "sharded";  // "sharded", "replicated" or "flat" (box_index.h Placement)
  int64_t owner = -1;
};

bool operator==(const BoxOf& a, const BoxOf& b);
inline bool operator!=(const BoxOf& a, const BoxOf& b) { return !(a == b); }

// Why `box` cannot describe a piece of `shape` (its dimensions, offsets or placement are off),
// or "" when it can. `shape` is ignored for a box written elsewhere (owner >= 0).
std::string box_problem(const BoxOf& box, const std::vector<int64_t>& shape);

struct Tensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty = 0-d scalar
  const void* data = nullptr;  // contiguous, row-major, nbytes long (may be null when nbytes == 0)
  size_t nbytes = 0;
  std::shared_ptr<const void> keepalive;  // owns `data` when set
  uint64_t xxh3 = 0;                      // filled by the store on write and on read
  // When this tensor is the same storage as another one in the same tree (tied embeddings),
  // the store writes it once and records `alias_of` = the path of the one written.
  std::string alias_of;
  // Set when this tensor is a box of a global tensor (a DTensor's local shard).
  std::optional<BoxOf> box;
  // A box's chunk digests (ManifestEntry::chunk_xxh3), filled by the store on write for boxes
  // larger than one chunk.
  std::vector<uint64_t> chunk_xxh3;
  // A box whose bytes another rank writes (box->owner >= 0).
  bool box_elsewhere() const { return box.has_value() && box->owner >= 0; }

  int64_t numel() const;
  // Owns a copy of `bytes`.
  static Tensor copy_of(DType dtype, std::vector<int64_t> shape, const void* bytes, size_t nbytes);
  // Borrows `bytes`; the caller keeps them alive.
  static Tensor borrow(DType dtype, std::vector<int64_t> shape, const void* bytes, size_t nbytes);
};

struct Node {
  std::map<std::string, AttrValue> attrs;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, Node> children;

  // Child by name, created when absent.
  Node& child(const std::string& name) { return children[name]; }
  const Node* find_child(const std::string& name) const;
  const Tensor* find_tensor(const std::string& name) const;
  const AttrValue* find_attr(const std::string& name) const;
  bool empty() const { return attrs.empty() && tensors.empty() && children.empty(); }

  // Typed attribute access; `fallback` when absent or of another type.
  int64_t get_int(const std::string& name, int64_t fallback = 0) const;
  double get_double(const std::string& name, double fallback = 0) const;  // ints convert
  std::string get_string(const std::string& name, const std::string& fallback = "") const;
  bool get_bool(const std::string& name, bool fallback = false) const;
  std::vector<int64_t> get_ints(const std::string& name) const;
  std::vector<double> get_doubles(const std::string& name) const;
  std::vector<std::string> get_strings(const std::string& name) const;
};

}  // namespace ckpt
