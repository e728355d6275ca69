// Chunks of the Blosc2 HDF5 filter (32026: PyTables, hdf5plugin, HDF5-Blosc2),
// decoded with libblosc2 when this build has it (CMake option
// PRESCIENT_USE_BLOSC2).
//
// The filter stores each chunk as a Blosc2 super-chunk serialised into one
// contiguous frame, holding one Blosc2 chunk. Two layouts:
//   - plain: the frame's chunk is the HDF5 chunk's bytes;
//   - B2ND (metalayer "b2nd", formerly "caterva"): the chunk is cut into
//     n-dimensional blocks, padded at the chunk's far edges. The blocks are
//     put back in C order here. The filter's client data then give the rank
//     ([7]) and the chunk shape ([8...]), which the array must match exactly,
//     as the reference filter requires.
// Client data [2] is the element size and [3] the chunk's size in bytes.
//
// libblosc2 parses the frame and decompresses its chunk; nothing else of it
// is used. Its frame sizes are checked against the chunk's before anything
// is decoded, and the B2ND metalayer is parsed here: libblosc2's B2ND reader
// reads past a damaged metalayer and writes through a failed allocation
// (found by the damaged-chunk test), and a damaged chunk must never take the
// process down. Kept apart from the Blosc (1) filter because blosc.h and
// blosc2.h define the same macros; the two libraries export no common symbol.
//
// Thread-safe: each call parses its own frame, and each thread decodes with a
// decompression context of its own (one thread, no pool), made at its first
// chunk and kept; libblosc2's global state is initialised once and never
// torn down (another user of libblosc2 in the process may init it too:
// harmless).
#ifndef PRESCIENT_CACHE_IO_BLOSC2_FRAMES_H_
#define PRESCIENT_CACHE_IO_BLOSC2_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/io/status.h"

namespace prescient::cache::io {

bool Blosc2Available();

// Decodes one frame the Blosc2 filter wrote into exactly out.size() bytes.
// Corruption when it does not decode so (or contradicts `client_data`);
// Unsupported without libblosc2.
Status DecodeBlosc2Frame(std::span<const std::byte> in, std::span<const std::uint32_t> client_data,
                         std::span<std::byte> out);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_BLOSC2_FRAMES_H_
