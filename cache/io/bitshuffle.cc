#include "cache/io/bitshuffle.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#if PRESCIENT_HAVE_LZ4
#include <lz4.h>
#endif

namespace prescient::cache::io {
namespace {

constexpr std::uint32_t kCompressNone = 0;
constexpr std::uint32_t kCompressLz4 = 2;
constexpr std::size_t kTargetBlockBytes = 8192;  // the format's default block
constexpr std::size_t kMinDefaultBlock = 128;
constexpr std::size_t kHeaderBytes = 12;

// A square of 8 x 8 bits in a word, byte r being row r (bit c its column),
// transposed: bit c of byte r goes to bit r of byte c. Three rounds swap
// ever larger blocks across the diagonal (1x1, 2x2, then 4x4 bits).
std::uint64_t Transpose8x8(std::uint64_t x) {
  std::uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

std::uint64_t ReadBigEndian(const std::byte* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<std::uint8_t>(p[i]);
  return value;
}

std::uint32_t Compression(std::span<const std::uint32_t> client_data) {
  return client_data.size() > 4 ? client_data[4] : kCompressNone;
}

std::size_t BlockElements(std::span<const std::uint32_t> client_data, std::size_t element_size) {
  if (client_data.size() > 3 && client_data[3] != 0) return client_data[3];
  const std::size_t block = kTargetBlockBytes / element_size / 8 * 8;
  return block > kMinDefaultBlock ? block : kMinDefaultBlock;
}

Status Damaged(const std::string& what) { return Status::Corruption("bitshuffle chunk: " + what); }

}  // namespace

void UnbitshuffleBlock(const std::byte* in, std::size_t elements, std::size_t element_size,
                       std::byte* out) {
  const std::size_t row = elements / 8;  // bytes of one bit row
  for (std::size_t group = 0; group < row; ++group) {
    for (std::size_t j = 0; j < element_size; ++j) {
      // Byte `group` of the 8 bit rows of byte j: bit b of byte j of the 8
      // elements of this group, as the rows of a square.
      std::uint64_t square = 0;
      for (std::size_t b = 0; b < 8; ++b) {
        square |= std::uint64_t{static_cast<std::uint8_t>(in[(8 * j + b) * row + group])}
                  << (8 * b);
      }
      square = Transpose8x8(square);
      for (std::size_t c = 0; c < 8; ++c) {
        out[(8 * group + c) * element_size + j] = static_cast<std::byte>(square >> (8 * c));
      }
    }
  }
}

void BitshuffleBlock(const std::byte* in, std::size_t elements, std::size_t element_size,
                     std::byte* out) {
  const std::size_t row = elements / 8;
  for (std::size_t group = 0; group < row; ++group) {
    for (std::size_t j = 0; j < element_size; ++j) {
      std::uint64_t square = 0;
      for (std::size_t c = 0; c < 8; ++c) {
        square |= std::uint64_t{static_cast<std::uint8_t>(in[(8 * group + c) * element_size + j])}
                  << (8 * c);
      }
      square = Transpose8x8(square);  // its own inverse
      for (std::size_t b = 0; b < 8; ++b) {
        out[(8 * j + b) * row + group] = static_cast<std::byte>(square >> (8 * b));
      }
    }
  }
}

Status CheckBitshuffle(std::span<const std::uint32_t> client_data, std::uint64_t element_size) {
  if (client_data.size() < 3 || client_data[2] != element_size) {
    return Status::Unsupported("bitshuffle filter without the dataset's element size (" +
                               std::to_string(element_size) + ") in its client data");
  }
  if (client_data.size() > 3 && client_data[3] % 8 != 0) {
    return Status::Unsupported("bitshuffle block size " + std::to_string(client_data[3]) +
                               " is not a multiple of 8");
  }
  switch (Compression(client_data)) {
    case kCompressNone:
      return Status();
    case kCompressLz4:
#if PRESCIENT_HAVE_LZ4
      return Status();
#else
      return Status::Unsupported("bitshuffle with LZ4, and this build has no LZ4 library");
#endif
    default:
      return Status::Unsupported("bitshuffle compression " +
                                 std::to_string(Compression(client_data)) +
                                 " (only none=0 and LZ4=2 are undone without HDF5)");
  }
}

Status Unbitshuffle(std::span<const std::byte> stored, std::span<const std::uint32_t> client_data,
                    std::uint64_t element_size, std::span<std::byte> out) {
  PRESCIENT_RETURN_IF_ERROR(CheckBitshuffle(client_data, element_size));
  const std::size_t size = static_cast<std::size_t>(element_size);
  if (out.size() % size != 0) return Damaged("decoded size not a whole number of elements");
  const std::size_t elements = out.size() / size;
  std::size_t block = BlockElements(client_data, size);
  const bool lz4 = Compression(client_data) == kCompressLz4;
  std::size_t at = 0;  // in `stored`
  if (lz4) {
    if (stored.size() < kHeaderBytes) return Damaged("shorter than its header");
    if (ReadBigEndian(stored.data(), 8) != out.size()) {
      return Damaged("decodes to " + std::to_string(ReadBigEndian(stored.data(), 8)) +
                     " bytes, expected " + std::to_string(out.size()));
    }
    const std::uint64_t block_bytes = ReadBigEndian(stored.data() + 8, 4);
    block = static_cast<std::size_t>(block_bytes / size);
    if (block == 0 || block % 8 != 0 || block_bytes % size != 0)
      return Damaged("block of " + std::to_string(block_bytes) + " bytes");
    at = kHeaderBytes;
  }
  // An LZ4 block decodes here first (one buffer per thread: no allocation per chunk).
  thread_local std::vector<std::byte> shuffled;
  if (lz4 && shuffled.size() < block * size) shuffled.resize(block * size);
  std::size_t done = 0;  // elements decoded
  while (elements - done >= 8) {
    const std::size_t n = std::min(block, (elements - done) / 8 * 8);
    const std::size_t bytes = n * size;
    const std::byte* block_in = nullptr;
    if (lz4) {
#if PRESCIENT_HAVE_LZ4
      if (stored.size() - at < 4) return Damaged("ends before a block's length");
      const std::uint64_t length = ReadBigEndian(stored.data() + at, 4);
      at += 4;
      if (length > stored.size() - at) return Damaged("a block runs past the chunk's end");
      const int produced = LZ4_decompress_safe(reinterpret_cast<const char*>(stored.data() + at),
                                               reinterpret_cast<char*>(shuffled.data()),
                                               static_cast<int>(length), static_cast<int>(bytes));
      if (produced < 0 || static_cast<std::size_t>(produced) != bytes)
        return Damaged("an LZ4 block does not decode to " + std::to_string(bytes) + " bytes");
      at += length;
      block_in = shuffled.data();
#endif
    } else {
      if (stored.size() - at < bytes) return Damaged("shorter than its elements");
      block_in = stored.data() + at;
      at += bytes;
    }
    UnbitshuffleBlock(block_in, n, size, out.data() + done * size);
    done += n;
  }
  // The last elements (fewer than 8) are stored as they are.
  const std::size_t tail = (elements - done) * size;
  if (stored.size() - at != tail) {
    return Damaged(std::to_string(stored.size() - at) + " bytes left for a tail of " +
                   std::to_string(tail));
  }
  if (tail > 0) std::memcpy(out.data() + done * size, stored.data() + at, tail);
  return Status();
}

}  // namespace prescient::cache::io
