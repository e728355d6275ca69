// Errors at the boundary between Prescient's C++ and HDF5's C.
//
// No C++ exception may unwind through HDF5's frames. Every callback body runs
// inside Barrier(): an exception becomes an entry on the HDF5 error stack,
// under Prescient's own error class, and the callback returns HDF5's failure
// value. Errors pushed by the connector underneath stay on the stack
// untouched, because h5py maps the innermost HDF5 error to the Python
// exception type (FileNotFoundError, FileExistsError, ...).
#ifndef PRESCIENT_VOL_RUNTIME_ERROR_H_
#define PRESCIENT_VOL_RUNTIME_ERROR_H_

#include <exception>
#include <string_view>
#include <type_traits>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

// Registers / unregisters Prescient's HDF5 error class (connector init/term).
void RegisterErrorClass();
void UnregisterErrorClass();

// Pushes one message onto the current HDF5 error stack.
void PushError(std::string_view where, std::string_view message);

// HDF5's failure value for a callback returning T.
template <typename T>
constexpr T FailureValue() {
  if constexpr (std::is_pointer_v<T>) {
    return nullptr;
  } else {
    return static_cast<T>(-1);
  }
}

// Runs body() and converts any exception into a pushed error + failure value.
template <typename Body>
auto Barrier(std::string_view where, Body&& body) noexcept -> decltype(body()) {
  using Result = decltype(body());
  try {
    return body();
  } catch (const std::exception& e) {
    PushError(where, e.what());
  } catch (...) {
    PushError(where, "unknown exception");
  }
  return FailureValue<Result>();
}

// Saves the current error stack and puts it back on destruction. Public HDF5
// API calls clear the stack on entry, so cleanup after a failed forwarded call
// (closing a property list, dropping a reference) must run inside one of these
// or the under connector's error report is lost.
//
// An empty stack (cleanup after calls that succeeded: every wrap context HDF5
// frees, every object closed) is not copied, which costs as much as a small
// dataset read; it is only emptied again if the cleanup left errors on it.
// H5Eget_num does not clear the stack.
class PreservedErrorStack {
 public:
  PreservedErrorStack()
      : saved_(H5Eget_num(H5E_DEFAULT) > 0 ? H5Eget_current_stack() : H5I_INVALID_HID) {}
  ~PreservedErrorStack() {
    if (saved_ >= 0) {
      H5Eset_current_stack(saved_);
    } else if (!calls_succeeded_ && H5Eget_num(H5E_DEFAULT) > 0) {
      H5Eclear2(H5E_DEFAULT);
    }
  }
  // Every HDF5 call made in this scope succeeded, so an empty stack is still
  // empty and the destructor need not look: one locked library entry less,
  // for scopes entered at every open of a dataset.
  void CallsSucceeded() { calls_succeeded_ = true; }
  PreservedErrorStack(const PreservedErrorStack&) = delete;
  PreservedErrorStack& operator=(const PreservedErrorStack&) = delete;

 private:
  hid_t saved_;
  bool calls_succeeded_ = false;
};

// Turns off HDF5's printing of errors for the calling thread (thread-safe
// builds keep the setting per thread) and puts the caller's setting back on
// destruction. For HDF5 calls the connector makes on its own behalf, whose
// failure is an answer (a dataset a file does not have), not the
// application's error: a new thread prints every failed call's stack to
// stderr by default, so the prefetch thread that looked for a label dataset
// in a file of images printed about 30 lines of "HDF5-DIAG" into the job's
// output (tests/python/follow/test_follow.py, shape "pairs").
class QuietErrorPrinting {
 public:
  QuietErrorPrinting()
      : restore_(H5Eget_auto2(H5E_DEFAULT, &function_, &data_) >= 0 &&
                 H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0) {}
  ~QuietErrorPrinting() {
    if (restore_) H5Eset_auto2(H5E_DEFAULT, function_, data_);
  }
  QuietErrorPrinting(const QuietErrorPrinting&) = delete;
  QuietErrorPrinting& operator=(const QuietErrorPrinting&) = delete;

 private:
  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
  bool restore_ = false;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_ERROR_H_
