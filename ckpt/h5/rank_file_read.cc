#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ckpt/base/hash.h"
#include "ckpt/h5/rank_file.h"
#include "ckpt/h5/types.h"

namespace ckpt::h5 {
namespace {

constexpr int kMaxDepth = 32;
constexpr size_t kMaxObjects = 1 << 20;

struct Reader {
  std::string file;
  std::vector<DatasetInfo>* datasets;
  const TrustedDatasets* trusted;
  size_t objects = 0;
  Status status;

  Status read_group(hid_t g, Node* node, const std::string& path, int depth) {
    if (depth > kMaxDepth)
      return corrupt(file + ": groups nested deeper than " + std::to_string(kMaxDepth));
    CKPT_RETURN_IF_ERROR(read_attrs(g, &node->attrs, file + ":" + (path.empty() ? "/" : path), ""));
    std::vector<std::string> names;
    hsize_t idx = 0;
    auto collect = [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
      if (info->type == H5L_TYPE_HARD)
        static_cast<std::vector<std::string>*>(data)->push_back(name);
      return 0;
    };
    if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names) < 0) {
      return h5_error(file, "cannot list group " + (path.empty() ? "/" : path), Code::kCorrupt);
    }
    for (const auto& name : names) {
      if (++objects > kMaxObjects) return corrupt(file + ": more than a million objects");
      const std::string child_path = path + "/" + name;
      if (trusted != nullptr) {
        auto known = trusted->find(child_path);
        if (known != trusted->end()) {
          add_dataset(node, name, known->second);
          continue;
        }
      }
      Handle obj(H5Oopen(g, name.c_str(), H5P_DEFAULT), H5Oclose);
      if (!obj.valid()) return h5_error(file, "cannot open " + child_path, Code::kCorrupt);
      const H5I_type_t type = H5Iget_type(obj.get());
      if (type == H5I_GROUP) {
        CKPT_RETURN_IF_ERROR(read_group(obj.get(), &node->children[name], child_path, depth + 1));
      } else if (type == H5I_DATASET) {
        CKPT_RETURN_IF_ERROR(read_dataset(obj.get(), node, name, child_path));
      } else {
        return corrupt(file + ": " + child_path + " is neither a group nor a dataset");
      }
    }
    return Status::ok();
  }

  Status read_dataset(hid_t ds, Node* node, const std::string& name, const std::string& path) {
    const std::string where = file + ":" + path;
    DatasetInfo info;
    info.path = path;
    CKPT_ASSIGN_OR_RETURN(std::string dt, read_string_attr(ds, "dtype", where));
    auto dtype = dtype_from_name(dt);
    if (!dtype) return corrupt(where + ": unknown dtype \"" + dt + "\"");
    info.dtype = *dtype;
    if (H5Aexists(ds, "global_shape") > 0) {
      CKPT_ASSIGN_OR_RETURN(info.box, read_box_attrs(ds, where));
    }
    if (H5Aexists(ds, "alias_of") > 0) {
      CKPT_ASSIGN_OR_RETURN(info.alias_of, read_string_attr(ds, "alias_of", where));
    } else if (info.box && info.box->owner >= 0) {
      // a replica another rank writes: no bytes here
    } else {
      CKPT_ASSIGN_OR_RETURN(std::string hx, read_string_attr(ds, "xxh3", where));
      if (!parse_hex64(hx, &info.xxh3))
        return corrupt(where + ": xxh3 attribute \"" + hx + "\" is not 16 hex digits");
      Handle space = space_handle(H5Dget_space(ds));
      const int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 0 || rank > 32) return corrupt(where + ": bad dataspace");
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
      unsigned __int128 n = dtype_size(info.dtype);
      for (hsize_t d : dims) {
        info.shape.push_back(static_cast<int64_t>(d));
        n *= d;
        if (n > (static_cast<unsigned __int128>(1) << 62)) return corrupt(where + ": absurd shape");
      }
      info.nbytes = static_cast<uint64_t>(n);
      const haddr_t off = H5Dget_offset(ds);
      info.offset = off == HADDR_UNDEF ? 0 : static_cast<uint64_t>(off);
    }
    if (info.box) {
      const std::string problem = box_problem(*info.box, info.shape);
      if (!problem.empty()) return corrupt(where + ": " + problem);
    }
    add_dataset(node, name, std::move(info));
    return Status::ok();
  }

  // The box attributes write_box_attrs (rank_file_write.cc) writes, type-checked.
  static Result<BoxOf> read_box_attrs(hid_t ds, const std::string& where) {
    std::map<std::string, AttrValue> a;
    CKPT_RETURN_IF_ERROR(read_attrs(ds, &a, where, "dtype,xxh3,alias_of"));
    BoxOf box;
    const auto ints = [&](const char* key, std::vector<int64_t>* out) -> Status {
      auto it = a.find(key);
      const auto* v = it == a.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
      if (v == nullptr) return corrupt(where + ": attribute \"" + key + "\" is not an int64 array");
      *out = *v;
      return Status::ok();
    };
    CKPT_RETURN_IF_ERROR(ints("global_shape", &box.global_shape));
    CKPT_RETURN_IF_ERROR(ints("box_offsets", &box.offsets));
    auto p = a.find("placement");
    const auto* placement = p == a.end() ? nullptr : std::get_if<std::string>(&p->second);
    if (placement == nullptr) return corrupt(where + ": attribute \"placement\" is not a string");
    box.placement = *placement;
    if (auto o = a.find("box_owner"); o != a.end()) {
      const auto* owner = std::get_if<int64_t>(&o->second);
      if (owner == nullptr || *owner < 0)
        return corrupt(where + ": attribute \"box_owner\" is not a rank");
      box.owner = *owner;
    }
    return box;
  }

  void add_dataset(Node* node, const std::string& name, DatasetInfo info) {
    Tensor t;
    t.dtype = info.dtype;
    t.shape = info.shape;
    t.nbytes = info.nbytes;
    t.xxh3 = info.xxh3;
    t.alias_of = info.alias_of;
    t.box = info.box;
    node->tensors[name] = std::move(t);
    if (datasets != nullptr) datasets->push_back(std::move(info));
  }
};

}  // namespace

Result<Node> read_structure(const std::string& path, std::vector<DatasetInfo>* datasets,
                            const TrustedDatasets* trusted) {
  std::lock_guard<std::mutex> lock(h5_lock());
  quiet_errors();
  // A file that cannot be read is an I/O error, not a file without a signature.
  if (::access(path.c_str(), R_OK) != 0) {
    const int e = errno;
    const std::string msg = path + ": cannot open: " + std::strerror(e);
    return e == ENOENT ? not_found(msg) : io_error(msg);
  }
  // HDF5 opens without O_NONBLOCK: a FIFO named like a rank file would block it forever. Only
  // regular files are read, as Env::open_random() reads them.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return io_error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return corrupt(path + ": not a regular file (a FIFO, socket or device is never read)");
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return corrupt(path + ": not an HDF5 file (no HDF5 signature)");
  }
  Handle f = file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) return h5_error(path, "cannot open HDF5 file", Code::kCorrupt);
  Reader r{path, datasets, trusted, 0, Status::ok()};
  Node root;
  CKPT_RETURN_IF_ERROR(r.read_group(f.get(), &root, "", 0));
  return root;
}

}  // namespace ckpt::h5
