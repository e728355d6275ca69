#include "cache/base/status.h"

#include <cerrno>
#include <cstring>

namespace prescient::cache {
namespace {

Status::Code CodeOfErrno(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return Status::Code::kResourceExhausted;
    case EAGAIN:
    case ETIMEDOUT:
    case EBUSY:
      return Status::Code::kUnavailable;
    case EINVAL:
      return Status::Code::kInvalidArgument;
    default:
      return Status::Code::kIoError;
  }
}

}  // namespace

Status::Status(Code code, std::string message)
    : rep_(code == Code::kOk ? nullptr
                             : std::make_unique<Rep>(Rep{
                                   code, message.empty() ? "unknown error" : std::move(message)})) {
}

const std::string& Status::message() const noexcept {
  static const std::string* const kEmpty = new std::string();
  return rep_ ? rep_->message : *kEmpty;
}

const char* CodeName(Status::Code code) noexcept {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kIoError:
      return "I/O error";
    case Status::Code::kCorruption:
      return "corruption";
    case Status::Code::kUnsupported:
      return "unsupported";
    case Status::Code::kUnavailable:
      return "unavailable";
    case Status::Code::kResourceExhausted:
      return "resource exhausted";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status Status::FromErrno(int err, std::string_view context) {
  char buffer[256];
  // strerror_r is the thread-safe form; the GNU variant may return a static string.
  const char* text = strerror_r(err, buffer, sizeof(buffer));
  std::string message(context);
  message += ": ";
  message += text;
  return Status(CodeOfErrno(err), std::move(message));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(rep_->code)) + ": " + rep_->message;
}

Status Status::Annotate(std::string_view prefix) const {
  if (ok()) return Status();
  return Status(rep_->code, std::string(prefix) + ": " + rep_->message);
}

}  // namespace prescient::cache
