#include "vol/objects/object.h"

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

VolObject* VolObject::Wrap(void* under, hid_t under_vol_id, ObjectKind kind,
                           std::shared_ptr<FileState> file) {
  auto* object = new VolObject;
  object->under = under;
  object->under_vol_id = under_vol_id;
  object->kind = kind;
  object->file = std::move(file);
  H5Iinc_ref(under_vol_id);
  return object;
}

void VolObject::Free(VolObject* object) {
  if (object == nullptr) return;
  {
    PreservedErrorStack keep;
    H5Idec_ref(object->under_vol_id);
    object->magic = 0;
    delete object;  // DatasetState's destructor may close HDF5 ids: still inside `keep`
  }
}

}  // namespace prescient::vol
