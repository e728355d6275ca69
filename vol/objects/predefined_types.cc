#include "vol/objects/predefined_types.h"

#include <array>
#include <map>
#include <string>

#include "cache/base/mutex.h"
#include "vol/hdf5_compat.h"

namespace prescient::vol {
namespace {

// The library's own globals, read at each use (the H5T_NATIVE_* macros would
// also call H5open, a locked library entry).
const std::array<const hid_t*, kPredefinedTypes> kGlobals = {
    &H5T_NATIVE_SCHAR_g, &H5T_NATIVE_UCHAR_g,  &H5T_NATIVE_SHORT_g, &H5T_NATIVE_USHORT_g,
    &H5T_NATIVE_INT_g,   &H5T_NATIVE_UINT_g,   &H5T_NATIVE_LONG_g,  &H5T_NATIVE_ULONG_g,
    &H5T_NATIVE_LLONG_g, &H5T_NATIVE_ULLONG_g, &H5T_NATIVE_FLOAT_g, &H5T_NATIVE_DOUBLE_g,
    &H5T_NATIVE_INT8_g,  &H5T_NATIVE_UINT8_g,  &H5T_NATIVE_INT16_g, &H5T_NATIVE_UINT16_g,
    &H5T_NATIVE_INT32_g, &H5T_NATIVE_UINT32_g, &H5T_NATIVE_INT64_g, &H5T_NATIVE_UINT64_g,
    &H5T_IEEE_F32LE_g,   &H5T_IEEE_F32BE_g,    &H5T_IEEE_F64LE_g,   &H5T_IEEE_F64BE_g,
    &H5T_STD_I8LE_g,     &H5T_STD_I8BE_g,      &H5T_STD_U8LE_g,     &H5T_STD_U8BE_g,
    &H5T_STD_I16LE_g,    &H5T_STD_I16BE_g,     &H5T_STD_U16LE_g,    &H5T_STD_U16BE_g,
    &H5T_STD_I32LE_g,    &H5T_STD_I32BE_g,     &H5T_STD_U32LE_g,    &H5T_STD_U32BE_g,
    &H5T_STD_I64LE_g,    &H5T_STD_I64BE_g,     &H5T_STD_U64LE_g,    &H5T_STD_U64BE_g,
};

// Encodings already matched (or not) against the predefined types.
struct KnownEquivalents {
  cache::Mutex mu;
  std::map<std::string, int> by_encoding GUARDED_BY(mu);
};
KnownEquivalents& Known() {
  static auto* known = new KnownEquivalents;  // never destroyed: used until exit
  return *known;
}

int FindEquivalent(const std::vector<unsigned char>& encoded) {
  const hid_t type = hdf5::DecodeType(encoded.data(), encoded.size());
  if (type < 0) return -1;
  int found = -1;
  const H5T_class_t type_class = H5Tget_class(type);
  if (type_class == H5T_INTEGER || type_class == H5T_FLOAT) {
    for (int i = 0; i < kPredefinedTypes && found < 0; ++i) {
      if (H5Tequal(type, PredefinedTypeId(i)) > 0) found = i;
    }
  }
  H5Tclose(type);
  return found;
}

}  // namespace

hid_t PredefinedTypeId(int index) noexcept {
  if (index < 0 || index >= kPredefinedTypes) return H5I_INVALID_HID;
  return *kGlobals[static_cast<std::size_t>(index)];
}

int EquivalentPredefinedType(const std::vector<unsigned char>& encoded) {
  KnownEquivalents& known = Known();
  const std::string key(encoded.begin(), encoded.end());
  {
    cache::MutexLock lock(&known.mu);
    auto it = known.by_encoding.find(key);
    if (it != known.by_encoding.end()) return it->second;
  }
  // Library calls outside our lock (the caller holds the library's).
  const int found = FindEquivalent(encoded);
  cache::MutexLock lock(&known.mu);
  known.by_encoding.emplace(key, found);
  return found;
}

int PredefinedTypeIndex(hid_t type) noexcept {
  if (type < 0) return -1;
  for (int i = 0; i < kPredefinedTypes; ++i) {
    if (*kGlobals[static_cast<std::size_t>(i)] == type) return i;
  }
  return -1;
}

}  // namespace prescient::vol
