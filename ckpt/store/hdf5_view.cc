// hdf5_view (hdf5_view.h).
#include "ckpt/store/hdf5_view.h"

#include <atomic>
#include <string>
#include <vector>

#include "ckpt/format/regions.h"

namespace ckpt::store {

Hdf5View::~Hdf5View() {
  if (owned_) (void)Env::posix()->remove_file(local_);
}

Result<std::string> scratch_path(ObjectStore* store, const std::string& name) {
  static std::atomic<uint64_t> next{0};
  CKPT_RETURN_IF_ERROR(Env::posix()->make_dirs(store->scratch_dir()));
  return path_join(store->scratch_dir(), std::to_string(next.fetch_add(1)) + "-" + name);
}

Result<std::unique_ptr<Hdf5View>> hdf5_view(Env* env, const std::string& path,
                                            const Manifest* manifest,
                                            const RandomAccessFile* opened) {
  ObjectStore* store = env->object_store(path);
  if (store == nullptr) return std::make_unique<Hdf5View>(path, false);
  std::unique_ptr<RandomAccessFile> own;
  if (opened == nullptr) {
    CKPT_ASSIGN_OR_RETURN(own, env->open_random(path));
    opened = own.get();
  }
  const uint64_t size = opened->size();
  std::vector<FileRegion> copy;
  if (manifest != nullptr && manifest->file_bytes == size) {
    for (const FileRegion& r : file_regions(*manifest, size)) {
      if (!r.tensor && r.nbytes > 0) copy.push_back(r);
    }
  } else {
    copy.push_back({0, size, 0, false});
  }
  CKPT_ASSIGN_OR_RETURN(std::string local, scratch_path(store, path_basename(path)));
  auto view = std::make_unique<Hdf5View>(local, true);
  CKPT_ASSIGN_OR_RETURN(auto out, Env::posix()->new_writable(local));
  // Each request costs a round trip: structural regions with at most kBridge tensor bytes
  // between them (a file of many small tensors has one region per tensor) are fetched in one
  // ranged read, the tensor bytes between dropped; only the regions are written locally.
  constexpr uint64_t kBridge = 64u << 10, kMaxRead = 16u << 20;
  std::string buf;
  for (size_t i = 0; i < copy.size();) {
    size_t j = i + 1;
    uint64_t end = copy[i].offset + copy[i].nbytes;
    while (j < copy.size() && copy[j].nbytes <= kMaxRead && copy[j].offset - end <= kBridge &&
           copy[j].offset + copy[j].nbytes - copy[i].offset <= kMaxRead) {
      end = copy[j].offset + copy[j].nbytes;
      ++j;
    }
    if (j == i + 1) {  // alone: in pieces of at most kMaxRead
      const FileRegion& r = copy[i];
      for (uint64_t done = 0; done < r.nbytes;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(r.nbytes - done, kMaxRead));
        buf.resize(n);
        CKPT_RETURN_IF_ERROR(opened->read_at(r.offset + done, buf.data(), n));
        CKPT_RETURN_IF_ERROR(out->write_at(r.offset + done, buf.data(), n));
        done += n;
      }
    } else {
      const uint64_t from = copy[i].offset;
      buf.resize(static_cast<size_t>(end - from));
      CKPT_RETURN_IF_ERROR(opened->read_at(from, buf.data(), buf.size()));
      for (size_t k = i; k < j; ++k) {
        CKPT_RETURN_IF_ERROR(out->write_at(copy[k].offset, buf.data() + (copy[k].offset - from),
                                           static_cast<size_t>(copy[k].nbytes)));
      }
    }
    i = j;
  }
  // The file's full length (a hole where the tensors are), as HDF5 checks its end of file.
  if (size > 0) {
    const char last = 0;
    bool covered = !copy.empty() && copy.back().offset + copy.back().nbytes == size;
    if (!covered) CKPT_RETURN_IF_ERROR(out->write_at(size - 1, &last, 1));
  }
  CKPT_RETURN_IF_ERROR(out->close());
  return view;
}

}  // namespace ckpt::store
