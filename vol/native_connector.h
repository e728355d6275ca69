// HDF5's native connector underneath, called through its own callback table.
//
// A pass-through forwards each call through the public H5VL* functions
// (H5VLdataset_get, H5VLget_object, ...). Each of those takes the library's
// lock again, looks the connector id up and pushes its name on the function
// stack before it calls the connector's callback: about 650 instructions, some
// 35 times in a file-per-sample visit (RESULTS.md, 2026-12-05). Inside one of
// our callbacks this thread already holds the library's lock, and the native
// connector's class is a table the library keeps from its start to its end,
// so when the connector underneath is the native one its callbacks are called
// directly. They push the same errors, without the public function's extra
// "unable to execute" record on top, as when no connector is stacked. Another
// connector underneath is called through the public functions, as its
// author expects, and so is the native connector of an HDF5 2.x (whose public
// functions prepare the library for each callback).
//
// Only for use inside callbacks (HDF5's lock held, its API context set up).
#ifndef PRESCIENT_VOL_NATIVE_CONNECTOR_H_
#define PRESCIENT_VOL_NATIVE_CONNECTOR_H_

#include <utility>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

// The native connector's class when `under_vol_id` is the native connector,
// else null. `under` is one of its objects (HDF5 tells a connector's class by
// asking an object of it); the class is asked once per library session.
const H5VL_class_t* NativeClassOf(const void* under, hid_t under_vol_id) noexcept;

// The native connector's class when NativeClassOf has found it already and
// `under_vol_id` is the native connector, else null: for a call that has no
// object of the connector to ask by, such as a file open. The first such call
// of a session takes the public path.
const H5VL_class_t* KnownNativeClass(hid_t under_vol_id) noexcept;

// Whether `vol_id` is HDF5's native connector. The id the library registered
// it under answers at once; another id of it (HDF5 2.x gives a file access
// list's connector a new id) is told by its class value, a library entry.
// Never an error: a connector that cannot be asked is not the native one.
bool IsNativeConnector(hid_t vol_id) noexcept;

// Forgets the class (the connector's initialisation and termination): a
// library closed and opened again is asked anew.
void ForgetNativeClass() noexcept;

// The callback in a slot of a connector class, as a template argument:
// PRESCIENT_SLOT(dataset_cls.get).
#define PRESCIENT_SLOT(slot) [](const H5VL_class_t& cls) { return cls.slot; }

// Calls the native connector's callback in `kSlot` (PRESCIENT_SLOT) when
// `native` is set and has that callback, else `via_api()`: the public
// function, which also reports a missing callback.
template <auto kSlot, typename ViaApi, typename... Args>
auto CallNativeOr(const H5VL_class_t* native, ViaApi&& via_api, Args&&... args)
    -> decltype(via_api()) {
  if (native != nullptr) {
    if (const auto slot = kSlot(*native); slot != nullptr) {
      return slot(std::forward<Args>(args)...);
    }
  }
  return via_api();
}

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_NATIVE_CONNECTOR_H_
