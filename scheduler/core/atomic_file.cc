#include "scheduler/core/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "scheduler/core/schedule_file.h"

namespace prescient::scheduler {

AtomicFile::AtomicFile(const std::string& path, const char* what_file)
    : path_(path), tmp_(path + ".tmp-" + std::to_string(::getpid())), what_file_(what_file) {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr) Fail("cannot create");
}

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::Write(std::span<const std::byte> bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    Fail("cannot write");
  }
}

void AtomicFile::Pad(std::uint64_t n) {
  static constexpr std::byte kZeros[8] = {};
  Write(std::span(kZeros, n));
}

void AtomicFile::Commit() {
  FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    std::remove(tmp_.c_str());
    Fail("cannot finish");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    Fail("cannot rename into place");
  }
}

void AtomicFile::Fail(const char* what) {
  throw ScheduleFileError(
      ScheduleFileErrorCode::kIo,
      std::string(what_file_) + " '" + path_ + "': " + what + ": " + std::strerror(errno));
}

}  // namespace prescient::scheduler
