// wrap_cls: how HDF5 wraps under objects it obtains without a callback of ours
// (H5Iget_file_id, dereferenced references, ...) and how it reaches the
// terminal object behind ours.
#include <memory>

#include "vol/native_connector.h"
#include "vol/objects/object.h"
#include "vol/passthrough/callbacks.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

// HDF5 makes one of these around every API call on our objects (an H5Dread
// included), so it costs no library call it does not need. Its allocation
// stays: a thread-local pool of contexts saved 1,200 of the 54,000
// instructions the connector added to a file-per-sample visit (RESULTS.md,
// 2026-12-05), not worth a pool's lifetime rules.
struct WrapContext {
  // One reference owned only while under_wrap_ctx is set: freeing that needs
  // the id after the call's objects may be gone. Without it (the native
  // connector has no wrap context) the id is used only to wrap objects during
  // the call, while the object the context came from holds a reference (or,
  // for the native connector's id, the library does).
  hid_t under_vol_id = H5I_INVALID_HID;
  void* under_wrap_ctx = nullptr;
  std::shared_ptr<FileState> file;
};

}  // namespace

void* GetObject(const void* obj) {
  // The terminal object: HDF5 compares it with existing file ids so that
  // f[name] in h5py finds the already open file instead of registering a new one.
  const VolObject* object = static_cast<const VolObject*>(obj);
  // H5VLget_object, H5VLwrap_object and H5VLunwrap_object hand the object
  // itself back for a connector without the callback, as the native one is.
  if (const H5VL_class_t* native = NativeClassOf(object->under, object->under_vol_id);
      native != nullptr && native->wrap_cls.get_object == nullptr) {
    return object->under;
  }
  return H5VLget_object(object->under, object->under_vol_id);
}

herr_t GetWrapContext(const void* obj, void** wrap_ctx) {
  return Barrier("wrap_cls.get_wrap_ctx", [&]() -> herr_t {
    const VolObject* object = static_cast<const VolObject*>(obj);
    auto context = std::make_unique<WrapContext>();
    // The native connector has no wrap context: not asking saves a locked
    // library entry on each of the ~20 contexts a file-per-sample visit makes.
    if (object->under_vol_id != H5VL_NATIVE &&
        H5VLget_wrap_ctx(object->under, object->under_vol_id, &context->under_wrap_ctx) < 0) {
      return -1;
    }
    context->under_vol_id = object->under_vol_id;
    context->file = object->file;
    if (context->under_wrap_ctx != nullptr) H5Iinc_ref(context->under_vol_id);
    *wrap_ctx = context.release();
    return 0;
  });
}

void* WrapObject(void* obj, H5I_type_t obj_type, void* wrap_ctx) {
  return Barrier("wrap_cls.wrap_object", [&]() -> void* {
    auto* context = static_cast<WrapContext*>(wrap_ctx);
    const H5VL_class_t* native = NativeClassOf(obj, context->under_vol_id);
    void* under =
        native != nullptr && native->wrap_cls.wrap_object == nullptr
            ? obj
            : H5VLwrap_object(obj, obj_type, context->under_vol_id, context->under_wrap_ctx);
    if (under == nullptr) return nullptr;
    void* wrapped = VolObject::Wrap(under, context->under_vol_id, KindOf(obj_type), context->file);
    // A dataset HDF5 opened again on its own: H5Drefresh (a SWMR reader's
    // d.refresh()) closes the dataset and opens it anew behind the
    // application's id. Identified as at an open, or its reads would all be
    // forwarded from then on.
    if (obj_type == H5I_DATASET) AttachDatasetIdentity(VolObject::From(wrapped), false);
    return wrapped;
  });
}

void* UnwrapObject(void* obj) {
  return Barrier("wrap_cls.unwrap_object", [&]() -> void* {
    VolObject* object = VolObject::From(obj);
    const H5VL_class_t* native = NativeClassOf(object->under, object->under_vol_id);
    void* under = native != nullptr && native->wrap_cls.unwrap_object == nullptr
                      ? object->under
                      : H5VLunwrap_object(object->under, object->under_vol_id);
    if (under != nullptr) VolObject::Free(object);
    return under;
  });
}

herr_t FreeWrapContext(void* wrap_ctx) {
  return Barrier("wrap_cls.free_wrap_ctx", [&]() -> herr_t {
    std::unique_ptr<WrapContext> context(static_cast<WrapContext*>(wrap_ctx));
    if (context->under_wrap_ctx == nullptr) return 0;  // no reference held, nothing to free
    PreservedErrorStack keep;
    const herr_t status = H5VLfree_wrap_ctx(context->under_wrap_ctx, context->under_vol_id);
    H5Idec_ref(context->under_vol_id);
    return status;
  });
}

}  // namespace prescient::vol
