// Status and Result<T>: how cache/io reports expected failures (I/O errors,
// corrupt chunks, unsupported filters) as values.
//
// The I/O library runs on background threads and underneath C code (HDF5), so
// nothing in it throws across a public function: every fallible call returns a
// Status or a Result. A Status is cheap when OK and carries a code plus a
// human-readable message (with errno text for system errors) otherwise.
#ifndef PRESCIENT_CACHE_IO_STATUS_H_
#define PRESCIENT_CACHE_IO_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace prescient::cache::io {

class Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,  // the caller's input breaks a documented precondition
    kIoError,          // a system call failed or the file ended early
    kCorruption,       // stored bytes cannot be decoded (bad deflate stream, wrong size)
    kUnsupported,      // valid, but not something raw I/O can do: load through HDF5
    kInternal,         // a bug or an exception caught at a thread boundary
  };

  Status() = default;  // OK

  static Status InvalidArgument(std::string message) {
    return Status(Code::kInvalidArgument, std::move(message));
  }
  static Status IoError(std::string message) { return Status(Code::kIoError, std::move(message)); }
  static Status Corruption(std::string message) {
    return Status(Code::kCorruption, std::move(message));
  }
  static Status Unsupported(std::string message) {
    return Status(Code::kUnsupported, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(Code::kInternal, std::move(message));
  }
  // An I/O error whose message is `context` followed by strerror(err).
  static Status FromErrno(int err, std::string_view context);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "<code name>: <message>".
  std::string ToString() const;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like absl::StatusOr
  // REQUIRES: !status.ok().
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace prescient::cache::io

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define PRESCIENT_IO_RETURN_IF_ERROR(expr)                        \
  do {                                                            \
    ::prescient::cache::io::Status prescient_io_status_ = (expr); \
    if (!prescient_io_status_.ok()) return prescient_io_status_;  \
  } while (false)

#endif  // PRESCIENT_CACHE_IO_STATUS_H_
