// An HDF5 id closed on scope exit with the close function of its kind.
#ifndef PRESCIENT_VOL_OBJECTS_SCOPED_ID_H_
#define PRESCIENT_VOL_OBJECTS_SCOPED_ID_H_

#include "vol/hdf5_compat.h"

namespace prescient::vol {

class ScopedId {
 public:
  ScopedId(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~ScopedId() {
    if (id_ >= 0) close_(id_);
  }
  ScopedId(const ScopedId&) = delete;
  ScopedId& operator=(const ScopedId&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_SCOPED_ID_H_
