// Undoes the bitshuffle filter (HDF5 filter 32008, the format of
// github.com/kiyo-masui/bitshuffle) on one stored chunk, without HDF5. It is
// how detectors (Dectris Eiger, Jungfrau, ...) and the software around them
// (hdf5plugin, the Debian package bitshuffle) store frames: bits regrouped so
// that a bit plane of many elements compresses, then optionally LZ4.
//
// The format. Elements are handled in blocks (client data [3] elements, a
// multiple of 8; 0 means 8 KiB worth). A block of n elements is stored as
// 8 x element_size bit rows of n / 8 bytes: row 8j + b holds bit b of byte j
// of every element, element e at bit e % 8 of byte e / 8. The last,
// shorter block is cut to a multiple of 8 elements, and the at most 7
// elements after it are stored as they are. Compressed (client data [4]: 2
// LZ4, 3 Zstandard) a chunk starts with its decoded size (8 bytes,
// big-endian) and the block size in bytes (4 bytes, big-endian), and each
// block is a 4-byte big-endian length and an LZ4 block (or a Zstandard frame)
// of the block's bitshuffled bytes; uncompressed (0), the blocks follow one
// another as they are.
//
// Thread-safe: no shared state; the caller's buffers only.
#ifndef PRESCIENT_CACHE_IO_BITSHUFFLE_H_
#define PRESCIENT_CACHE_IO_BITSHUFFLE_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/io/status.h"

namespace prescient::cache::io {

inline constexpr int kFilterBitshuffle = 32008;

// Whether the bitshuffle stage with `client_data` (H5Pget_filter2's) on a
// dataset of `element_size` can be undone here: OK, or Unsupported saying why
// (another element size, a block size not a multiple of 8, a compression
// whose library this build lacks).
Status CheckBitshuffle(std::span<const std::uint32_t> client_data, std::uint64_t element_size);

// Decodes one chunk's stored bytes into `out` (its decoded size). Corruption
// when the stored bytes do not decode to exactly out.size() bytes.
// REQUIRES: CheckBitshuffle(client_data, element_size) is OK.
Status Unbitshuffle(std::span<const std::byte> stored, std::span<const std::uint32_t> client_data,
                    std::uint64_t element_size, std::span<std::byte> out);

// The bitshuffle of one block of `elements` (a multiple of 8) elements, and
// its inverse: in and out of elements x element_size bytes, not overlapping.
void BitshuffleBlock(const std::byte* in, std::size_t elements, std::size_t element_size,
                     std::byte* out);
void UnbitshuffleBlock(const std::byte* in, std::size_t elements, std::size_t element_size,
                       std::byte* out);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_BITSHUFFLE_H_
