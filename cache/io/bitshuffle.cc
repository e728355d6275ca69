#include "cache/io/bitshuffle.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cache/io/block_codecs.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace prescient::cache::io {
namespace {

constexpr std::uint32_t kCompressNone = 0;
constexpr std::uint32_t kCompressLz4 = 2;
constexpr std::uint32_t kCompressZstd = 3;
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

namespace {

// Groups [first, row) of a block, one 8 x 8 bit square at a time.
void UnbitshuffleGroups(const std::byte* in, std::size_t row, std::size_t element_size,
                        std::size_t first, std::byte* out) {
  for (std::size_t group = first; group < row; ++group) {
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

#if defined(__SSE2__)
// SSE2 (every x86-64 CPU) does 16 groups (128 elements) at a time: the 8 bit
// rows' 16 bytes are interleaved into 16 squares, two to a register, which
// are transposed as Transpose8x8 does, lane by lane. About 3x the scalar
// loop's speed, which matters because a detector frame's decode is mostly
// this (RESULTS.md, "Bitshuffle+LZ4 chunks").
constexpr std::size_t kGroupsPerStep = 16;

__m128i Load(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
void Store(std::byte* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

__m128i Transpose8x8Lanes(__m128i x) {
  const __m128i m1 = _mm_set1_epi64x(0x00AA00AA00AA00AAll);
  const __m128i m2 = _mm_set1_epi64x(0x0000CCCC0000CCCCll);
  const __m128i m3 = _mm_set1_epi64x(0x00000000F0F0F0F0ll);
  __m128i t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 7)), m1);
  x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 7)));
  t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 14)), m2);
  x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 14)));
  t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 28)), m3);
  return _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 28)));
}

// Byte j of the 128 elements of groups [first, first + 16), in element
// order, into bytes[0, 128).
void UntransposeByte(const std::byte* in, std::size_t row, std::size_t j, std::size_t first,
                     std::byte* bytes) {
  __m128i r[8];
  for (std::size_t b = 0; b < 8; ++b) r[b] = Load(in + (8 * j + b) * row + first);
  // Rows 2p and 2p + 1 side by side: groups 0-7 in t[2p], 8-15 in t[2p + 1].
  __m128i t[8];
  for (std::size_t p = 0; p < 4; ++p) {
    t[2 * p] = _mm_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    t[2 * p + 1] = _mm_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  // Rows 0-3 of groups 4q..4q+3 in u[q], rows 4-7 in u[q + 4].
  const __m128i u[8] = {
      _mm_unpacklo_epi16(t[0], t[2]), _mm_unpackhi_epi16(t[0], t[2]),
      _mm_unpacklo_epi16(t[1], t[3]), _mm_unpackhi_epi16(t[1], t[3]),
      _mm_unpacklo_epi16(t[4], t[6]), _mm_unpackhi_epi16(t[4], t[6]),
      _mm_unpacklo_epi16(t[5], t[7]), _mm_unpackhi_epi16(t[5], t[7]),
  };
  for (std::size_t q = 0; q < 4; ++q) {
    // A group's 8 rows in one 64-bit lane: its square, byte b being row b.
    Store(bytes + 32 * q, Transpose8x8Lanes(_mm_unpacklo_epi32(u[q], u[q + 4])));
    Store(bytes + 32 * q + 16, Transpose8x8Lanes(_mm_unpackhi_epi32(u[q], u[q + 4])));
  }
}

// 16 elements from their bytes: byte j of element e is in[j][e]. Each
// unpack pairs runs of neighbouring bytes into runs twice as long, keeping
// element order (lo: the first 8 runs, hi: the last 8).
void Interleave2(const __m128i* in, std::byte* out) {
  Store(out, _mm_unpacklo_epi8(in[0], in[1]));
  Store(out + 16, _mm_unpackhi_epi8(in[0], in[1]));
}

void Interleave4(const __m128i* in, std::byte* out) {
  const __m128i lo01 = _mm_unpacklo_epi8(in[0], in[1]);  // elements 0-7, bytes 0-1
  const __m128i hi01 = _mm_unpackhi_epi8(in[0], in[1]);  // elements 8-15
  const __m128i lo23 = _mm_unpacklo_epi8(in[2], in[3]);
  const __m128i hi23 = _mm_unpackhi_epi8(in[2], in[3]);
  Store(out, _mm_unpacklo_epi16(lo01, lo23));  // elements 0-3, bytes 0-3
  Store(out + 16, _mm_unpackhi_epi16(lo01, lo23));
  Store(out + 32, _mm_unpacklo_epi16(hi01, hi23));
  Store(out + 48, _mm_unpackhi_epi16(hi01, hi23));
}

void Interleave8(const __m128i* in, std::byte* out) {
  __m128i pairs[2][4];  // [elements 0-7 | 8-15][bytes 2p, 2p + 1]
  for (std::size_t p = 0; p < 4; ++p) {
    pairs[0][p] = _mm_unpacklo_epi8(in[2 * p], in[2 * p + 1]);
    pairs[1][p] = _mm_unpackhi_epi8(in[2 * p], in[2 * p + 1]);
  }
  for (std::size_t half = 0; half < 2; ++half) {
    const __m128i* q = pairs[half];
    const __m128i lo0123 = _mm_unpacklo_epi16(q[0], q[1]);  // elements 0-3, bytes 0-3
    const __m128i hi0123 = _mm_unpackhi_epi16(q[0], q[1]);  // elements 4-7, bytes 0-3
    const __m128i lo4567 = _mm_unpacklo_epi16(q[2], q[3]);  // elements 0-3, bytes 4-7
    const __m128i hi4567 = _mm_unpackhi_epi16(q[2], q[3]);
    std::byte* to = out + 64 * half;
    Store(to, _mm_unpacklo_epi32(lo0123, lo4567));  // elements 0-1, bytes 0-7
    Store(to + 16, _mm_unpackhi_epi32(lo0123, lo4567));
    Store(to + 32, _mm_unpacklo_epi32(hi0123, hi4567));
    Store(to + 48, _mm_unpackhi_epi32(hi0123, hi4567));
  }
}

// The 128 elements from their bytes (bytes[j] holding byte j of each), for
// elements of 2, 4 or 8 bytes.
void InterleaveBytes(const std::byte (*bytes)[128], std::size_t element_size, std::byte* out) {
  for (std::size_t v = 0; v < 8; ++v) {  // 16 elements at a time
    __m128i in[8];
    for (std::size_t j = 0; j < element_size; ++j) in[j] = Load(bytes[j] + 16 * v);
    std::byte* to = out + 16 * v * element_size;
    if (element_size == 2) {
      Interleave2(in, to);
    } else if (element_size == 4) {
      Interleave4(in, to);
    } else {
      Interleave8(in, to);
    }
  }
}
#endif

}  // namespace

void UnbitshuffleBlock(const std::byte* in, std::size_t elements, std::size_t element_size,
                       std::byte* out) {
  const std::size_t row = elements / 8;  // bytes of one bit row
  std::size_t group = 0;
#if defined(__SSE2__)
  if (element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8) {
    alignas(16) std::byte bytes[8][128];
    for (; group + kGroupsPerStep <= row; group += kGroupsPerStep) {
      std::byte* elements_out = out + 8 * group * element_size;
      if (element_size == 1) {
        UntransposeByte(in, row, 0, group, elements_out);
        continue;
      }
      for (std::size_t j = 0; j < element_size; ++j) UntransposeByte(in, row, j, group, bytes[j]);
      InterleaveBytes(bytes, element_size, elements_out);
    }
  }
#endif
  UnbitshuffleGroups(in, row, element_size, group, out);
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
      if (Lz4Available()) return Status();
      return Status::Unsupported("bitshuffle with LZ4, and this build has no LZ4 library");
    case kCompressZstd:
      if (ZstdAvailable()) return Status();
      return Status::Unsupported(
          "bitshuffle with Zstandard, and this build has no Zstandard library");
    default:
      return Status::Unsupported("bitshuffle compression " +
                                 std::to_string(Compression(client_data)) +
                                 " (only none=0, LZ4=2 and Zstandard=3 are undone without HDF5)");
  }
}

Status Unbitshuffle(std::span<const std::byte> stored, std::span<const std::uint32_t> client_data,
                    std::uint64_t element_size, std::span<std::byte> out) {
  PRESCIENT_RETURN_IF_ERROR(CheckBitshuffle(client_data, element_size));
  const std::size_t size = static_cast<std::size_t>(element_size);
  if (out.size() % size != 0) return Damaged("decoded size not a whole number of elements");
  const std::size_t elements = out.size() / size;
  std::size_t block = BlockElements(client_data, size);
  const std::uint32_t compression = Compression(client_data);
  const bool compressed = compression != kCompressNone;
  std::size_t at = 0;  // in `stored`
  if (compressed) {
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
  // A compressed block decodes here first (one buffer per thread: no allocation per chunk),
  // no larger than the chunk (a damaged header may name a block of 4 GiB).
  thread_local std::vector<std::byte> shuffled;
  const std::size_t largest = std::min(block, elements / 8 * 8) * size;
  if (compressed && shuffled.size() < largest) shuffled.resize(largest);
  std::size_t done = 0;  // elements decoded
  while (elements - done >= 8) {
    const std::size_t n = std::min(block, (elements - done) / 8 * 8);
    const std::size_t bytes = n * size;
    const std::byte* block_in = nullptr;
    if (compressed) {
      if (stored.size() - at < 4) return Damaged("ends before a block's length");
      const std::uint64_t length = ReadBigEndian(stored.data() + at, 4);
      at += 4;
      if (length > stored.size() - at) return Damaged("a block runs past the chunk's end");
      const std::span<const std::byte> packed = stored.subspan(at, length);
      const std::span<std::byte> unpacked(shuffled.data(), bytes);
      const Status status = compression == kCompressLz4 ? DecodeLz4Block(packed, unpacked)
                                                        : DecodeZstdFrame(packed, unpacked);
      if (!status.ok()) return Damaged(status.message());
      at += length;
      block_in = shuffled.data();
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
