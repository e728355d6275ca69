// object_cls.open (how h5py opens every dataset: H5Oopen, not H5Dopen), and
// the two callbacks whose arguments carry a second wrapped object:
// link_cls.create (a hard link's target) and group_cls.specific (H5Fmount's
// child file).
#include "vol/native_connector.h"
#include "vol/objects/object.h"
#include "vol/objects/object_file.h"
#include "vol/passthrough/callbacks.h"
#include "vol/passthrough/forwarding.h"
#include "vol/runtime/error.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {

void* ObjectOpen(void* obj, const H5VL_loc_params_t* loc_params, H5I_type_t* opened_type,
                 hid_t dxpl_id, void** req) {
  return Barrier("object_cls.open", [&]() -> void* {
    Trace("object_cls.open");
    VolObject* parent = VolObject::From(obj);
    void* under = CallNativeOr<PRESCIENT_SLOT(object_cls.open)>(
        NativeClassOf(parent->under, parent->under_vol_id),
        [&] {
          return H5VLobject_open(parent->under, loc_params, parent->under_vol_id, opened_type,
                                 dxpl_id, req);
        },
        parent->under, loc_params, opened_type, dxpl_id, req);
    if (under == nullptr) return nullptr;
    WrapRequest(req, parent->under_vol_id);
    VolObject* object =
        VolObject::WrapOpened(under, parent->under_vol_id, KindOf(*opened_type), parent->file);
    if (*opened_type == H5I_DATASET) AttachDatasetIdentity(object, /*created_here=*/false);
    return object;
  });
}

herr_t LinkCreate(H5VL_link_create_args_t* args, void* obj, const H5VL_loc_params_t* loc_params,
                  hid_t lcpl_id, hid_t lapl_id, hid_t dxpl_id, void** req) {
  return Barrier("link_cls.create", [&]() -> herr_t {
    Trace("link_cls.create");
    VolObject* location = VolObject::From(obj);
    hid_t under_vol_id = location ? location->under_vol_id : H5I_INVALID_HID;
    H5VL_link_create_args_t under_args = *args;
    if (args->op_type == H5VL_LINK_CREATE_HARD && args->args.hard.curr_obj != nullptr) {
      VolObject* target = VolObject::From(args->args.hard.curr_obj);
      if (under_vol_id < 0) under_vol_id = target->under_vol_id;
      under_args.args.hard.curr_obj = target->under;
    }
    const herr_t status = H5VLlink_create(&under_args, location ? location->under : nullptr,
                                          loc_params, under_vol_id, lcpl_id, lapl_id, dxpl_id, req);
    if (status >= 0) WrapRequest(req, under_vol_id);
    return status;
  });
}

herr_t GroupSpecific(void* obj, H5VL_group_specific_args_t* args, hid_t dxpl_id, void** req) {
  return Barrier("group_cls.specific", [&]() -> herr_t {
    Trace("group_cls.specific");
    VolObject* group = VolObject::From(obj);
    H5VL_group_specific_args_t under_args = *args;
    if (args->op_type == H5VL_GROUP_MOUNT && args->args.mount.child_file != nullptr) {
      under_args.args.mount.child_file = VolObject::From(args->args.mount.child_file)->under;
    }
    const herr_t status =
        H5VLgroup_specific(group->under, group->under_vol_id, &under_args, dxpl_id, req);
    if (status >= 0) WrapRequest(req, group->under_vol_id);
    return status;
  });
}

}  // namespace prescient::vol
