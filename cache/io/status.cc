#include "cache/io/status.h"

#include <cstring>

namespace prescient::cache::io {
namespace {

const char* CodeName(Status::Code code) {
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
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

}  // namespace

Status Status::FromErrno(int err, std::string_view context) {
  char buffer[256];
  // strerror_r is the thread-safe form; the GNU variant may return a static string.
  const char* text = strerror_r(err, buffer, sizeof(buffer));
  std::string message(context);
  message += ": ";
  message += text;
  return Status(Code::kIoError, std::move(message));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace prescient::cache::io
