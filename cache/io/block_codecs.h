// The general-purpose compressors HDF5 filters wrap (LZ4 blocks, Zstandard
// frames, bzip2 streams), each decoding one whole buffer of known decoded
// size. They are built in when CMake finds the library (liblz4, libzstd,
// libbz2); without one, its
// `...Available()` is false and the filters that need it are left to HDF5.
//
// Thread-safe: each call is independent (Zstandard's context is one per
// thread, kept for the thread's life: no allocation per chunk).
#ifndef PRESCIENT_CACHE_IO_BLOCK_CODECS_H_
#define PRESCIENT_CACHE_IO_BLOCK_CODECS_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/io/status.h"

namespace prescient::cache::io {

// The unsigned big-endian integer of `bytes` (at most 8) bytes at `p`: the
// sizes the filter formats frame their blocks with.
std::uint64_t ReadBigEndian(const std::byte* p, int bytes);

bool Lz4Available();
bool ZstdAvailable();
bool Bzip2Available();

// Decodes one raw LZ4 block (LZ4_decompress_safe's format, no frame) into
// exactly out.size() bytes. Corruption otherwise; Unsupported without liblz4.
Status DecodeLz4Block(std::span<const std::byte> in, std::span<std::byte> out);

// Decodes one whole Zstandard frame into exactly out.size() bytes.
// Corruption otherwise; Unsupported without libzstd.
Status DecodeZstdFrame(std::span<const std::byte> in, std::span<std::byte> out);

// Decodes one whole bzip2 stream into exactly out.size() bytes (its tables,
// 3.6 MB at level 9, kept by each thread for the next stream). Corruption
// otherwise; Unsupported without libbz2.
Status DecodeBzip2Stream(std::span<const std::byte> in, std::span<std::byte> out);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_BLOCK_CODECS_H_
