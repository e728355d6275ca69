// The HDF5 filters this library undoes without HDF5, as one table. A chunked
// dataset whose every filter is here is read raw (pread + decode on the
// loader's threads); any other filter leaves its rows to HDF5.
//
//   id     filter                   undone by                 client data used
//   1      deflate (gzip)           libdeflate, else zlib     -
//   2      shuffle                  Unshuffle                 [0] element size
//   3      Fletcher-32 checksum     Fletcher32 (verified)     - (the last stage only)
//   307    bzip2 (PyTables's)       libbz2                    - (the level only)
//   32000  LZF (h5py's)             lzf.h                     -
//   32001  Blosc                    libblosc                  - (the header says all)
//   32026  Blosc2                   blosc2_frames.h           [2] element size, [7...] shape
//   32004  LZ4 (HDF5's registered)  liblz4                    - (the header says all)
//   32008  bitshuffle (+LZ4/zstd)   bitshuffle.h              [2] element size, [3] block, [4]
//   32015  Zstandard                libzstd                   -
//
// A filter whose library this build lacks (CMake options PRESCIENT_USE_LZ4,
// _ZSTD, _BLOSC, _BLOSC2, _BZIP2) is not undone here. Which filters HDF5 itself can apply is
// the caller's question (vol/ forwards what HDF5 has no plugin for, so that a
// read fails as it would natively).
#ifndef PRESCIENT_CACHE_IO_FILTER_CODECS_H_
#define PRESCIENT_CACHE_IO_FILTER_CODECS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "cache/io/raw_layout.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

inline constexpr int kFilterBzip2 = 307;
inline constexpr int kFilterBlosc = 32001;
inline constexpr int kFilterLz4 = 32004;
inline constexpr int kFilterZstd = 32015;
inline constexpr int kFilterBlosc2 = 32026;

using ClientData = std::span<const std::uint32_t>;

struct FilterCodec {
  int id = 0;
  std::string_view name;
  // OK when a stage with this client data, on elements of `element_size`
  // bytes, can be undone here; Unsupported saying why otherwise.
  Status (*check)(ClientData client_data, std::uint64_t element_size) = nullptr;
  // Whether the stage changes a chunk's size. A pipeline may hold one such
  // stage: every stage is undone into the chunk's decoded size.
  bool (*compresses)(ClientData client_data) = nullptr;
  // Undoes the stage: `in`, what the stage wrote, into exactly out.size()
  // bytes (not overlapping `in`). Corruption when `in` does not decode so.
  // Null for a checksum stage.
  Status (*decode)(std::span<const std::byte> in, ClientData client_data,
                   std::uint64_t element_size, std::span<std::byte> out) = nullptr;
  // A checksum stage appends checksum_bytes to what it was given: undoing it
  // is `verify` (Corruption on a mismatch, as HDF5 fails the read) and
  // dropping them, no copy. It must be the pipeline's last stage.
  std::size_t checksum_bytes = 0;
  Status (*verify)(std::span<const std::byte> in) = nullptr;
};

inline constexpr int kFilterFletcher32 = 3;

// HDF5's Fletcher-32 (H5_checksum_fletcher32): sums of big-endian 16-bit
// words, folded to 16 bits every 360 words, an odd last byte as a word's high
// byte.
std::uint32_t Fletcher32(std::span<const std::byte> data);

// The table's entry for a filter id, or nullptr when it is not undone here.
const FilterCodec* FindFilterCodec(int id);

// OK when every stage of `pipeline` is in the table, accepts its client data,
// at most one compresses and a checksum is the last stage; Unsupported,
// naming the stage, otherwise.
Status CheckRawDecodable(std::span<const Filter> pipeline, std::uint64_t element_size);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_FILTER_CODECS_H_
