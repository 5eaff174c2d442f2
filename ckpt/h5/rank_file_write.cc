// Writes a rank file's structure with HDF5 (docs/format.md §3).
//
// Disk full inside H5Fclose is the one failure HDF5 does not survive: the close fails half way,
// the file stays registered half destroyed, and HDF5's own atexit cleanup (or any second close)
// dereferences it — SIGSEGV at exit. So: (1) right after creating the file, the space it will
// need (tensor extents plus a generous metadata bound) is reserved with fallocate(KEEP_SIZE), so
// a full disk is a clean error before HDF5 has anything to flush, and the close cannot run out of
// space; the unused reserve is given back after the close. (2) HDF5's atexit cleanup is turned
// off (quiet_errors()), so a close that fails anyway leaks one object instead of crashing.
//
// Metadata without tensors (issue 27 item 11). The 4 KiB alignment that tensor extents need is a
// file-access property that HDF5 applies to every allocation, metadata included: each group's
// object header then takes a 4 KiB block of its own, and every gap before an aligned block becomes
// a free-space section that HDF5 scans on each later allocation, so a tree of many small groups
// (a Hugging Face log_history of 60,000 entries, each a dict) costs time quadratic in the groups
// and ~5 KB of file each. Alignment is not stored in the file, so the writer works in two passes:
// (1) the file is created aligned and gets every group that holds a tensor somewhere below it,
// with every dataset; (2) when the subtrees without any tensor hold more than a few groups, the
// file is closed, reopened without alignment and gets those subtrees, their headers packed one
// after another (linear, ~0.5 KB a group). The layout that readers see is the same either way.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "ckpt/base/hash.h"
#include "ckpt/h5/encode.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/h5/types.h"

namespace ckpt::h5 {
namespace {

// Below this many groups in tensor-free subtrees, the second pass (a close and a reopen of the
// file) costs more than the aligned headers do.
constexpr size_t kDeferredGroupsMin = 64;

// A subtree without a tensor, written in the second pass: the group `name` of `parent`.
struct Deferred {
  std::string parent;  // "" for the root, else "/extra"
  std::string name;
  const Node* node = nullptr;
};

// Whether `node` holds a tensor anywhere below it; `groups` gets the number of groups below it.
// Its tensor-free children go to `deferred` whole (a child's own entries are taken back when it
// turns out tensor-free itself); `deferred_groups` counts the groups in them.
bool collect_deferred(const Node& node, const std::string& path, size_t* groups,
                      std::vector<Deferred>* deferred, size_t* deferred_groups) {
  bool any = !node.tensors.empty();
  *groups = 0;
  for (const auto& [name, child] : node.children) {
    const size_t mark = deferred->size(), mark_groups = *deferred_groups;
    size_t below = 0;
    if (collect_deferred(child, path + "/" + name, &below, deferred, deferred_groups)) {
      any = true;
    } else {
      deferred->resize(mark);
      *deferred_groups = mark_groups + 1 + below;
      deferred->push_back({path, name, &child});
    }
    *groups += 1 + below;
  }
  return any;
}

// A group's links and attributes stay in its own object header (HDF5's "compact" storage) up to
// kCompactMax of each, instead of HDF5's default of 8, past which it builds a fractal heap and a
// B-tree for them (more metadata blocks, each 4 KiB-aligned in the first pass, and more work
// per entry: a model's flat dict of 150 tensors, an optimizer's param group of 12 attributes).
// Past kCompactMax the default, as finding a name among compact messages is a linear scan.
// Readers see the same links and attributes either way.
constexpr size_t kCompactMax = 256;

Handle group_creation(const Node& node) {
  Handle gcpl = plist_handle(H5Pcreate(H5P_GROUP_CREATE));
  const size_t links = node.tensors.size() + node.children.size();
  if (links > 8 && links <= kCompactMax)
    H5Pset_link_phase_change(gcpl.get(), static_cast<unsigned>(links), 6);
  if (node.attrs.size() > 8 && node.attrs.size() <= kCompactMax)
    H5Pset_attr_phase_change(gcpl.get(), static_cast<unsigned>(node.attrs.size()), 6);
  return gcpl;
}

struct Writer {
  std::string file;
  std::vector<DatasetExtent> extents;
  std::set<const Node*> skip;  // the groups the second pass writes

  Status write_node(hid_t loc, const Node& node, const std::string& path) {
    for (const auto& [name, value] : node.attrs) {
      CKPT_RETURN_IF_ERROR(write_attr(loc, name, value, file + ":" + (path.empty() ? "/" : path)));
    }
    for (const auto& [name, tensor] : node.tensors) {
      CKPT_RETURN_IF_ERROR(write_dataset(loc, name, tensor, path + "/" + name));
    }
    for (const auto& [name, child] : node.children) {
      if (skip.count(&child) > 0) continue;
      CKPT_RETURN_IF_ERROR(write_group(loc, name, child, path + "/" + name));
    }
    return Status::ok();
  }

  Status write_group(hid_t parent, const std::string& name, const Node& node,
                     const std::string& path) {
    Handle gcpl = group_creation(node);
    Handle g = group_handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
    if (!g.valid()) return h5_error(file, "cannot create group " + path);
    return write_node(g.get(), node, path);
  }

  // A box's dataset attributes (docs/format.md §8): global_shape, box_offsets, placement and,
  // for one written elsewhere, box_owner.
  static Status write_box_attrs(hid_t ds, const BoxOf& box, const std::string& where) {
    CKPT_RETURN_IF_ERROR(write_attr(ds, "global_shape", box.global_shape, where));
    CKPT_RETURN_IF_ERROR(write_attr(ds, "box_offsets", box.offsets, where));
    CKPT_RETURN_IF_ERROR(write_attr(ds, "placement", box.placement, where));
    if (box.owner >= 0) return write_attr(ds, "box_owner", box.owner, where);
    return Status::ok();
  }

  Status write_dataset(hid_t loc, const std::string& name, const Tensor& t,
                       const std::string& path) {
    const std::string where = file + ":" + path;
    const bool alias = !t.alias_of.empty();
    const bool elsewhere = t.box_elsewhere();
    Handle space;
    if (alias || elsewhere) {
      hsize_t zero[1] = {0};
      space = space_handle(H5Screate_simple(1, zero, nullptr));
    } else if (t.shape.empty()) {
      space = space_handle(H5Screate(H5S_SCALAR));
    } else {
      std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
      space = space_handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    }
    if (!space.valid()) return h5_error(where, "cannot create dataspace");
    Handle type = make_type(t.dtype);
    Handle dcpl = plist_handle(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
    Handle ds = dataset_handle(H5Dcreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                          dcpl.get(), H5P_DEFAULT));
    if (!ds.valid()) return h5_error(where, "cannot create dataset");
    CKPT_RETURN_IF_ERROR(write_attr(ds.get(), "dtype", std::string(dtype_name(t.dtype)), where));
    if (alias) {
      return write_attr(ds.get(), "alias_of", t.alias_of, where);
    }
    if (t.box) CKPT_RETURN_IF_ERROR(write_box_attrs(ds.get(), *t.box, where));
    if (elsewhere) return Status::ok();
    CKPT_RETURN_IF_ERROR(write_attr(ds.get(), "xxh3", hex64(t.xxh3), where));
    DatasetExtent e{path, &t, 0};
    if (t.nbytes > 0) {
      const haddr_t off = H5Dget_offset(ds.get());
      if (off == HADDR_UNDEF) return h5_error(where, "dataset has no contiguous extent");
      e.offset = static_cast<uint64_t>(off);
      if (H5Dget_storage_size(ds.get()) != t.nbytes) {
        return internal_error(where + ": HDF5 allocated " +
                              std::to_string(H5Dget_storage_size(ds.get())) + " bytes for a " +
                              std::to_string(t.nbytes) + "-byte tensor");
      }
    }
    extents.push_back(std::move(e));
    return Status::ok();
  }
};

// An upper bound of the file's size: every extent 4 KiB-aligned, a block per object and twice
// the attribute bytes for the metadata, and a MiB for what the close adds.
uint64_t size_bound(const Node& node) {
  uint64_t n = 4096;
  for (const auto& [name, v] : node.attrs) {
    n += 256 + 2 * name.size();
    if (auto p = std::get_if<std::string>(&v)) n += 2 * p->size();
    if (auto p = std::get_if<std::vector<std::string>>(&v)) {
      for (const auto& x : *p) n += 2 * x.size() + 16;
    }
    if (auto p = std::get_if<std::vector<int64_t>>(&v)) n += 16 * p->size();
    if (auto p = std::get_if<std::vector<double>>(&v)) n += 16 * p->size();
  }
  for (const auto& [name, t] : node.tensors) {
    n += 4096 + 2 * (name.size() + t.alias_of.size()) + 8 * t.shape.size();
    if (t.box) n += 256 + 16 * t.box->global_shape.size();
    if (t.alias_of.empty() && !t.box_elsewhere()) n += (t.nbytes + 4095) / 4096 * 4096;
  }
  for (const auto& [name, child] : node.children) n += 4096 + size_bound(child);
  return n;
}

// Holds the reserve of `path` (see the note at the top). Filesystems without fallocate (some
// network filesystems) just get no reserve.
class SpaceReserve {
 public:
  ~SpaceReserve() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status reserve(const std::string& path, uint64_t bytes) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::ok();
    if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0) {
      bytes_ = bytes;
      return Status::ok();
    }
    const int e = errno;
    if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
      return io_error(path + ": no space for a rank file of up to " + std::to_string(bytes) +
                      " bytes: " + std::strerror(e));
    }
    return Status::ok();  // EOPNOTSUPP and friends
  }
  // Gives back what the file did not use: the blocks past its end. ext4 ignores a hole punched
  // past the end of a file (the reserve stayed allocated, up to 4 KiB per group of the tree);
  // truncating to the file's own size frees them there, the punch where truncation keeps them.
  void release_unused() {
    struct stat st;
    if (fd_ < 0 || bytes_ == 0 || ::fstat(fd_, &st) != 0) return;
    const uint64_t end = static_cast<uint64_t>(st.st_size);
    if (end < bytes_) {
      (void)::ftruncate(fd_, static_cast<off_t>(end));
      (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(end),
                        static_cast<off_t>(bytes_ - end));
    }
  }

 private:
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

// The file access properties of both passes: `aligned` for the first (see the note at the top).
Handle file_access(bool aligned) {
  Handle fapl = plist_handle(H5Pcreate(H5P_FILE_ACCESS));
  // Every allocation of 1 byte or more starts on a 4 KiB boundary: tensor data can be read with
  // aligned (O_DIRECT-friendly) I/O, and the manifest rule "offset % 4096 == 0" holds.
  if (aligned) H5Pset_alignment(fapl.get(), 1, 4096);
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
  // Metadata is aggregated into one block instead of being spread between tensors.
  H5Pset_meta_block_size(fapl.get(), 1 << 16);
  return fapl;
}

// The second pass: `deferred` written into the closed file `path`, reopened without alignment.
Status write_deferred(Writer* w, const std::string& path, const std::vector<Deferred>& deferred) {
  Handle fapl = file_access(false);
  Handle f = file_handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get()));
  if (!f.valid()) return h5_error(path, "cannot reopen HDF5 file");
  std::string open_path;  // the parent group held open: consecutive entries share it
  Handle parent;
  for (const Deferred& d : deferred) {
    hid_t loc = f.get();
    if (!d.parent.empty()) {
      if (d.parent != open_path) {
        parent = group_handle(H5Gopen2(f.get(), d.parent.c_str(), H5P_DEFAULT));
        if (!parent.valid()) return h5_error(path, "cannot open group " + d.parent);
        open_path = d.parent;
      }
      loc = parent.get();
    }
    CKPT_RETURN_IF_ERROR(w->write_group(loc, d.name, *d.node, d.parent + "/" + d.name));
  }
  parent.reset();
  if (f.close() < 0) return h5_error(path, "cannot close HDF5 file");
  return Status::ok();
}

// The encoded structure written to a new file at `path`: its superblock and its tail; the
// extents between stay holes until ckpt/store fills them.
// With `reuse`, a file already at `path` with exactly the encoded size is kept (*reused): its
// blocks are overwritten in place.
Status write_encoded(const std::string& path, const EncodedStructure& e, bool reuse, bool* reused) {
  *reused = false;
  int fd = -1;
  if (reuse) {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) == e.file_bytes) {
      *reused = true;
    } else if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0) fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(path + ": cannot create: " + std::strerror(errno));
  auto put = [&](const std::string& bytes, uint64_t at) -> Status {
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n =
          ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return io_error(path + ": cannot write its structure: " + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    return Status::ok();
  };
  Status s = put(e.superblock, 0);
  if (s.is_ok()) s = put(e.tail, e.tail_offset);
  if (::close(fd) != 0 && s.is_ok()) s = io_error(path + ": close: " + std::strerror(errno));
  return s;
}

}  // namespace

Result<std::vector<DatasetExtent>> write_structure(const std::string& path, const Node& root,
                                                   StructureImage* image, bool reuse) {
  if (image != nullptr) *image = StructureImage{};
  if (auto encoded = encode_structure(root)) {
    bool reused = false;
    CKPT_RETURN_IF_ERROR(write_encoded(path, *encoded, reuse && image != nullptr, &reused));
    if (image != nullptr) {
      image->reused = reused;
      image->file_bytes = encoded->file_bytes;
      image->runs.emplace_back(0, std::move(encoded->superblock));
      image->runs.emplace_back(encoded->tail_offset, std::move(encoded->tail));
    }
    std::stable_sort(
        encoded->extents.begin(), encoded->extents.end(),
        [](const DatasetExtent& a, const DatasetExtent& b) { return a.offset < b.offset; });
    return std::move(encoded->extents);
  }
  return write_structure_hdf5(path, root);
}

Result<std::vector<DatasetExtent>> write_structure_hdf5(const std::string& path, const Node& root) {
  std::lock_guard<std::mutex> lock(h5_lock());
  quiet_errors();
  std::vector<Deferred> deferred;
  size_t groups = 0, deferred_groups = 0;
  collect_deferred(root, "", &groups, &deferred, &deferred_groups);
  if (deferred_groups < kDeferredGroupsMin) deferred.clear();
  Writer w{path, {}, {}};
  for (const Deferred& d : deferred) w.skip.insert(d.node);
  Handle fapl = file_access(true);
  Handle f = file_handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!f.valid()) return h5_error(path, "cannot create HDF5 file");
  SpaceReserve reserve;
  CKPT_RETURN_IF_ERROR(reserve.reserve(path, size_bound(root)));
  CKPT_RETURN_IF_ERROR(w.write_node(f.get(), root, ""));
  if (f.close() < 0) return h5_error(path, "cannot close HDF5 file");
  if (!deferred.empty()) {
    w.skip.clear();
    CKPT_RETURN_IF_ERROR(write_deferred(&w, path, deferred));
  }
  reserve.release_unused();
  std::sort(w.extents.begin(), w.extents.end(),
            [](const DatasetExtent& a, const DatasetExtent& b) { return a.offset < b.offset; });
  return std::move(w.extents);
}

}  // namespace ckpt::h5
