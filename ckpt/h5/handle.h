// RAII for HDF5 identifiers and the HDF5 error stack → Status bridge. Only ckpt/h5 includes
// hdf5.h. A Handle owns one hid_t and closes it with the matching H5?close in its destructor
// (never throws). Not thread-safe: HDF5 here is built without its thread-safe option, so all
// calls into ckpt/h5 are serialised by a process-wide mutex (h5_lock()).
#pragma once

#include <hdf5.h>

#include <mutex>
#include <string>
#include <utility>

#include "ckpt/base/status.h"

namespace ckpt::h5 {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), closer_(o.closer_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, -1);
      closer_ = o.closer_;
    }
    return *this;
  }
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = -1;
  }
  // Closes now and reports failure (a file's close flushes metadata).
  herr_t close() {
    herr_t rc = (id_ >= 0 && closer_ != nullptr) ? closer_(id_) : 0;
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

inline Handle file_handle(hid_t id) { return Handle(id, H5Fclose); }
inline Handle group_handle(hid_t id) { return Handle(id, H5Gclose); }
inline Handle dataset_handle(hid_t id) { return Handle(id, H5Dclose); }
inline Handle space_handle(hid_t id) { return Handle(id, H5Sclose); }
inline Handle type_handle(hid_t id) { return Handle(id, H5Tclose); }
inline Handle attr_handle(hid_t id) { return Handle(id, H5Aclose); }
inline Handle plist_handle(hid_t id) { return Handle(id, H5Pclose); }

// Silences HDF5's automatic stderr printing for the calling thread (HDF5 keeps it per thread).
void quiet_errors();
// The current HDF5 error stack as one line ("H5Dcreate2: unable to create dataset; ..."),
// then clears it.
std::string error_stack();
// A kIoError/kCorrupt Status naming `where` and what HDF5 said.
Status h5_error(const std::string& where, const std::string& what, Code code = Code::kIoError);

std::mutex& h5_lock();

}  // namespace ckpt::h5
