#include "vol/objects/object.h"

#include <atomic>
#include <new>

#include "vol/hdf5_ids.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/runtime/error.h"

namespace prescient::vol {

ObjectKind KindOf(H5I_type_t type) {
  switch (type) {
    case H5I_FILE:
      return ObjectKind::kFile;
    case H5I_GROUP:
      return ObjectKind::kGroup;
    case H5I_DATASET:
      return ObjectKind::kDataset;
    case H5I_DATATYPE:
      return ObjectKind::kDatatype;
    case H5I_ATTR:
      return ObjectKind::kAttribute;
    case H5I_MAP:
      return ObjectKind::kMap;
    default:
      return ObjectKind::kOther;
  }
}

namespace {
std::atomic<bool> g_fail_next_wrap{false};
std::atomic<void (*)(void*, hid_t, ObjectKind)> g_close_recorder{nullptr};
}  // namespace

namespace testing {
void FailNextWrap() { g_fail_next_wrap = true; }
void SetCloseUnderRecorder(void (*recorder)(void*, hid_t, ObjectKind)) {
  g_close_recorder = recorder;
}
}  // namespace testing

void CloseUnder(void* under, hid_t under_vol_id, ObjectKind kind) noexcept {
  if (under == nullptr) return;
  if (auto* recorder = g_close_recorder.load()) {
    recorder(under, under_vol_id, kind);
    return;
  }
  PreservedErrorStack keep;
  const hid_t dxpl = hdf5::DefaultTransferList();
  switch (kind) {
    case ObjectKind::kFile:
      H5VLfile_close(under, under_vol_id, dxpl, nullptr);
      break;
    case ObjectKind::kGroup:
      H5VLgroup_close(under, under_vol_id, dxpl, nullptr);
      break;
    case ObjectKind::kDataset:
      H5VLdataset_close(under, under_vol_id, dxpl, nullptr);
      break;
    case ObjectKind::kDatatype:
      H5VLdatatype_close(under, under_vol_id, dxpl, nullptr);
      break;
    case ObjectKind::kAttribute:
      H5VLattr_close(under, under_vol_id, dxpl, nullptr);
      break;
    case ObjectKind::kRequest:
      H5VLrequest_free(under, under_vol_id);
      break;
    case ObjectKind::kMap:
    case ObjectKind::kOther:
      break;  // nothing this connector opens under these kinds
  }
}

VolObject* VolObject::Wrap(void* under, hid_t under_vol_id, ObjectKind kind,
                           std::shared_ptr<FileState> file) {
  if (g_fail_next_wrap.exchange(false)) throw std::bad_alloc();
  auto* object = new VolObject;
  object->under = under;
  object->under_vol_id = under_vol_id;
  object->kind = kind;
  object->file = std::move(file);
  // The library holds the native connector's id from its initialisation to
  // its end, after every file (and so every wrapper) is closed.
  if (under_vol_id != H5VL_NATIVE) object->holds_vol_ref = H5Iinc_ref(under_vol_id) >= 0;
  return object;
}

VolObject* VolObject::WrapOpened(void* under, hid_t under_vol_id, ObjectKind kind,
                                 std::shared_ptr<FileState> file) {
  try {
    return Wrap(under, under_vol_id, kind, std::move(file));
  } catch (...) {
    CloseUnder(under, under_vol_id, kind);
    throw;
  }
}

void VolObject::Free(VolObject* object) {
  if (object == nullptr) return;
  object->magic = 0;
  if (!object->holds_vol_ref && object->dataset == nullptr) {
    delete object;  // nothing left that calls HDF5 (a FileState's destructor does not)
    return;
  }
  PreservedErrorStack keep;
  if (object->holds_vol_ref) H5Idec_ref(object->under_vol_id);
  delete object;  // DatasetState's destructor may close HDF5 ids: still inside `keep`
}

}  // namespace prescient::vol
