// What HDF5 opens for a rank file: HDF5 reads through its own driver, by local path, so a rank
// file on an object store is seen through a sparse local scratch copy that holds only its
// structural bytes (the manifest's gap regions: groups, attributes, dataset headers) at their
// offsets — never its tensors, which resume/ and read_rank read with ranged GETs (regions close
// together are fetched in one read, the few tensor bytes between them dropped). Without a
// manifest (a verifier that trusts nothing), the whole object is copied.
#pragma once

#include <memory>
#include <string>

#include "ckpt/base/status.h"
#include "ckpt/format/manifest.h"
#include "ckpt/io/env.h"

namespace ckpt::store {

class Hdf5View {
 public:
  Hdf5View(std::string local, bool owned) : local_(std::move(local)), owned_(owned) {}
  ~Hdf5View();  // removes the scratch copy
  Hdf5View(const Hdf5View&) = delete;
  Hdf5View& operator=(const Hdf5View&) = delete;
  const std::string& path() const { return local_; }

 private:
  std::string local_;
  bool owned_;
};

// `path` itself on a file system; a scratch copy (see above) on an object store, read from
// `opened` when the caller has the object open already (else opened here).
Result<std::unique_ptr<Hdf5View>> hdf5_view(Env* env, const std::string& path,
                                            const Manifest* manifest,
                                            const RandomAccessFile* opened = nullptr);

// A fresh scratch path for `name` under the store's scratch directory (made if needed).
Result<std::string> scratch_path(ObjectStore* store, const std::string& name);

}  // namespace ckpt::store
