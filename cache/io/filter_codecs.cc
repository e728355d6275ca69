#include "cache/io/filter_codecs.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "cache/io/bitshuffle.h"
#include "cache/io/block_codecs.h"
#include "cache/io/blosc2_frames.h"
#include "cache/io/chunk_decoder.h"
#include "cache/io/lzf.h"

#ifndef PRESCIENT_HAVE_BLOSC
#define PRESCIENT_HAVE_BLOSC 0
#endif
#if PRESCIENT_HAVE_BLOSC
#include <blosc.h>
#endif

namespace prescient::cache::io {
namespace {

Status AnyClientData(ClientData, std::uint64_t) { return Status(); }
bool Always(ClientData) { return true; }
bool Never(ClientData) { return false; }

// deflate (1): a zlib stream.
Status DecodeDeflate(std::span<const std::byte> in, ClientData, std::uint64_t,
                     std::span<std::byte> out) {
  return Inflate(in, out);
}

// shuffle (2): HDF5 records the element size it shuffled by in client data [0].
Status CheckShuffle(ClientData client_data, std::uint64_t element_size) {
  if (!client_data.empty() && client_data[0] != element_size) {
    return Status::Unsupported("shuffle filter with element size " +
                               std::to_string(client_data[0]) + " on a dataset of element size " +
                               std::to_string(element_size));
  }
  return Status();
}

Status DecodeShuffle(std::span<const std::byte> in, ClientData, std::uint64_t element_size,
                     std::span<std::byte> out) {
  if (in.size() != out.size()) {
    return Status::Corruption("shuffled chunk has " + std::to_string(in.size()) +
                              " bytes, expected " + std::to_string(out.size()));
  }
  Unshuffle(in, static_cast<std::size_t>(element_size), out);
  return Status();
}

// Fletcher-32 (3): the checksum of the bytes before it, stored little-endian.
// HDF5 before 1.6.3 stored it with the bytes of each 16-bit half swapped on
// little-endian hosts, and HDF5 accepts either still.
Status VerifyFletcher32(std::span<const std::byte> in) {
  if (in.size() < 4) return Status::Corruption("Fletcher-32 chunk shorter than its checksum");
  const std::uint32_t sum = Fletcher32(in.first(in.size() - 4));
  std::uint32_t stored = 0;
  for (int i = 3; i >= 0; --i)
    stored = (stored << 8) | static_cast<std::uint8_t>(in[in.size() - 4 + i]);
  const std::uint32_t swapped = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
  if (stored != sum && stored != swapped) {
    return Status::Corruption("data error detected by the Fletcher-32 checksum");
  }
  return Status();
}

// bitshuffle (32008): compressed when client data [4] names a codec.
bool BitshuffleCompresses(ClientData client_data) {
  return client_data.size() > 4 && client_data[4] != 0;
}

Status DecodeBitshuffle(std::span<const std::byte> in, ClientData client_data,
                        std::uint64_t element_size, std::span<std::byte> out) {
  return Unbitshuffle(in, client_data, element_size, out);
}

// LZF (32000): the stream alone.
Status DecodeLzf(std::span<const std::byte> in, ClientData, std::uint64_t,
                 std::span<std::byte> out) {
  return LzfDecompress(in, out);
}

// LZ4 (32004), the format of HDF5's registered LZ4 filter: the decoded size
// (8 bytes, big-endian), the block size (4 bytes, big-endian; the last block
// may be shorter), then per block a 4-byte big-endian stored length and the
// block: stored as it is when that length is the block's, else an LZ4 block.
// Bytes after the last block are ignored, as the reference filter does.
Status DecodeHdf5Lz4(std::span<const std::byte> in, ClientData, std::uint64_t,
                     std::span<std::byte> out) {
  constexpr std::size_t kHeader = 12;
  auto damaged = [](const std::string& what) { return Status::Corruption("LZ4 chunk: " + what); };
  if (in.size() < kHeader) return damaged("shorter than its header");
  const std::uint64_t decoded = ReadBigEndian(in.data(), 8);
  if (decoded != out.size()) {
    return damaged("decodes to " + std::to_string(decoded) + " bytes, expected " +
                   std::to_string(out.size()));
  }
  const std::uint64_t block = std::min<std::uint64_t>(ReadBigEndian(in.data() + 8, 4), decoded);
  if (block == 0 && decoded > 0) return damaged("a block size of 0");
  std::size_t at = kHeader;
  for (std::size_t done = 0; done < out.size();) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(block, out.size() - done));
    if (in.size() - at < 4) return damaged("ends before a block's length");
    const std::uint64_t length = ReadBigEndian(in.data() + at, 4);
    at += 4;
    if (length > in.size() - at) return damaged("a block runs past the chunk's end");
    const std::span<std::byte> target = out.subspan(done, n);
    if (length == n) {
      std::memcpy(target.data(), in.data() + at, n);
    } else {
      PRESCIENT_RETURN_IF_ERROR(DecodeLz4Block(in.subspan(at, length), target));
    }
    at += length;
    done += n;
  }
  return Status();
}

// Zstandard (32015): one frame.
Status DecodeZstd(std::span<const std::byte> in, ClientData, std::uint64_t,
                  std::span<std::byte> out) {
  return DecodeZstdFrame(in, out);
}

// bzip2 (307, PyTables's and hdf5plugin's): one bzip2 stream; client data
// [0] is the level it was compressed at, which decoding does not need.
Status DecodeBzip2(std::span<const std::byte> in, ClientData, std::uint64_t,
                   std::span<std::byte> out) {
  return DecodeBzip2Stream(in, out);
}

#if PRESCIENT_HAVE_BLOSC
// Blosc (32001): one Blosc buffer, whose header gives its sizes, its internal
// shuffle and its codec. Decoded on the calling thread (no Blosc threads, no
// global context).
Status DecodeBlosc(std::span<const std::byte> in, ClientData, std::uint64_t,
                   std::span<std::byte> out) {
  std::size_t decoded = 0;
  if (blosc_cbuffer_validate(in.data(), in.size(), &decoded) != 0) {
    return Status::Corruption("Blosc chunk: a header that does not fit its " +
                              std::to_string(in.size()) + " bytes");
  }
  if (decoded != out.size()) {
    return Status::Corruption("Blosc chunk: decodes to " + std::to_string(decoded) +
                              " bytes, expected " + std::to_string(out.size()));
  }
  const int produced = blosc_decompress_ctx(in.data(), out.data(), out.size(), 1);
  if (produced < 0 || static_cast<std::size_t>(produced) != out.size()) {
    return Status::Corruption(
        "Blosc chunk: damaged, or compressed by a codec this libblosc lacks"
        " (blosc_decompress_ctx " +
        std::to_string(produced) + ")");
  }
  return Status();
}
#endif

Status NeedsLz4(ClientData, std::uint64_t) {
  return Lz4Available() ? Status() : Status::Unsupported("this build has no LZ4 library");
}

Status NeedsZstd(ClientData, std::uint64_t) {
  return ZstdAvailable() ? Status() : Status::Unsupported("this build has no Zstandard library");
}

// Blosc2 (32026): client data [2] is the element size the frames were made
// for, [3] the chunk's size; fewer than 4 values and the reference filter
// fails the read, which HDF5 then does.
Status CheckBlosc2(ClientData client_data, std::uint64_t element_size) {
  if (!Blosc2Available()) return Status::Unsupported("this build has no Blosc2 library");
  if (client_data.size() < 4) {
    return Status::Unsupported("Blosc2 filter with " + std::to_string(client_data.size()) +
                               " client data values (the filter needs 4)");
  }
  if (client_data[2] != element_size) {
    return Status::Unsupported("Blosc2 filter for elements of " + std::to_string(client_data[2]) +
                               " bytes on a dataset of element size " +
                               std::to_string(element_size));
  }
  return Status();
}

Status DecodeBlosc2(std::span<const std::byte> in, ClientData client_data, std::uint64_t,
                    std::span<std::byte> out) {
  return DecodeBlosc2Frame(in, client_data, out);
}

Status NeedsBzip2(ClientData, std::uint64_t) {
  return Bzip2Available() ? Status() : Status::Unsupported("this build has no bzip2 library");
}

const auto kCodecs = std::to_array<FilterCodec>({
    {kFilterDeflate, "deflate", AnyClientData, Always, DecodeDeflate},
    {kFilterShuffle, "shuffle", CheckShuffle, Never, DecodeShuffle},
    {kFilterFletcher32, "fletcher32", AnyClientData, Never, nullptr, 4, VerifyFletcher32},
    {kFilterBzip2, "bzip2", NeedsBzip2, Always, DecodeBzip2},
    {kFilterLzf, "lzf", AnyClientData, Always, DecodeLzf},
#if PRESCIENT_HAVE_BLOSC
    {kFilterBlosc, "blosc", AnyClientData, Always, DecodeBlosc},
#endif
    {kFilterLz4, "lz4", NeedsLz4, Always, DecodeHdf5Lz4},
    {kFilterBitshuffle, "bitshuffle", CheckBitshuffle, BitshuffleCompresses, DecodeBitshuffle},
    {kFilterZstd, "zstd", NeedsZstd, Always, DecodeZstd},
    {kFilterBlosc2, "blosc2", CheckBlosc2, Always, DecodeBlosc2},
});

std::string TableNames() {
  std::string names;
  for (const FilterCodec& codec : kCodecs) {
    if (!names.empty()) names += ", ";
    names += std::string(codec.name) + "=" + std::to_string(codec.id);
  }
  return names;
}

}  // namespace

std::uint32_t Fletcher32(std::span<const std::byte> data) {
  std::uint32_t sum1 = 0;
  std::uint32_t sum2 = 0;
  auto fold = [](std::uint32_t sum) { return (sum & 0xffffu) + (sum >> 16); };
  std::size_t words = data.size() / 2;
  const std::byte* p = data.data();
  // 360 words is the most that can be summed before sum2 could overflow.
  while (words > 0) {
    const std::size_t n = std::min<std::size_t>(words, 360);
    words -= n;
    for (std::size_t i = 0; i < n; ++i, p += 2) {
      sum1 +=
          (std::uint32_t{static_cast<std::uint8_t>(p[0])} << 8) | static_cast<std::uint8_t>(p[1]);
      sum2 += sum1;
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  if (data.size() % 2 != 0) {
    sum1 += std::uint32_t{static_cast<std::uint8_t>(*p)} << 8;
    sum2 += sum1;
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  sum1 = fold(sum1);
  sum2 = fold(sum2);
  return (sum2 << 16) | sum1;
}

const FilterCodec* FindFilterCodec(int id) {
  for (const FilterCodec& codec : kCodecs) {
    if (codec.id == id) return &codec;
  }
  return nullptr;
}

Status CheckRawDecodable(std::span<const Filter> pipeline, std::uint64_t element_size) {
  const Filter* compressor = nullptr;
  for (std::size_t i = 0; i < pipeline.size(); ++i) {
    const Filter& filter = pipeline[i];
    const FilterCodec* codec = FindFilterCodec(filter.id);
    if (codec == nullptr) {
      return Status::Unsupported(
          "filter id " + std::to_string(filter.id) + " at pipeline stage " + std::to_string(i) +
          " cannot be decoded without HDF5 (this build undoes " + TableNames() + ")");
    }
    if (Status accepted = codec->check(filter.client_data, element_size); !accepted.ok()) {
      return Status::Unsupported(std::string(codec->name) + " (filter " +
                                 std::to_string(filter.id) + ") at pipeline stage " +
                                 std::to_string(i) + ": " + accepted.message());
    }
    if (codec->checksum_bytes > 0 && i + 1 != pipeline.size()) {
      return Status::Unsupported(std::string(codec->name) + " (filter " +
                                 std::to_string(filter.id) + ") at pipeline stage " +
                                 std::to_string(i) + ", not the last");
    }
    if (codec->compresses(filter.client_data)) {
      if (compressor != nullptr) {
        return Status::Unsupported("two compressing stages (filters " +
                                   std::to_string(compressor->id) + " and " +
                                   std::to_string(filter.id) + ") in one pipeline");
      }
      compressor = &filter;
    }
  }
  return Status();
}

}  // namespace prescient::cache::io
