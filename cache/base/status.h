// Status and Result<T>: the one error type of cache/ (core and io).
//
// Every fallible function of the cache returns a Status or a Result<T>; nothing
// in cache/ throws across a public function (the libraries run underneath C code
// and on background threads). A Status is a code plus a message meant for one
// user-facing warning. It costs one pointer and no allocation when OK, so
// returning Status::Ok() on the hot path is free (leveldb's model).
//
// The codes cover both layers:
//   kInvalidArgument    the caller broke a documented precondition
//   kIoError            a system call failed or a file ended early
//   kCorruption         stored bytes (a chunk, a segment) cannot be trusted
//   kUnsupported        valid, but not something this path can do (load through HDF5)
//   kUnavailable        try again later: a lock timed out, a peer is stuck
//   kResourceExhausted  a full tmpfs, no free descriptor, no free slot
//   kInternal           a bug, or an exception caught at a thread boundary
//
// vol/ converts a Status once, at its boundary (the HDF5 error stack, one
// warning); inside cache/ a Status travels as it is, never through strings.
#ifndef PRESCIENT_CACHE_BASE_STATUS_H_
#define PRESCIENT_CACHE_BASE_STATUS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace prescient::cache {

class Status {
 public:
  enum class Code : unsigned char {
    kOk,
    kInvalidArgument,
    kIoError,
    kCorruption,
    kUnsupported,
    kUnavailable,
    kResourceExhausted,
    kInternal,
  };

  Status() noexcept = default;  // OK
  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() noexcept { return Status(); }
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
  static Status Unavailable(std::string message) {
    return Status(Code::kUnavailable, std::move(message));
  }
  static Status ResourceExhausted(std::string message) {
    return Status(Code::kResourceExhausted, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(Code::kInternal, std::move(message));
  }
  // `context` followed by ": " and strerror(err). The code follows errno:
  // ENOSPC, EDQUOT, ENOMEM, EMFILE, ENFILE -> kResourceExhausted; EAGAIN,
  // ETIMEDOUT, EBUSY -> kUnavailable; EINVAL -> kInvalidArgument; the rest
  // (ENOENT, EACCES, EIO, ...) -> kIoError.
  static Status FromErrno(int err, std::string_view context);

  bool ok() const noexcept { return rep_ == nullptr; }
  Code code() const noexcept { return rep_ ? rep_->code : Code::kOk; }
  // Empty when ok().
  const std::string& message() const noexcept;
  // "OK" or "<code name>: <message>" (logs and test failures).
  std::string ToString() const;
  // The same code with "<prefix>: " in front of the message (no-op when OK).
  Status Annotate(std::string_view prefix) const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  Status(Code code, std::string message);

  std::unique_ptr<Rep> rep_;  // null when OK
};

// The name of a code: "invalid argument", "I/O error", ...
const char* CodeName(Status::Code code) noexcept;

// Either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like absl::StatusOr
  // REQUIRES: !status.ok() (an OK status becomes kInternal).
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  // OK when ok().
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

}  // namespace prescient::cache

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define PRESCIENT_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::prescient::cache::Status prescient_status_ = (expr); \
    if (!prescient_status_.ok()) return prescient_status_; \
  } while (false)

#endif  // PRESCIENT_CACHE_BASE_STATUS_H_
