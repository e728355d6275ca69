// The connector's info: which connector sits underneath (and its own info),
// plus Prescient's `key=value;` settings from the info string.
//
//   HDF5_VOL_CONNECTOR="prescient under_vol=0;under_info={};log=info"
//
// `under_vol` is a connector value (0 = native) or a registered name;
// `under_info` is the under connector's own info string, braces balanced.
// Plain HDF5_VOL_CONNECTOR=prescient gives no info at all (a null pointer),
// which means native underneath and no settings.
#ifndef PRESCIENT_VOL_PASSTHROUGH_CONNECTOR_INFO_H_
#define PRESCIENT_VOL_PASSTHROUGH_CONNECTOR_INFO_H_

#include <atomic>
#include <string>
#include <string_view>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

// Immutable once made, so HDF5's copies share it: a copy adds a reference
// and a free drops one. Besides being cheap (HDF5 copies the info with every
// FAPL), sharing keeps the info HDF5's API context points to alive while a
// file open sets the under connector in the application's FAPL (which frees
// the list's own copy).
struct ConnectorInfo {
  hid_t under_vol_id = H5I_INVALID_HID;  // one reference owned by this info
  void* under_vol_info = nullptr;        // owned; freed through the under connector
  std::string settings;                  // Prescient's own "key=value;..." part
  mutable std::atomic<int> references{1};
};

// The pieces of an info string, split without touching HDF5 (unit-tested).
struct InfoStringParts {
  std::string under_vol;   // empty: native
  std::string under_info;  // without the outer braces
  std::string settings;    // everything else, "key=value;..." in order
};
// Throws std::invalid_argument on unbalanced braces.
InfoStringParts SplitInfoString(std::string_view text);

// The info_cls callbacks.
void* InfoCopy(const void* info);
herr_t InfoCompare(int* cmp_value, const void* info1, const void* info2);
herr_t InfoFree(void* info);
herr_t InfoToString(const void* info, char** str);
herr_t InfoFromString(const char* str, void** info);

// The under connector for a (possibly null) info: native when null. Does not
// add a reference.
struct UnderConnector {
  hid_t vol_id;
  void* vol_info;
};
UnderConnector UnderOf(const ConnectorInfo* info);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_PASSTHROUGH_CONNECTOR_INFO_H_
