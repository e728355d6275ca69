// The object Prescient hands to HDF5 in place of the connector underneath's.
//
// Every file, group, dataset, datatype, attribute and request that passes
// through the connector is wrapped in a VolObject: the under object, the under
// connector's id (one reference held per wrapper, as HDF5's pass-through
// contract requires, except for the native connector, whose id the library
// itself holds while it is initialised) and what Prescient knows about it: the
// file it belongs to and, for datasets, their identity. Wrappers are created
// on the caller's thread inside a callback and freed by the close that ends
// them.
#ifndef PRESCIENT_VOL_OBJECTS_OBJECT_H_
#define PRESCIENT_VOL_OBJECTS_OBJECT_H_

#include <cstdint>
#include <memory>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

struct FileState;
class DatasetState;

enum class ObjectKind : std::uint8_t {
  kFile,
  kGroup,
  kDataset,
  kDatatype,
  kAttribute,
  kMap,
  kRequest,
  kOther,
};

ObjectKind KindOf(H5I_type_t type);

// Closes an under object that could not be wrapped (its open succeeded, so
// it must not leak), with the close of its kind. Keeps the error stack.
void CloseUnder(void* under, hid_t under_vol_id, ObjectKind kind) noexcept;

namespace testing {
// Makes the next Wrap throw std::bad_alloc (tests of the cleanup above), and
// replaces CloseUnder's HDF5 calls with `recorder` while set.
void FailNextWrap();
void SetCloseUnderRecorder(void (*recorder)(void* under, hid_t under_vol_id, ObjectKind kind));
}  // namespace testing

struct VolObject {
  static constexpr std::uint32_t kMagic = 0x50524553;  // "PRES": catches stray pointers in debug

  // Takes a new reference on under_vol_id unless it is the native
  // connector's (holds_vol_ref). Throws std::bad_alloc; a caller
  // that just opened `under` then closes it (CloseUnder), so nothing leaks.
  static VolObject* Wrap(void* under, hid_t under_vol_id, ObjectKind kind,
                         std::shared_ptr<FileState> file);
  // Wrap() for an object the caller has just opened or created: if wrapping
  // fails, the under object is closed (CloseUnder) before the exception goes on.
  static VolObject* WrapOpened(void* under, hid_t under_vol_id, ObjectKind kind,
                               std::shared_ptr<FileState> file);
  // Drops the reference, if one is held; safe after a failed call (keeps the
  // error stack). A wrapper of the native connector's object that holds no
  // dataset state calls no HDF5 function here: a job that opens some twenty
  // small datasets and groups per sample (MACE's configurations) frees as many
  // wrappers a sample, and a reference and an error-stack check each were
  // about 1,300 instructions of locked library entries.
  static void Free(VolObject* object);

  static VolObject* From(void* p) { return static_cast<VolObject*>(p); }

  std::uint32_t magic = kMagic;
  void* under = nullptr;
  hid_t under_vol_id = H5I_INVALID_HID;
  // Whether this wrapper took a reference on under_vol_id (Wrap decides, Free
  // follows: the two never disagree, whatever the library's ids are by then).
  bool holds_vol_ref = false;
  ObjectKind kind = ObjectKind::kOther;
  std::shared_ptr<FileState> file;        // null when unknown (e.g. wrapped blindly)
  std::shared_ptr<DatasetState> dataset;  // datasets Prescient identified
  // A dataset too small to cache (CacheClient::TooSmallToCache), decided at
  // its open: unidentified, its reads forwarded without a look.
  bool too_small_to_cache = false;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_OBJECT_H_
