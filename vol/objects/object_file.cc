#include "vol/objects/object_file.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

// The name of the file `object` lives in. Asked with the object itself as
// the argument: the native H5VL_OBJECT_GET_FILE would do too, but it marks the
// file as having an id, and a file opened through an external link then never
// closes (HDF5 loops at shutdown).
bool FileNameOf(const VolObject& object, H5I_type_t type, std::vector<char>* name) {
  std::size_t length = 0;
  H5VL_file_get_args_t args{};
  args.op_type = H5VL_FILE_GET_NAME;
  args.args.get_name = {type, 0, nullptr, &length};
  if (H5VLfile_get(object.under, object.under_vol_id, &args, H5P_DATASET_XFER_DEFAULT, nullptr) <
      0) {
    return false;
  }
  name->assign(length + 1, '\0');
  args.args.get_name = {type, name->size(), name->data(), &length};
  return H5VLfile_get(object.under, object.under_vol_id, &args, H5P_DATASET_XFER_DEFAULT,
                      nullptr) >= 0;
}

std::shared_ptr<FileState> Resolve(const VolObject& object, H5I_type_t type) {
  std::vector<char> name;
  if (!FileNameOf(object, type, &name)) return nullptr;
  const FileIdentity identity = IdentifyFile(name.data());
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
  return FileState::Make(name.data(), writable, posix);
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
