#include "vol/schedule/dataset_resolver.h"

#include <exception>

#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// Closes an HDF5 id on scope exit.
class Closer {
 public:
  Closer(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Closer() {
    if (id_ >= 0) close_(id_);
  }
  Closer(const Closer&) = delete;
  Closer& operator=(const Closer&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

}  // namespace

bool DatasetResolver::Available() {
  static const bool threadsafe = [] {
    hbool_t yes = false;
    return H5is_library_threadsafe(&yes) >= 0 && yes;
  }();
  return threadsafe;
}

io::Result<std::shared_ptr<CachedDataset>> DatasetResolver::Resolve(const std::string& path,
                                                                    const std::string& dataset) {
  if (!Available()) return io::Status::Unsupported("HDF5 is not thread-safe");
  std::shared_ptr<FileState> file = FileState::Make(path.c_str(), /*writable=*/false,
                                                    /*posix_driver=*/true);
  if (!file->identity.valid) return io::Status::IoError("cannot stat " + path);
  if (OpenFiles::Find(file->identity) != nullptr) {
    return io::Status::Unsupported(path + " is open in the application");
  }
  PreservedErrorStack keep;  // nothing of this may reach the application's error stack
  try {
    Closer fapl(H5Pcreate(H5P_FILE_ACCESS), &H5Pclose);
    if (fapl.get() < 0 || H5Pset_vol(fapl.get(), H5VL_NATIVE, nullptr) < 0 ||
        H5Pset_fapl_sec2(fapl.get()) < 0) {
      return io::Status::Internal("cannot make a native file access property list");
    }
    Closer h5file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), &H5Fclose);
    if (h5file.get() < 0) return io::Status::IoError("HDF5 cannot open " + path);
    Closer h5dataset(H5Dopen2(h5file.get(), dataset.c_str(), H5P_DEFAULT), &H5Dclose);
    if (h5dataset.get() < 0) return io::Status::IoError("no dataset " + dataset + " in " + path);
    // The native object behind the id, as the connector underneath would hand it over.
    VolObject object;
    object.under = H5VLobject(h5dataset.get());
    object.under_vol_id = H5VL_NATIVE;
    object.kind = ObjectKind::kDataset;
    object.file = file;
    if (object.under == nullptr) return io::Status::Internal("no native object for " + dataset);
    object.dataset = DatasetState::Identify(object);
    if (object.dataset == nullptr) return io::Status::Unsupported("cannot identify " + dataset);
    return CachedDataset::Prepare(object, *object.dataset);
  } catch (const std::exception& e) {
    return io::Status::Internal(std::string("resolving ") + dataset + " in " + path + ": " +
                                e.what());
  }
}

}  // namespace prescient::vol
