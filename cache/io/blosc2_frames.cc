#include "cache/io/blosc2_frames.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/io/block_codecs.h"

#ifndef PRESCIENT_HAVE_BLOSC2
#define PRESCIENT_HAVE_BLOSC2 0
#endif
#if PRESCIENT_HAVE_BLOSC2
#include <blosc2.h>
#endif

namespace prescient::cache::io {

bool Blosc2Available() { return PRESCIENT_HAVE_BLOSC2 != 0; }

#if PRESCIENT_HAVE_BLOSC2
namespace {

constexpr int kMaxRank = 8;  // B2ND_MAX_DIM

Status Damaged(const std::string& what) { return Status::Corruption("Blosc2 chunk: " + what); }

// A Blosc2 frame's fixed header: msgpack values at fixed places.
constexpr std::size_t kFrameHeaderBytes = 87;

// The codecs the HDF5 filter can have used: blosclz 0, lz4 1, lz4hc 2, zlib 4,
// zstd 5 (3 is unused, 6 and up are user-defined).
bool BuiltInCodec(int codec) { return codec <= 5 && codec != 3; }

// The frame's header holds only what the HDF5 filter writes (as its chunk's,
// below): byte or bit shuffle as the only filters, a built-in codec without
// codec metadata, no dictionary. libblosc2 leaks the contexts it made when it
// refuses a frame for other filter codes, so they never reach it.
Status CheckFrameHeader(std::span<const std::uint8_t> header) {
  bool plain = header[69] == 0xd8 && header[70] <= 6 &&  // fixext16: up to 6 filters
               BuiltInCodec(header[27] & 0x0f) && header[78] == 0 && (header[85] & 0x01) == 0;
  for (std::size_t i = 0; i < 6; ++i) {
    plain = plain && header[71 + i] <= 2 && header[79 + i] == 0;
  }
  if (!plain) return Damaged("a frame with filters or a codec the HDF5 filter does not write");
  return Status();
}

// A chunk's extended header holds only what the HDF5 filter writes: no
// filter but byte or bit shuffle, a built-in codec with no codec metadata, no
// dictionary, little-endian, the frame's element size. libblosc2 divides by
// zero on some other settings (a damaged-chunk test found one), and no writer
// of this filter makes them: such a chunk is left to HDF5.
Status CheckChunkHeader(std::span<const std::uint8_t> chunk, std::int32_t typesize) {
  constexpr std::uint8_t kExtendedHeader = 0x05;  // byte and bit shuffle flags both set
  if (chunk.size() < 32 || (chunk[2] & kExtendedHeader) != kExtendedHeader ||
      chunk[3] != typesize) {
    return Damaged("a chunk header of another format or element size");
  }
  bool plain = BuiltInCodec(chunk[2] >> 5) && chunk[23] == 0 && (chunk[31] & ~0x70) == 0;
  for (int i = 0; i < 6; ++i) {
    plain = plain && chunk[16 + static_cast<std::size_t>(i)] <= 2 &&  // none, shuffle, bitshuffle
            chunk[24 + static_cast<std::size_t>(i)] == 0;
  }
  if (!plain) return Damaged("a chunk with filters or a codec the HDF5 filter does not write");
  return Status();
}

// The super-chunk's own sizes against what the filter can have written: one
// chunk, of the dataset's element size, whose header agrees with the frame's
// and fits in it. libblosc2 trusts these numbers (a flipped byte of the
// frame's size made it allocate terabytes and write through the null
// pointer it got), so nothing is decoded before they are checked. `padded`
// is the most a B2ND chunk's padding can grow the chunk to.
Status CheckSuperChunk(blosc2_schunk* schunk, std::uint32_t element_size, std::size_t in_size,
                       std::uint64_t padded, std::span<const std::uint8_t>& stored_chunk) {
  if (schunk->nchunks != 1) return Damaged(std::to_string(schunk->nchunks) + " chunks, not 1");
  if (schunk->typesize != static_cast<std::int32_t>(element_size)) {
    return Damaged("elements of " + std::to_string(schunk->typesize) + " bytes, the dataset's " +
                   std::to_string(element_size));
  }
  if (schunk->chunksize <= 0 || static_cast<std::uint64_t>(schunk->chunksize) > padded ||
      schunk->nbytes != schunk->chunksize) {
    return Damaged("a chunk of " + std::to_string(schunk->chunksize) + " bytes");
  }
  std::uint8_t* chunk = nullptr;
  bool needs_free = false;
  const int stored = blosc2_schunk_get_lazychunk(schunk, 0, &chunk, &needs_free);
  // A frame in memory hands out its chunk in place; a copy (only a frame on
  // disk makes one) would not outlive this call.
  if (needs_free) {
    free(chunk);
    return Status::Unsupported("Blosc2 frame whose chunk is not held in the frame");
  }
  std::int32_t nbytes = 0;
  std::int32_t cbytes = 0;
  std::int32_t blocksize = 0;
  if (stored < 0 || chunk == nullptr ||
      blosc2_cbuffer_sizes(chunk, &nbytes, &cbytes, &blocksize) < 0 ||
      nbytes != schunk->chunksize || cbytes <= 0 || static_cast<std::size_t>(cbytes) > in_size ||
      cbytes > stored || blocksize <= 0 || blocksize > nbytes) {
    return Damaged("a chunk header that does not agree with its frame");
  }
  stored_chunk = {chunk, static_cast<std::size_t>(cbytes)};
  return CheckChunkHeader(stored_chunk, schunk->typesize);
}

// Decodes a chunk checked by CheckSuperChunk with this thread's decompression
// context, made at its first chunk and kept until the thread ends. The
// super-chunk's own context (blosc2_schunk_decompress_chunk) is new with every
// frame and allocates its block buffers at its first decode: 15 us a 16 KiB
// LZ4 frame in a long-running process, against 6 us with the context kept
// (the chunks of examples/bench/virtual.py --filter blosc2). A chunk whose
// filters need the super-chunk (delta) never gets here (CheckChunkHeader).
int DecompressChunk(std::span<const std::uint8_t> chunk, void* dest, std::size_t size) {
  struct Context {
    blosc2_context* dctx = [] {
      blosc2_dparams params = BLOSC2_DPARAMS_DEFAULTS;
      params.nthreads = 1;  // the caller's thread only: forks and I/O threads see no pool
      return blosc2_create_dctx(params);
    }();
    ~Context() {
      if (dctx != nullptr) blosc2_free_ctx(dctx);
    }
  };
  thread_local Context context;
  if (context.dctx == nullptr) return BLOSC2_ERROR_MEMORY_ALLOC;
  return blosc2_decompress_ctx(context.dctx, chunk.data(), static_cast<std::int32_t>(chunk.size()),
                               dest, static_cast<std::int32_t>(size));
}

// The B2ND metalayer (msgpack): [version, rank, shape (int64s), chunk shape
// (int32s), block shape (int32s), and in "b2nd" a dtype format and a dtype].
// Parsed here, every length checked against the content: libblosc2's own
// parser reads past the metalayer when its lengths are damaged.
struct B2ndGeometry {
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> chunk{};
  std::array<std::int64_t, kMaxRank> block{};
};

std::optional<B2ndGeometry> ParseB2ndMeta(std::span<const std::uint8_t> meta) {
  std::size_t at = 0;
  auto byte = [&]() -> std::optional<std::uint8_t> {
    if (at >= meta.size()) return std::nullopt;
    return meta[at++];
  };
  auto integer = [&](std::uint8_t marker, int bytes) -> std::optional<std::int64_t> {
    if (byte() != marker || meta.size() - at < static_cast<std::size_t>(bytes)) return std::nullopt;
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value = (value << 8) | meta[at++];
    if (bytes == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(value));
    return static_cast<std::int64_t>(value);
  };
  const std::optional<std::uint8_t> items = byte();
  if (!items || (*items != 0x95 && *items != 0x97)) return std::nullopt;  // fixarray of 5 or 7
  if (!byte()) return std::nullopt;                                       // version
  const std::optional<std::uint8_t> rank = byte();
  if (!rank || *rank < 1 || *rank > kMaxRank) return std::nullopt;
  B2ndGeometry geometry;
  geometry.rank = *rank;
  const auto list = [&](std::array<std::int64_t, kMaxRank>& into, std::uint8_t marker, int bytes) {
    if (byte() != 0x90 + geometry.rank) return false;
    for (int i = 0; i < geometry.rank; ++i) {
      const std::optional<std::int64_t> value = integer(marker, bytes);
      if (!value || *value <= 0) return false;
      into[static_cast<std::size_t>(i)] = *value;
    }
    return true;
  };
  if (!list(geometry.shape, 0xd3, 8) || !list(geometry.chunk, 0xd2, 4) ||
      !list(geometry.block, 0xd2, 4)) {
    return std::nullopt;
  }
  return geometry;
}

// A B2ND chunk as the filter wrote it: one chunk of the dataset's chunk shape
// (client data rank at [7], shape from [8], when given), stored as blocks of
// the block shape in C order over the block grid, each block in C order and
// padded at the chunk's far edges. Decoded whole into a scratch buffer, then
// each block's rows are put where they belong in `out` (padding dropped).
Status DecodeB2nd(blosc2_schunk* schunk, std::span<const std::uint8_t> chunk, const B2ndGeometry& g,
                  std::span<const std::uint32_t> client_data, std::span<std::byte> out) {
  if (client_data.size() >= 8 && (client_data[7] != static_cast<std::uint32_t>(g.rank) ||
                                  client_data.size() < 8 + static_cast<std::size_t>(g.rank))) {
    return Damaged("a B2ND rank of " + std::to_string(g.rank) + ", the dataset's chunk " +
                   std::to_string(client_data[7]));
  }
  const std::uint64_t element_size = client_data[2];
  std::uint64_t bytes = element_size;
  std::uint64_t padded = element_size;
  std::array<std::int64_t, kMaxRank> grid{};  // blocks along each dimension
  for (int i = 0; i < g.rank; ++i) {
    const auto d = static_cast<std::size_t>(i);
    if (client_data.size() >= 8 && g.shape[d] != static_cast<std::int64_t>(client_data[8 + d])) {
      return Damaged("a B2ND shape other than the dataset's chunk");
    }
    if (g.chunk[d] != g.shape[d] || g.block[d] > g.chunk[d] ||
        bytes > out.size() / static_cast<std::uint64_t>(g.shape[d])) {
      return Damaged("a B2ND shape that is not one chunk of the dataset's");
    }
    grid[d] = (g.chunk[d] + g.block[d] - 1) / g.block[d];
    bytes *= static_cast<std::uint64_t>(g.shape[d]);
    padded *= static_cast<std::uint64_t>(grid[d] * g.block[d]);
  }
  if (bytes != out.size()) {
    return Damaged("decodes to " + std::to_string(bytes) + " bytes, expected " +
                   std::to_string(out.size()));
  }
  if (padded != static_cast<std::uint64_t>(schunk->chunksize)) {
    return Damaged("a padded chunk of " + std::to_string(schunk->chunksize) + " bytes, not " +
                   std::to_string(padded));
  }
  thread_local std::vector<std::byte> scratch;
  scratch.resize(padded);
  const int produced = DecompressChunk(chunk, scratch.data(), padded);
  if (produced < 0 || static_cast<std::uint64_t>(produced) != padded) {
    return Damaged("a B2ND chunk that does not decode");
  }
  // Block by block, row by row (a row: the block's extent of the last
  // dimension), each row cut at the chunk's edge.
  const int last = g.rank - 1;
  const auto last_d = static_cast<std::size_t>(last);
  const std::uint64_t block_row_bytes = static_cast<std::uint64_t>(g.block[last_d]) * element_size;
  std::uint64_t rows_per_block = 1;
  for (int i = 0; i < last; ++i) rows_per_block *= static_cast<std::uint64_t>(g.block[i]);
  std::array<std::int64_t, kMaxRank> block_at{};  // the block's index along each dimension
  const std::byte* from = scratch.data();
  for (;;) {
    std::array<std::int64_t, kMaxRank> in_block{};  // the row's place inside the block
    for (std::uint64_t r = 0; r < rows_per_block; ++r, from += block_row_bytes) {
      std::uint64_t offset = 0;  // elements into `out`
      bool inside = true;
      for (int i = 0; i <= last; ++i) {
        const auto d = static_cast<std::size_t>(i);
        const std::int64_t x = block_at[d] * g.block[d] + (i == last ? 0 : in_block[d]);
        inside = inside && x < g.shape[d];
        offset = offset * static_cast<std::uint64_t>(g.shape[d]) + static_cast<std::uint64_t>(x);
      }
      if (inside) {
        const std::int64_t x0 = block_at[last_d] * g.block[last_d];
        const std::uint64_t n = static_cast<std::uint64_t>(
            std::min<std::int64_t>(g.block[last_d], g.shape[last_d] - x0));
        std::memcpy(out.data() + offset * element_size, from, n * element_size);
      }
      for (int i = last - 1; i >= 0; --i) {  // next row of the block
        const auto d = static_cast<std::size_t>(i);
        if (++in_block[d] < g.block[d]) break;
        in_block[d] = 0;
      }
    }
    int i = last;
    for (; i >= 0; --i) {  // next block of the grid
      const auto d = static_cast<std::size_t>(i);
      if (++block_at[d] < grid[d]) break;
      block_at[d] = 0;
    }
    if (i < 0) break;
  }
  return Status();
}

}  // namespace
#endif

Status DecodeBlosc2Frame(std::span<const std::byte> in, std::span<const std::uint32_t> client_data,
                         std::span<std::byte> out) {
#if PRESCIENT_HAVE_BLOSC2
  if (client_data.size() < 4) {
    return Status::Unsupported("Blosc2 filter with fewer than 4 client data values");
  }
  if (in.size() > INT_MAX || out.size() > INT_MAX) {
    return Status::Unsupported("Blosc2 chunk over 2 GiB");
  }
  // Global state (codec and filter registries) is made once and kept: tearing
  // it down could pull it from under another thread's decode.
  static std::once_flag initialised;
  std::call_once(initialised, [] { blosc2_init(); });
  // The frame's header says how long the frame is: the chunk must be exactly
  // that (the filter stores the frame alone). libblosc2 leaks what it made
  // when a frame ends early, so a cut one never reaches it.
  constexpr std::array<std::uint8_t, 10> kMagic = {0x9e, 0xa8, 'b', '2', 'f',
                                                   'r',  'a',  'm', 'e', 0};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(in.data());
  if (in.size() < kFrameHeaderBytes || !std::equal(kMagic.begin(), kMagic.end(), bytes) ||
      bytes[15] != 0xcf || ReadBigEndian(in.data() + 16, 8) != in.size()) {
    return Damaged("not a whole Blosc2 frame of " + std::to_string(in.size()) + " bytes");
  }
  PRESCIENT_RETURN_IF_ERROR(CheckFrameHeader({bytes, kFrameHeaderBytes}));
  // Not copied: the frame is parsed in place and only read.
  auto* frame = reinterpret_cast<std::uint8_t*>(const_cast<std::byte*>(in.data()));
  blosc2_schunk* schunk =
      blosc2_schunk_from_buffer(frame, static_cast<std::int64_t>(in.size()), /*copy=*/false);
  if (schunk == nullptr) return Damaged("not a Blosc2 frame");
  struct FreeSchunk {
    blosc2_schunk* schunk;
    ~FreeSchunk() { blosc2_schunk_free(schunk); }
  } owned{schunk};
  // A B2ND chunk: its geometry from the metalayer ("caterva" before 2.9).
  std::optional<B2ndGeometry> geometry;
  for (int i = 0; i < schunk->nmetalayers && i < BLOSC2_MAX_METALAYERS; ++i) {
    const blosc2_metalayer* meta = schunk->metalayers[i];
    if (meta == nullptr || meta->name == nullptr || meta->content == nullptr ||
        meta->content_len < 0 ||
        (std::strcmp(meta->name, "b2nd") != 0 && std::strcmp(meta->name, "caterva") != 0)) {
      continue;
    }
    geometry = ParseB2ndMeta({meta->content, static_cast<std::size_t>(meta->content_len)});
    if (!geometry) return Damaged("a B2ND metalayer that does not parse");
  }
  // A B2ND chunk is padded to whole blocks: less than twice each extent.
  const std::uint64_t padded = geometry ? std::uint64_t{out.size()} << geometry->rank : out.size();
  std::span<const std::uint8_t> chunk;
  PRESCIENT_RETURN_IF_ERROR(CheckSuperChunk(schunk, client_data[2], in.size(), padded, chunk));
  if (geometry) return DecodeB2nd(schunk, chunk, *geometry, client_data, out);
  const int produced = DecompressChunk(chunk, out.data(), out.size());
  if (produced < 0)
    return Damaged("does not decode (blosc2 error " + std::to_string(produced) + ")");
  if (static_cast<std::size_t>(produced) != out.size()) {
    return Damaged("decodes to " + std::to_string(produced) + " bytes, expected " +
                   std::to_string(out.size()));
  }
  return Status();
#else
  (void)in;
  (void)client_data;
  (void)out;
  return Status::Unsupported("Blosc2: this build has no Blosc2 library");
#endif
}

}  // namespace prescient::cache::io
