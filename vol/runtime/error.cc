#include "vol/runtime/error.h"

#include <string>

namespace prescient::vol {
namespace {

hid_t g_class = H5I_INVALID_HID;
hid_t g_major = H5I_INVALID_HID;
hid_t g_minor = H5I_INVALID_HID;

}  // namespace

void RegisterErrorClass() {
  if (g_class >= 0) return;
  g_class = H5Eregister_class("Prescient", "prescient", "0.1.0");
  if (g_class < 0) return;
  g_major = H5Ecreate_msg(g_class, H5E_MAJOR, "Prescient VOL connector");
  g_minor = H5Ecreate_msg(g_class, H5E_MINOR, "operation failed");
}

void UnregisterErrorClass() {
  if (g_class < 0) return;
  H5Eclose_msg(g_minor);
  H5Eclose_msg(g_major);
  H5Eunregister_class(g_class);
  g_class = g_major = g_minor = H5I_INVALID_HID;
}

void PushError(std::string_view where, std::string_view message) {
  const std::string text(message);
  const std::string func(where);
  if (g_class < 0) {
    // Not initialised (should not happen): use HDF5's own class so the error
    // is still visible.
    H5Epush2(H5E_DEFAULT, __FILE__, func.c_str(), __LINE__, H5E_ERR_CLS, H5E_VOL, H5E_CANTOPERATE,
             "%s", text.c_str());
    return;
  }
  H5Epush2(H5E_DEFAULT, __FILE__, func.c_str(), __LINE__, g_class, g_major, g_minor, "%s",
           text.c_str());
}

}  // namespace prescient::vol
