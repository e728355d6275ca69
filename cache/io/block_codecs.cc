#include "cache/io/block_codecs.h"

#include <limits>
#include <memory>
#include <string>

#ifndef PRESCIENT_HAVE_LZ4
#define PRESCIENT_HAVE_LZ4 0
#endif
#ifndef PRESCIENT_HAVE_ZSTD
#define PRESCIENT_HAVE_ZSTD 0
#endif
#if PRESCIENT_HAVE_LZ4
#include <lz4.h>
#endif
#if PRESCIENT_HAVE_ZSTD
#include <zstd.h>
#endif

namespace prescient::cache::io {

std::uint64_t ReadBigEndian(const std::byte* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<std::uint8_t>(p[i]);
  return value;
}

bool Lz4Available() { return PRESCIENT_HAVE_LZ4 != 0; }
bool ZstdAvailable() { return PRESCIENT_HAVE_ZSTD != 0; }

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

}  // namespace prescient::cache::io
