#include "vol/objects/object_file.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vol/hdf5_ids.h"
#include "vol/native_connector.h"
#include "vol/objects/name_query.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

// The name of the file `object` lives in. Asked with the object itself as
// the argument: the native H5VL_OBJECT_GET_FILE would do too, but it marks the
// file as having an id, and a file opened through an external link then never
// closes (HDF5 loops at shutdown).
std::optional<std::string> FileNameOf(const VolObject& object, H5I_type_t type) {
  return QueryName([&](char* buffer, std::size_t size, std::size_t* length) {
    H5VL_file_get_args_t args{};
    args.op_type = H5VL_FILE_GET_NAME;
    args.args.get_name = {type, size, buffer, length};
    const hid_t dxpl = hdf5::DefaultTransferList();
    return CallNativeOr<PRESCIENT_SLOT(file_cls.get)>(
               NativeClassOf(object.under, object.under_vol_id),
               [&] {
                 return H5VLfile_get(object.under, object.under_vol_id, &args, dxpl, nullptr);
               },
               object.under, &args, dxpl, nullptr) >= 0;
  });
}

std::shared_ptr<FileState> Resolve(const VolObject& object, H5I_type_t type) {
  const std::optional<std::string> found = FileNameOf(object, type);
  if (!found) return nullptr;
  const std::string& name = *found;
  // The file the object was opened through, by the name it was opened by:
  // identified then (a stat less per dataset open).
  if (object.file && object.file->identity.valid && name == object.file->name) return object.file;
  const FileIdentity identity = IdentifyFile(name);
  if (!identity.valid) return nullptr;
  if (object.file && object.file->identity.valid &&
      identity.device == object.file->identity.device &&
      identity.inode == object.file->identity.inode) {
    return object.file;
  }
  // Another file: one the application opened itself (mounted), or one HDF5
  // opened behind an external link, with the parent's intent and driver.
  if (std::shared_ptr<FileState> opened = OpenFiles::Find(identity)) return opened;
  const bool writable = object.file == nullptr || object.file->writable;
  const bool posix = object.file != nullptr && object.file->posix_driver;
  std::shared_ptr<FileState> state = FileState::Make(name.c_str(), writable, posix);
  state->swmr_read = object.file != nullptr && object.file->swmr_read;
  return state;
}

}  // namespace

std::shared_ptr<FileState> ResolveFile(const VolObject& object, H5I_type_t type) noexcept {
  PreservedErrorStack keep;
  try {
    return Resolve(object, type);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace prescient::vol
