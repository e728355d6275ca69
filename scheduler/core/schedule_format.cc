#include "scheduler/core/schedule_format.h"

#include <zlib.h>

#include <algorithm>
#include <utility>

namespace prescient::scheduler::format {

std::uint32_t Crc32(std::span<const std::byte> bytes, std::uint32_t crc) {
  // zlib's crc32 takes a 32-bit length; feed large spans in slices.
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  uLong value = crc;
  while (left > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    value = crc32(value, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return static_cast<std::uint32_t>(value);
}

std::vector<std::byte> EncodePreamble(const Preamble& preamble) {
  Encoder out;
  for (unsigned char c : kMagic) out.bytes().push_back(static_cast<std::byte>(c));
  out.U32(preamble.version);
  out.U32(preamble.storage);
  out.U64(preamble.file_size);
  out.U64(preamble.header_offset);
  out.U64(preamble.header_size);
  out.U64(preamble.index_offset);
  out.U64(preamble.index_size);
  out.U64(preamble.data_offset);
  out.U32(preamble.header_crc);
  out.U32(preamble.index_crc);
  out.U32(0);
  out.U32(Crc32(out.bytes()));
  return std::move(out.bytes());
}

Preamble DecodePreamble(std::span<const std::byte, kPreambleSize> bytes) {
  Decoder in(std::span<const std::byte>(bytes).subspan(sizeof kMagic));
  Preamble p;
  p.version = in.U32();
  p.storage = in.U32();
  p.file_size = in.U64();
  p.header_offset = in.U64();
  p.header_size = in.U64();
  p.index_offset = in.U64();
  p.index_size = in.U64();
  p.data_offset = in.U64();
  p.header_crc = in.U32();
  p.index_crc = in.U32();
  return p;
}

std::vector<std::byte> EncodeHeader(const ScheduleHeader& h) {
  Encoder out;
  out.Str(h.dataset.file_path);
  out.Str(h.dataset.dataset_name);
  out.U64(h.dataset.rows);
  out.U64(h.dataset.row_bytes);
  out.U64(h.dataset.file_size);
  out.I64(h.dataset.mtime_ns);
  out.Str(h.source);
  out.Str(h.parameters);
  out.Str(h.generator);
  out.U32(h.layout.ranks);
  out.U32(h.layout.ranks_per_node);
  out.U32(h.layout.workers);
  out.U32(h.layout.batch_size);
  out.U32(h.epochs);
  out.U64(h.num_samples);
  out.U64(h.seed);
  out.U32(static_cast<std::uint32_t>(h.storage));
  return std::move(out.bytes());
}

bool DecodeHeader(std::span<const std::byte> bytes, ScheduleHeader* h) {
  Decoder in(bytes);
  h->dataset.file_path = in.Str();
  h->dataset.dataset_name = in.Str();
  h->dataset.rows = in.U64();
  h->dataset.row_bytes = in.U64();
  h->dataset.file_size = in.U64();
  h->dataset.mtime_ns = in.I64();
  h->source = in.Str();
  h->parameters = in.Str();
  h->generator = in.Str();
  h->layout.ranks = in.U32();
  h->layout.ranks_per_node = in.U32();
  h->layout.workers = in.U32();
  h->layout.batch_size = in.U32();
  h->epochs = in.U32();
  h->num_samples = in.U64();
  h->seed = in.U64();
  const std::uint32_t storage = in.U32();
  if (storage > static_cast<std::uint32_t>(ScheduleStorage::kRecipe)) return false;
  h->storage = static_cast<ScheduleStorage>(storage);
  return in.ok() && in.at_end();
}

void EncodeIndexEntry(const IndexEntry& e, Encoder* out) {
  out->U64(e.samples_offset);
  out->U64(e.sample_count);
  out->U64(e.step_begin_offset);
  out->U64(e.steps);
  out->U32(e.crc);
  out->U32(0);
}

IndexEntry DecodeIndexEntry(std::span<const std::byte> bytes) {
  Decoder in(bytes);
  IndexEntry e;
  e.samples_offset = in.U64();
  e.sample_count = in.U64();
  e.step_begin_offset = in.U64();
  e.steps = in.U64();
  e.crc = in.U32();
  return e;
}

}  // namespace prescient::scheduler::format
