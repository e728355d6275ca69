#include "cache/io/pattern_source.h"

#include <algorithm>
#include <cstring>

namespace prescient::cache::io {

Result<std::unique_ptr<PatternSource>> PatternSource::Make(std::vector<std::byte> pattern,
                                                           std::uint64_t size, std::string name) {
  if (pattern.empty()) return Status::InvalidArgument(name + ": an empty pattern");
  return std::unique_ptr<PatternSource>(
      new PatternSource(std::move(pattern), size, std::move(name)));
}

Status PatternSource::ReadExact(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > size_ || out.size() > size_ - offset) {
    return Status::IoError(name_ + ": read of " + std::to_string(out.size()) + " bytes at " +
                           std::to_string(offset) + " past its end at " + std::to_string(size_));
  }
  const std::size_t period = pattern_.size();
  std::size_t phase = static_cast<std::size_t>(offset % period);
  std::size_t done = 0;
  while (done < out.size()) {
    const std::size_t n = std::min(period - phase, out.size() - done);
    std::memcpy(out.data() + done, pattern_.data() + phase, n);
    done += n;
    phase = 0;
  }
  return Status();
}

}  // namespace prescient::cache::io
