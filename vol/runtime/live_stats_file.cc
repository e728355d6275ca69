#include "vol/runtime/live_stats_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace prescient::vol {

LiveStatsFile::~LiveStatsFile() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

std::string LiveStatsFile::Open(const std::string& path, std::string text) {
  std::vector<std::size_t> offsets;
  const std::string marker = Marker();
  for (std::size_t at = text.find(marker); at != std::string::npos;
       at = text.find(marker, at + kWidth)) {
    offsets.push_back(at);
    text.replace(at, kWidth, std::string(kWidth - 1, ' ') + "0");
  }

  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  if (::ftruncate(fd, static_cast<off_t>(text.size())) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return "cannot size " + path + ": " + error;
  }
  void* map = ::mmap(nullptr, text.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return "cannot map " + path + ": " + std::strerror(errno);
  base_ = static_cast<char*>(map);
  size_ = text.size();
  std::memcpy(base_, text.data(), text.size());
  for (std::size_t offset : offsets) slots_.push_back(base_ + offset);
  return {};
}

void LiveStatsFile::Add(std::size_t index, std::uint64_t delta) {
  if (base_ == nullptr || index >= slots_.size() || delta == 0) return;
  // Decimal addition in place, from the last digit; a space is a 0 digit.
  char* slot = slots_[index];
  std::uint64_t carry = delta;
  for (std::size_t i = kWidth; i-- > 0 && carry != 0;) {
    const std::uint64_t digit = slot[i] == ' ' ? 0 : static_cast<std::uint64_t>(slot[i] - '0');
    const std::uint64_t sum = digit + carry % 10;
    carry = carry / 10 + sum / 10;
    slot[i] = static_cast<char>('0' + sum % 10);
  }
}

void LiveStatsFile::Set(std::size_t index, std::uint64_t value) {
  if (base_ == nullptr || index >= slots_.size()) return;
  char* slot = slots_[index];
  std::memset(slot, ' ', kWidth);
  std::size_t i = kWidth;
  do {
    slot[--i] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && i > 0);
}

void LiveStatsFile::Abandon() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  slots_.clear();
}

}  // namespace prescient::vol
