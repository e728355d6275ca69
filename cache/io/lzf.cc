#include "cache/io/lzf.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace prescient::cache::io {
namespace {

Status Damaged(const std::string& what) { return Status::Corruption("LZF stream: " + what); }

}  // namespace

Status LzfDecompress(std::span<const std::byte> in, std::span<std::byte> out) {
  std::size_t at = 0;       // in `in`
  std::size_t written = 0;  // in `out`
  while (at < in.size()) {
    const std::size_t control = static_cast<std::uint8_t>(in[at++]);
    if (control < 32) {
      const std::size_t length = control + 1;
      if (length > in.size() - at) return Damaged("a literal run past the stream's end");
      if (length > out.size() - written) return Damaged("decodes to more than the chunk");
      std::memcpy(out.data() + written, in.data() + at, length);
      at += length;
      written += length;
      continue;
    }
    std::size_t length = control >> 5;
    if (length == 7) {
      if (at == in.size()) return Damaged("ends inside a reference");
      length += static_cast<std::uint8_t>(in[at++]);
    }
    if (at == in.size()) return Damaged("ends inside a reference");
    const std::size_t distance = ((control & 31) << 8) + static_cast<std::uint8_t>(in[at++]) + 1;
    length += 2;
    if (distance > written) return Damaged("a reference before the start of the chunk");
    if (length > out.size() - written) return Damaged("decodes to more than the chunk");
    // Byte by byte: a reference closer than its length repeats what it copies.
    std::byte* to = out.data() + written;
    const std::byte* from = to - distance;
    for (std::size_t i = 0; i < length; ++i) to[i] = from[i];
    written += length;
  }
  if (written != out.size()) {
    return Damaged("decodes to " + std::to_string(written) + " bytes, expected " +
                   std::to_string(out.size()));
  }
  return Status();
}

}  // namespace prescient::cache::io
