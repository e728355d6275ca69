// Which file an object actually lives in.
//
// A dataset reached through an external link, or inside a file mounted on a
// group (H5Fmount), lives in another file than the object it was opened from.
// Its raw offsets, its identity and whether it may be cached all belong to
// that file, so every dataset's FileState is resolved from the connector
// underneath rather than inherited from its parent.
#ifndef PRESCIENT_VOL_OBJECTS_OBJECT_FILE_H_
#define PRESCIENT_VOL_OBJECTS_OBJECT_FILE_H_

#include <memory>

#include "vol/objects/file_state.h"
#include "vol/objects/object.h"

namespace prescient::vol {

// The FileState of the file `object` lives in: `object.file` itself when that
// is the same file (same device and inode), a new state otherwise, or null
// when the connector underneath cannot say (the object is then never cached).
// Never throws; leaves the HDF5 error stack as it was.
std::shared_ptr<FileState> ResolveFile(const VolObject& object, H5I_type_t type) noexcept;

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_OBJECT_FILE_H_
