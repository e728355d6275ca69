#include "cache/io/block_codecs.h"

#include <climits>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#ifndef PRESCIENT_HAVE_LZ4
#define PRESCIENT_HAVE_LZ4 0
#endif
#ifndef PRESCIENT_HAVE_ZSTD
#define PRESCIENT_HAVE_ZSTD 0
#endif
#ifndef PRESCIENT_HAVE_BZIP2
#define PRESCIENT_HAVE_BZIP2 0
#endif
#if PRESCIENT_HAVE_LZ4
#include <lz4.h>
#endif
#if PRESCIENT_HAVE_ZSTD
#include <zstd.h>
#endif
#if PRESCIENT_HAVE_BZIP2
#include <bzlib.h>
#endif

namespace prescient::cache::io {

std::uint64_t ReadBigEndian(const std::byte* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<std::uint8_t>(p[i]);
  return value;
}

bool Lz4Available() { return PRESCIENT_HAVE_LZ4 != 0; }
bool ZstdAvailable() { return PRESCIENT_HAVE_ZSTD != 0; }
bool Bzip2Available() { return PRESCIENT_HAVE_BZIP2 != 0; }

Status DecodeLz4Block(std::span<const std::byte> in, std::span<std::byte> out) {
#if PRESCIENT_HAVE_LZ4
  constexpr std::size_t kMax = std::numeric_limits<int>::max();
  if (in.size() > kMax || out.size() > kMax) return Status::Unsupported("LZ4 block over 2 GiB");
  const int produced = LZ4_decompress_safe(
      reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
      static_cast<int>(in.size()), static_cast<int>(out.size()));
  if (produced < 0 || static_cast<std::size_t>(produced) != out.size()) {
    return Status::Corruption("an LZ4 block of " + std::to_string(in.size()) +
                              " bytes does not decode to " + std::to_string(out.size()));
  }
  return Status();
#else
  (void)in;
  (void)out;
  return Status::Unsupported("LZ4: this build has no LZ4 library");
#endif
}

Status DecodeZstdFrame(std::span<const std::byte> in, std::span<std::byte> out) {
#if PRESCIENT_HAVE_ZSTD
  struct Free {
    void operator()(ZSTD_DCtx* context) const { ZSTD_freeDCtx(context); }
  };
  thread_local const std::unique_ptr<ZSTD_DCtx, Free> context(ZSTD_createDCtx());
  if (context == nullptr) return Status::Internal("ZSTD_createDCtx failed");
  const std::size_t produced =
      ZSTD_decompressDCtx(context.get(), out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(produced)) {
    return Status::Corruption(std::string("Zstandard frame: ") + ZSTD_getErrorName(produced));
  }
  if (produced != out.size()) {
    return Status::Corruption("a Zstandard frame decodes to " + std::to_string(produced) +
                              " bytes, expected " + std::to_string(out.size()));
  }
  return Status();
#else
  (void)in;
  (void)out;
  return Status::Unsupported("Zstandard: this build has no Zstandard library");
#endif
}

#if PRESCIENT_HAVE_BZIP2
namespace {

// libbz2 allocates its tables per stream (3.6 MB at level 9, zeroed by the
// kernel when they come fresh from mmap: ~4 ms of system time a chunk). Each
// thread keeps the blocks of its last streams and hands them out again.
struct Bzip2Arena {
  struct Block {
    std::size_t size;
    std::unique_ptr<std::byte[]> bytes;
    bool in_use;
  };
  static constexpr std::size_t kKept = 4;  // a stream takes 2; other levels take others
  std::vector<Block> blocks;
};

void* ArenaAlloc(void* opaque, int items, int item_size) noexcept {
  auto& arena = *static_cast<Bzip2Arena*>(opaque);
  if (items < 0 || item_size < 0) return nullptr;
  const std::size_t size = static_cast<std::size_t>(items) * static_cast<std::size_t>(item_size);
  for (Bzip2Arena::Block& block : arena.blocks) {
    if (!block.in_use && block.size == size) {
      block.in_use = true;
      return block.bytes.get();
    }
  }
  if (arena.blocks.size() >= Bzip2Arena::kKept) {
    std::erase_if(arena.blocks, [](const Bzip2Arena::Block& block) { return !block.in_use; });
  }
  try {
    arena.blocks.push_back({size, std::make_unique_for_overwrite<std::byte[]>(size), true});
  } catch (...) {  // nothing may be thrown into libbz2
    return nullptr;
  }
  return arena.blocks.back().bytes.get();
}

void ArenaFree(void* opaque, void* address) noexcept {
  for (Bzip2Arena::Block& block : static_cast<Bzip2Arena*>(opaque)->blocks) {
    if (block.bytes.get() == address) block.in_use = false;
  }
}

}  // namespace
#endif

Status DecodeBzip2Stream(std::span<const std::byte> in, std::span<std::byte> out) {
#if PRESCIENT_HAVE_BZIP2
  if (in.size() > UINT_MAX || out.size() > UINT_MAX) {
    return Status::Unsupported("bzip2 stream over 4 GiB");
  }
  thread_local Bzip2Arena arena;
  bz_stream stream{};
  stream.bzalloc = ArenaAlloc;
  stream.bzfree = ArenaFree;
  stream.opaque = &arena;
  if (BZ2_bzDecompressInit(&stream, /*verbosity=*/0, /*small=*/0) != BZ_OK) {
    return Status::Internal("bzip2: out of memory");
  }
  stream.next_in = const_cast<char*>(reinterpret_cast<const char*>(in.data()));
  stream.avail_in = static_cast<unsigned int>(in.size());
  stream.next_out = reinterpret_cast<char*>(out.data());
  stream.avail_out = static_cast<unsigned int>(out.size());
  // One call runs until the stream ends, the input runs out or `out` is
  // full. Bytes after the end of the stream are ignored, as the reference
  // filter ignores them.
  const int code = BZ2_bzDecompress(&stream);
  const unsigned int left = stream.avail_out;
  BZ2_bzDecompressEnd(&stream);
  if (code == BZ_STREAM_END && left == 0) return Status();
  if (code == BZ_STREAM_END) {
    return Status::Corruption("a bzip2 stream decodes to " + std::to_string(out.size() - left) +
                              " bytes, expected " + std::to_string(out.size()));
  }
  if (code == BZ_OK && left == 0) {
    return Status::Corruption("a bzip2 stream decodes to more than " + std::to_string(out.size()) +
                              " bytes");
  }
  if (code == BZ_MEM_ERROR) return Status::Internal("bzip2: out of memory");
  return Status::Corruption("a bzip2 stream of " + std::to_string(in.size()) +
                            " bytes is damaged or cut (BZ2 error " + std::to_string(code) + ")");
#else
  (void)in;
  (void)out;
  return Status::Unsupported("bzip2: this build has no bzip2 library");
#endif
}

}  // namespace prescient::cache::io
