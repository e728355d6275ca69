#include "cache/io/chunk_decoder.h"

#include <zlib.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "cache/io/filter_codecs.h"

#if PRESCIENT_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace prescient::cache::io {
namespace {

// The fast path: libdeflate inflates whole buffers about 2x faster than zlib,
// which matters because decoding is what bounds a cold epoch of gzip data.
// False on any failure; zlib then decodes again and says what is wrong.
bool InflateWholeBuffer(std::span<const std::byte> in, std::span<std::byte> out) {
#if PRESCIENT_HAVE_LIBDEFLATE
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  // A decompressor is not thread-safe and costs an allocation: one per thread.
  thread_local const std::unique_ptr<libdeflate_decompressor, Free> decompressor(
      libdeflate_alloc_decompressor());
  if (decompressor == nullptr) return false;
  std::size_t produced = 0;
  return libdeflate_zlib_decompress(decompressor.get(), in.data(), in.size(), out.data(),
                                    out.size(), &produced) == LIBDEFLATE_SUCCESS &&
         produced == out.size();
#else
  (void)in;
  (void)out;
  return false;
#endif
}

}  // namespace

Status Inflate(std::span<const std::byte> in, std::span<std::byte> out) {
  if (in.size() > std::numeric_limits<uInt>::max() ||
      out.size() > std::numeric_limits<uInt>::max()) {
    return Status::Unsupported("deflate chunk larger than 4 GiB");
  }
  if (InflateWholeBuffer(in, out)) return Status();
  z_stream stream{};
  // zlib's API takes non-const input; it never writes to it.
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  stream.avail_in = static_cast<uInt>(in.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  if (inflateInit(&stream) != Z_OK) return Status::Internal("inflateInit failed");
  const int rc = inflate(&stream, Z_FINISH);
  std::string zlib_message = stream.msg != nullptr ? stream.msg : "";
  const uLong produced = stream.total_out;
  inflateEnd(&stream);

  if (rc == Z_STREAM_END) {
    if (produced != out.size()) {
      return Status::Corruption("deflate stream decodes to " + std::to_string(produced) +
                                " bytes, expected " + std::to_string(out.size()));
    }
    return Status();
  }
  if (rc == Z_BUF_ERROR && stream.avail_out == 0) {
    return Status::Corruption("deflate stream decodes to more than " + std::to_string(out.size()) +
                              " bytes");
  }
  if (rc == Z_BUF_ERROR) {
    return Status::Corruption("deflate stream truncated after " + std::to_string(produced) +
                              " of " + std::to_string(out.size()) + " bytes");
  }
  return Status::Corruption("deflate stream is damaged (zlib " + std::to_string(rc) +
                            (zlib_message.empty() ? "" : ": " + zlib_message) + ")");
}

void Unshuffle(std::span<const std::byte> in, std::size_t element_size, std::span<std::byte> out) {
  const std::size_t count = element_size == 0 ? 0 : in.size() / element_size;
  if (element_size <= 1 || count <= 1) {
    std::memcpy(out.data(), in.data(), in.size());
    return;
  }
  for (std::size_t byte = 0; byte < element_size; ++byte) {
    const std::byte* src = in.data() + byte * count;
    std::byte* dst = out.data() + byte;
    for (std::size_t i = 0; i < count; ++i) dst[i * element_size] = src[i];
  }
  const std::size_t tail = count * element_size;
  std::memcpy(out.data() + tail, in.data() + tail, in.size() - tail);
}

void Shuffle(std::span<const std::byte> in, std::size_t element_size, std::span<std::byte> out) {
  const std::size_t count = element_size == 0 ? 0 : in.size() / element_size;
  if (element_size <= 1 || count <= 1) {
    std::memcpy(out.data(), in.data(), in.size());
    return;
  }
  for (std::size_t byte = 0; byte < element_size; ++byte) {
    const std::byte* src = in.data() + byte;
    std::byte* dst = out.data() + byte * count;
    for (std::size_t i = 0; i < count; ++i) dst[i] = src[i * element_size];
  }
  const std::size_t tail = count * element_size;
  std::memcpy(out.data() + tail, in.data() + tail, in.size() - tail);
}

Result<std::span<const std::byte>> DecodeChunk(std::span<const std::byte> stored,
                                               std::span<const Filter> pipeline,
                                               std::uint32_t filter_mask,
                                               std::uint64_t element_size,
                                               std::uint64_t chunk_bytes, DecodeBuffers& buffers) {
  PRESCIENT_RETURN_IF_ERROR(CheckRawDecodable(pipeline, element_size));
  std::span<const std::byte> current = stored;
  bool in_a = false;  // which buffer `current` lives in, once it is not `stored`
  bool in_buffer = false;
  for (std::size_t stage = pipeline.size(); stage-- > 0;) {
    if (stage < 32 && (filter_mask >> stage) & 1u) continue;
    const Filter& filter = pipeline[stage];
    // CheckRawDecodable above found every stage in the table.
    const FilterCodec& codec = *FindFilterCodec(filter.id);
    if (codec.checksum_bytes > 0) {  // verified, then dropped: no copy
      PRESCIENT_RETURN_IF_ERROR(codec.verify(current));
      current = current.first(current.size() - codec.checksum_bytes);
      continue;
    }
    std::vector<std::byte>& target = (in_buffer && in_a) ? buffers.b : buffers.a;
    if (target.size() < chunk_bytes) target.resize(chunk_bytes);
    const std::span<std::byte> out(target.data(), chunk_bytes);
    PRESCIENT_RETURN_IF_ERROR(codec.decode(current, filter.client_data, element_size, out));
    in_a = &target == &buffers.a;
    in_buffer = true;
    current = out;
  }
  if (current.size() != chunk_bytes) {
    return Status::Corruption("unfiltered chunk has " + std::to_string(current.size()) +
                              " bytes stored, expected " + std::to_string(chunk_bytes));
  }
  return current;
}

}  // namespace prescient::cache::io
