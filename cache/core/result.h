// Status and Result<T>: the cache's error reporting. Every public entry point
// is noexcept and reports failure as a message meant for one user-facing
// warning (the VOL connector prints it and falls back to pass-through).
#ifndef PRESCIENT_CACHE_CORE_RESULT_H_
#define PRESCIENT_CACHE_CORE_RESULT_H_

#include <optional>
#include <string>
#include <utility>

namespace prescient::cache {

class Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return message_.empty(); }
  // Empty when ok().
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message)
      : message_(message.empty() ? std::string("unknown error") : std::move(message)) {}
  std::string message_;
};

// A value or an error message.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}       // NOLINT: implicit by design
  Result(Status error) : error_(std::move(error)) {}  // NOLINT: REQUIRES !error.ok()

  bool ok() const { return value_.has_value(); }
  // REQUIRES: ok().
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  // The error; OK when ok().
  const Status& status() const { return error_; }

 private:
  std::optional<T> value_;
  Status error_;
};

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_RESULT_H_
