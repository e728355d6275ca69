// The hand-written VOL callbacks: the few slots with logic of their own.
// Everything else is generated from callback_table.def (see forwarding.h).
#ifndef PRESCIENT_VOL_PASSTHROUGH_CALLBACKS_H_
#define PRESCIENT_VOL_PASSTHROUGH_CALLBACKS_H_

#include "vol/hdf5_compat.h"

namespace prescient::vol {

// Connector life cycle (connector.cc).
herr_t Initialize(hid_t vipl_id);
herr_t Terminate();
const H5VL_class_t& ConnectorClass();

// wrap_cls (wrap_callbacks.cc).
void* GetObject(const void* obj);
herr_t GetWrapContext(const void* obj, void** wrap_ctx);
void* WrapObject(void* obj, H5I_type_t obj_type, void* wrap_ctx);
void* UnwrapObject(void* obj);
herr_t FreeWrapContext(void* wrap_ctx);

// file_cls (file_callbacks.cc): the FAPL must name the under connector.
void* FileCreate(const char* name, unsigned flags, hid_t fcpl_id, hid_t fapl_id, hid_t dxpl_id,
                 void** req);
void* FileOpen(const char* name, unsigned flags, hid_t fapl_id, hid_t dxpl_id, void** req);
herr_t FileSpecific(void* obj, H5VL_file_specific_args_t* args, hid_t dxpl_id, void** req);
herr_t FileClose(void* file, hid_t dxpl_id, void** req);

// dataset_cls (dataset_callbacks.cc): identity, the read hook, change tracking.
void* DatasetCreate(void* obj, const H5VL_loc_params_t* loc_params, const char* name, hid_t lcpl_id,
                    hid_t type_id, hid_t space_id, hid_t dcpl_id, hid_t dapl_id, hid_t dxpl_id,
                    void** req);
void* DatasetOpen(void* obj, const H5VL_loc_params_t* loc_params, const char* name, hid_t dapl_id,
                  hid_t dxpl_id, void** req);
herr_t DatasetRead(size_t count, void* dset[], hid_t mem_type_id[], hid_t mem_space_id[],
                   hid_t file_space_id[], hid_t dxpl_id, void* buf[], void** req);
herr_t DatasetWrite(size_t count, void* dset[], hid_t mem_type_id[], hid_t mem_space_id[],
                    hid_t file_space_id[], hid_t dxpl_id, const void* buf[], void** req);
herr_t DatasetSpecific(void* obj, H5VL_dataset_specific_args_t* args, hid_t dxpl_id, void** req);
herr_t DatasetOptional(void* obj, H5VL_optional_args_t* args, hid_t dxpl_id, void** req);
// What a dataset opened (H5Dopen, or H5Oopen in object_cls) or created
// through the connector gets: its file, its identity, its cache record.
// Never fails the open.
struct VolObject;
void AttachDatasetIdentity(VolObject* dataset, bool created_here) noexcept;
herr_t DatasetClose(void* dset, hid_t dxpl_id, void** req);

// object_cls.open, link_cls.create and group_cls.specific (object_callbacks.cc).
void* ObjectOpen(void* obj, const H5VL_loc_params_t* loc_params, H5I_type_t* opened_type,
                 hid_t dxpl_id, void** req);
herr_t LinkCreate(H5VL_link_create_args_t* args, void* obj, const H5VL_loc_params_t* loc_params,
                  hid_t lcpl_id, hid_t lapl_id, hid_t dxpl_id, void** req);
// group_cls.specific: H5Fmount passes the child file inside the arguments.
herr_t GroupSpecific(void* obj, H5VL_group_specific_args_t* args, hid_t dxpl_id, void** req);

// introspect_cls (connector.cc).
herr_t IntrospectGetConnClass(void* obj, H5VL_get_conn_lvl_t lvl, const H5VL_class_t** conn_cls);
herr_t IntrospectGetCapFlags(const void* info, uint64_t* cap_flags);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_PASSTHROUGH_CALLBACKS_H_
