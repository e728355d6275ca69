#include "vol/native_connector.h"

#include <atomic>

#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

// The answer of this library session, null until asked or when the class
// may not be called into (asked is then set).
std::atomic<const H5VL_class_t*> g_native_class{nullptr};
std::atomic<bool> g_asked{false};

// Whether the running library's native class may be called into: this VOL
// API version's table (a pip wheel's library, bound at run time, may be
// another than the one compiled against), in a 1.14 library. HDF5 2.0 wraps
// every connector callback in a preparation of its error stack (and, in a
// concurrent build, of its locks) that the public functions do and a direct
// call would skip: there the public functions serve.
bool CallableDirectly(const H5VL_class_t& native) {
  if (native.version != H5VL_VERSION || native.value != H5_VOL_NATIVE) return false;
  unsigned major = 0, minor = 0, release = 0;
  return H5get_libversion(&major, &minor, &release) >= 0 && major == 1 && minor == 14;
}

}  // namespace

const H5VL_class_t* NativeClassOf(const void* under, hid_t under_vol_id) noexcept {
  if (under == nullptr) return nullptr;
  if (g_asked.load(std::memory_order_acquire)) return KnownNativeClass(under_vol_id);
  if (!IsNativeConnector(under_vol_id)) return nullptr;
  const H5VL_class_t* native = nullptr;
  {
    // No answer is no error (the public functions serve), and the caller's
    // errors stay: H5get_libversion empties the stack.
    PreservedErrorStack keep;
    if (H5VLintrospect_get_conn_cls(const_cast<void*>(under), under_vol_id, H5VL_GET_CONN_LVL_CURR,
                                    &native) < 0 ||
        native == nullptr || !CallableDirectly(*native)) {
      native = nullptr;
    }
  }
  g_native_class.store(native, std::memory_order_relaxed);
  g_asked.store(true, std::memory_order_release);
  return native;
}

const H5VL_class_t* KnownNativeClass(hid_t under_vol_id) noexcept {
  if (!g_asked.load(std::memory_order_acquire)) return nullptr;
  // No class (HDF5 2.x) answers before the connector is looked at.
  const H5VL_class_t* native = g_native_class.load(std::memory_order_relaxed);
  return native != nullptr && IsNativeConnector(under_vol_id) ? native : nullptr;
}

bool IsNativeConnector(hid_t vol_id) noexcept {
  if (vol_id == H5VL_NATIVE) return true;
  PreservedErrorStack keep;
  H5VL_class_value_t value = -1;
  if (H5VLget_value(vol_id, &value) < 0) return false;
  keep.CallsSucceeded();
  return value == H5_VOL_NATIVE;
}

void ForgetNativeClass() noexcept {
  g_asked.store(false, std::memory_order_relaxed);
  g_native_class.store(nullptr, std::memory_order_relaxed);
}

}  // namespace prescient::vol
