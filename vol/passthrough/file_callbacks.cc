// file_cls: opening and creating files under the connector named in our info,
// and the file operations whose arguments carry a FAPL or a second file.
#include <optional>
#include <stdexcept>

#include "vol/hdf5_ids.h"
#include "vol/native_connector.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"
#include "vol/objects/written_datasets.h"
#include "vol/passthrough/callbacks.h"
#include "vol/passthrough/connector_info.h"
#include "vol/passthrough/forwarding.h"
#include "vol/runtime/error.h"
#include "vol/runtime/plugin_directories.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

// The connector underneath named in the application's FAPL, and the FAPL
// with that connector set in place of ours, for the under connector's file
// create/open/delete/is-accessible.
//
// The list is changed only when asked for (fapl()): a file open that calls
// the native connector directly needs none. It is set in the application's
// own list for the call and put back after it: a copy of a FAPL and its close
// cost ~46,000 instructions, more than all else Prescient does to open a
// file, and one-sample-per-file loaders open a file per sample. Nobody sees
// the list in between: the application is inside this HDF5 call (HDF5's lock
// in a thread-safe build; concurrent calls are not allowed in the others). A
// list that refuses the change is copied.
class UnderFapl {
 public:
  explicit UnderFapl(hid_t fapl_id) : app_fapl_(fapl_id) {
    void* info = nullptr;
    if (H5Pget_vol_info(fapl_id, &info) < 0) {
      throw std::runtime_error(
          "cannot read Prescient's connector info from the file access property list");
    }
    info_ = static_cast<ConnectorInfo*>(info);
    under_ = UnderOf(info_);
  }
  ~UnderFapl() { Release(); }
  UnderFapl(const UnderFapl&) = delete;
  UnderFapl& operator=(const UnderFapl&) = delete;

  hid_t vol_id() const { return under_.vol_id; }

  // The list naming the under connector, made at the first call.
  hid_t fapl() {
    if (fapl_ >= 0) return fapl_;
    {
      PreservedErrorStack keep;  // a refusal is not an error: the copy below serves
      if (H5Pget_vol_id(app_fapl_, &own_vol_id_) >= 0 &&
          H5Pset_vol(app_fapl_, under_.vol_id, under_.vol_info) >= 0) {
        keep.CallsSucceeded();
        fapl_ = app_fapl_;
        return fapl_;
      }
    }
    fapl_ = H5Pcopy(app_fapl_);
    copied_ = fapl_ >= 0;
    if (fapl_ < 0 || H5Pset_vol(fapl_, under_.vol_id, under_.vol_info) < 0) {
      throw std::runtime_error(
          "cannot set the under connector on a copy of the file access property list");
    }
    return fapl_;
  }

 private:
  void Release() {
    // Runs after a failed open too: keep the under connector's errors.
    PreservedErrorStack keep;
    bool succeeded = true;
    if (copied_) {
      succeeded = H5Pclose(fapl_) >= 0;
    } else if (fapl_ == app_fapl_ && H5Pset_vol(app_fapl_, own_vol_id_, info_) < 0) {
      succeeded = false;
      Runtime::Get().Log(LogLevel::kWarn,
                         "could not set Prescient back on a file access property list; files "
                         "opened with it later are not cached");
    }
    if (own_vol_id_ >= 0 && H5VLclose(own_vol_id_) < 0) succeeded = false;
    if (succeeded) keep.CallsSucceeded();
    if (info_ != nullptr) InfoFree(info_);
    copied_ = false;
    fapl_ = own_vol_id_ = H5I_INVALID_HID;
    info_ = nullptr;
  }

  hid_t app_fapl_;
  ConnectorInfo* info_ = nullptr;
  UnderConnector under_{};
  hid_t own_vol_id_ = H5I_INVALID_HID;
  hid_t fapl_ = H5I_INVALID_HID;
  bool copied_ = false;
};

// How the file's bytes may be read beside HDF5: whether its addresses are
// offsets a plain pread of its path can use (HDF5's POSIX driver, and MPI-IO:
// the same bytes at the same offsets), and HDF5's own descriptor of it
// (H5Fget_vfd_handle) when the native connector opened it with the POSIX
// driver, else -1. Neither answer is an error: a file without a descriptor is
// read through a pooled one.
struct RawAccess {
  bool readable = false;
  int descriptor = -1;
};

RawAccess RawAccessOf(void* under, hid_t under_vol_id, hid_t fapl_id, bool writable) {
  PreservedErrorStack keep;
  RawAccess access;
  const std::optional<hdf5::FileDriver> driver = hdf5::DriverOf(fapl_id);
  if (!driver) return access;
  access.readable = *driver != hdf5::FileDriver::kOther;
  // Files open for writing are never served from the cache: nothing to
  // borrow for. The descriptor is not asked of other connectors: the optional
  // operation's arguments are the native connector's.
  if (writable || *driver != hdf5::FileDriver::kPosix || !IsNativeConnector(under_vol_id)) {
    keep.CallsSucceeded();
    return access;
  }
  void* handle = nullptr;
  H5VL_native_file_optional_args_t native{};
  native.get_vfd_handle.fapl_id = hdf5::DefaultFileAccessList();
  native.get_vfd_handle.file_handle = &handle;
  H5VL_optional_args_t args{H5VL_NATIVE_FILE_GET_VFD_HANDLE, &native};
  const hid_t dxpl = hdf5::DefaultTransferList();
  if (CallNativeOr<PRESCIENT_SLOT(file_cls.optional)>(
          NativeClassOf(under, under_vol_id),
          [&] { return H5VLfile_optional(under, under_vol_id, &args, dxpl, nullptr); }, under,
          &args, dxpl, nullptr) < 0) {
    return access;
  }
  keep.CallsSucceeded();
  // The POSIX driver's handle is its int descriptor.
  if (handle != nullptr) access.descriptor = *static_cast<const int*>(handle);
  return access;
}

// Whether HDF5 opened the file anew for this read-only open: its intent is
// read-only, so no handle of the process has it open for writing (HDF5 keeps
// one open per file, which a read-only open of a file open for writing
// shares, intent and unflushed writes included). False when it cannot tell.
bool OpenedAnewReadOnly(void* under, hid_t under_vol_id) noexcept {
  try {
    PreservedErrorStack keep;
    unsigned intent = hdf5::kFileReadWrite;
    H5VL_file_get_args_t args{};
    args.op_type = H5VL_FILE_GET_INTENT;
    args.args.get_intent.flags = &intent;
    const hid_t dxpl = hdf5::DefaultTransferList();
    if (CallNativeOr<PRESCIENT_SLOT(file_cls.get)>(
            NativeClassOf(under, under_vol_id),
            [&] { return H5VLfile_get(under, under_vol_id, &args, dxpl, nullptr); }, under, &args,
            dxpl, nullptr) < 0) {
      return false;
    }
    keep.CallsSucceeded();
    return (intent & hdf5::kFileReadWrite) == 0;
  } catch (...) {
    return false;
  }
}

// Whether the file is opened for writing: its contents change through this
// open. (A SWMR reader's file may change too, through another process's
// open: FileState::swmr_read.)
bool Writable(unsigned flags) {
  // The flags as constants: H5F_ACC_RDWR and the others call H5check_version
  // and H5open each (hdf5_ids.h).
  return (flags & (hdf5::kFileReadWrite | hdf5::kFileTruncate | hdf5::kFileExclusive |
                   hdf5::kFileCreate)) != 0;
}

void* WrapFile(void* under, hid_t under_vol_id, const char* name, unsigned flags, hid_t fapl_id,
               void** req) {
  WrapRequest(req, under_vol_id);
  const bool writable = Writable(flags);
  std::shared_ptr<FileState> state;
  try {
    Runtime::Get().stats().Add(Counter::kFilesOpened);
    const RawAccess raw = RawAccessOf(under, under_vol_id, fapl_id, writable);
    state = FileState::Make(name, writable, raw.readable, raw.descriptor);
    state->swmr_read = !writable && (flags & hdf5::kFileSwmrRead) != 0;
    if (!writable) {
      // Datasets this process wrote are served again once the file's writes
      // are behind it (written_datasets.h).
      WrittenDatasets::FileOpenedReadOnly(state->identity,
                                          [&] { return OpenedAnewReadOnly(under, under_vol_id); });
    }
    OpenFiles::Remember(state);
  } catch (...) {
    CloseUnder(under, under_vol_id, ObjectKind::kFile);
    throw;
  }
  return VolObject::WrapOpened(under, under_vol_id, ObjectKind::kFile, std::move(state));
}

}  // namespace

void* FileCreate(const char* name, unsigned flags, hid_t fcpl_id, hid_t fapl_id, hid_t dxpl_id,
                 void** req) {
  return Barrier("file_cls.create", [&]() -> void* {
    Trace("file_cls.create");
    Runtime::Get().options();  // parsed (and warned about) once, at the first file
    KeepHdf5DefaultPluginDirectories();
    UnderFapl under(fapl_id);
    void* file = H5VLfile_create(name, flags, fcpl_id, under.fapl(), dxpl_id, req);
    if (file == nullptr) return nullptr;
    return WrapFile(file, under.vol_id(), name, flags | hdf5::kFileCreate, fapl_id, req);
  });
}

void* FileOpen(const char* name, unsigned flags, hid_t fapl_id, hid_t dxpl_id, void** req) {
  return Barrier("file_cls.open", [&]() -> void* {
    Trace("file_cls.open");
    Runtime::Get().options();
    KeepHdf5DefaultPluginDirectories();
    UnderFapl under(fapl_id);
    void* file = nullptr;
    if (const H5VL_class_t* native = KnownNativeClass(under.vol_id());
        native != nullptr && native->file_cls.open != nullptr) {
      // The application's list as it is: HDF5 1.14's native open reads the
      // driver's and the file's properties from it and takes the file's
      // connector from the API context (H5F__set_vol_conn), never from the
      // list, so the under connector need not be set in it (11,000
      // instructions a file, RESULTS.md 2026-12-06).
      file = native->file_cls.open(name, flags, fapl_id, dxpl_id, req);
    } else {
      file = H5VLfile_open(name, flags, under.fapl(), dxpl_id, req);
    }
    if (file == nullptr) return nullptr;
    return WrapFile(file, under.vol_id(), name, flags, fapl_id, req);
  });
}

herr_t FileSpecific(void* obj, H5VL_file_specific_args_t* args, hid_t dxpl_id, void** req) {
  return Barrier("file_cls.specific", [&]() -> herr_t {
    Trace("file_cls.specific");
    if (args->op_type == H5VL_FILE_IS_ACCESSIBLE || args->op_type == H5VL_FILE_DELETE) {
      // No file object: the FAPL inside the arguments names us, not the under connector.
      hid_t& fapl = args->op_type == H5VL_FILE_IS_ACCESSIBLE ? args->args.is_accessible.fapl_id
                                                             : args->args.del.fapl_id;
      UnderFapl under(fapl);
      H5VL_file_specific_args_t under_args = *args;
      (under_args.op_type == H5VL_FILE_IS_ACCESSIBLE ? under_args.args.is_accessible.fapl_id
                                                     : under_args.args.del.fapl_id) = under.fapl();
      const herr_t status = H5VLfile_specific(nullptr, under.vol_id(), &under_args, dxpl_id, req);
      if (status >= 0) WrapRequest(req, under.vol_id());
      return status;
    }
    VolObject* file = VolObject::From(obj);
    H5VL_file_specific_args_t under_args = *args;
    if (args->op_type == H5VL_FILE_IS_EQUAL) {
      under_args.args.is_equal.obj2 = VolObject::From(args->args.is_equal.obj2)->under;
    }
    const herr_t status =
        H5VLfile_specific(file->under, file->under_vol_id, &under_args, dxpl_id, req);
    if (status < 0) return status;
    WrapRequest(req, file->under_vol_id);
    if (args->op_type == H5VL_FILE_REOPEN && *args->args.reopen.file != nullptr) {
      auto state = file->file;
      *args->args.reopen.file = VolObject::WrapOpened(*args->args.reopen.file, file->under_vol_id,
                                                      ObjectKind::kFile, std::move(state));
    }
    return status;
  });
}

herr_t FileClose(void* file, hid_t dxpl_id, void** req) {
  using Forward =
      Forwarder<"file_cls.close", H5VLfile_close, PRESCIENT_SLOT(file_cls.close), 1, Result::kClose,
                ObjectKind::kOther, ObjectsAt<0>, decltype(H5VL_file_class_t::close)>;
  // HDF5 closes its descriptor when the file's last object closes, which
  // Prescient does not see: the file's objects still open read through the
  // pool from here on.
  if (VolObject* object = VolObject::From(file); object != nullptr && object->file != nullptr) {
    object->file->hdf5_file.reset();
  }
  const herr_t status = Forward::Call(file, dxpl_id, req);
  // Forked DataLoader workers end with os._exit and never reach HDF5's
  // shutdown: closing a file is their last chance to leave statistics.
  Runtime::Get().FlushStats();
  return status;
}

}  // namespace prescient::vol
