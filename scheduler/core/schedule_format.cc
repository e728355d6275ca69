#include "scheduler/core/schedule_format.h"

#include <zlib.h>

#include <algorithm>
#include <stdexcept>
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

SampleMap MapOfFingerprint(const DatasetFingerprint& d) {
  if (d.file_path.empty()) {
    if (d.row_bytes == 0 && d.dataset_name.empty()) return SampleMap();
    return SampleMap({}, {{d.dataset_name, d.row_bytes}});  // abstract samples of a known size
  }
  return SampleMap({{d.file_path, d.rows, d.file_size, d.mtime_ns}},
                   {{d.dataset_name, d.row_bytes}});
}

std::uint32_t HeaderVersion(const ScheduleHeader& h) {
  if (h.map.has_row_blocks()) return 5;
  if (h.map.has_groups()) return 4;
  return h.map.has_field_files() ? 3 : 2;
}

std::vector<std::byte> EncodeHeader(const ScheduleHeader& h) {
  const std::uint32_t version = HeaderVersion(h);
  const bool field_files = version >= 3;
  Encoder out;
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
  const SampleMap& map = h.map;
  out.U32(static_cast<std::uint32_t>(map.fields().size()));
  for (const MapField& f : map.fields()) {
    out.Str(f.dataset);
    out.U64(f.row_bytes);
  }
  out.U32(static_cast<std::uint32_t>(map.files().size()));
  for (const MapFile& f : map.files()) {
    out.Str(f.path);
    out.U64(f.rows);
    out.U64(f.size);
    out.I64(f.mtime_ns);
    if (version >= 4) out.Str(f.group);
    if (version >= 5) out.U64(f.rows_per_sample);
    if (!field_files) continue;
    out.U32(static_cast<std::uint32_t>(f.field_files.size()));
    for (const FieldFile& ff : f.field_files) {
      out.U32(ff.field);
      out.Str(ff.path);
      out.U64(ff.size);
      out.I64(ff.mtime_ns);
    }
  }
  return std::move(out.bytes());
}

namespace {

bool DecodeVersion1(Decoder& in, ScheduleHeader* h) {
  DatasetFingerprint d;
  d.file_path = in.Str();
  d.dataset_name = in.Str();
  d.rows = in.U64();
  d.row_bytes = in.U64();
  d.file_size = in.U64();
  d.mtime_ns = in.I64();
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
  if (!in.ok() || !in.at_end() || storage > static_cast<std::uint32_t>(ScheduleStorage::kRecipe)) {
    return false;
  }
  h->storage = static_cast<ScheduleStorage>(storage);
  if (!d.file_path.empty() && d.rows == 0) return false;
  try {
    h->map = MapOfFingerprint(d);
  } catch (const std::invalid_argument&) {
    return false;
  }
  return true;
}

// Versions 2, 3 (which adds each file's field files), 4 (each file's group)
// and 5 (each file's rows per sample).
bool DecodeMapVersions(Decoder& in, std::uint32_t version, ScheduleHeader* h, std::string* why) {
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
  if (!in.ok() || storage > static_cast<std::uint32_t>(ScheduleStorage::kRecipe)) return false;
  h->storage = static_cast<ScheduleStorage>(storage);
  // Counts are bounded by the bytes left (each entry takes at least 12 or 28
  // bytes) before anything is reserved.
  const std::uint32_t field_count = in.U32();
  if (!in.ok() || field_count > in.remaining() / 12) return false;
  std::vector<MapField> fields(field_count);
  for (MapField& f : fields) {
    f.dataset = in.Str();
    f.row_bytes = in.U64();
  }
  const std::uint32_t file_count = in.U32();
  if (!in.ok() || file_count > in.remaining() / 28) return false;
  std::vector<MapFile> files(file_count);
  for (MapFile& f : files) {
    f.path = in.Str();
    f.rows = in.U64();
    f.size = in.U64();
    f.mtime_ns = in.I64();
    if (version >= 4) f.group = in.Str();
    if (version >= 5) f.rows_per_sample = in.U64();
    if (version < 3) continue;
    // Each field file takes at least 24 bytes.
    const std::uint32_t field_file_count = in.U32();
    if (!in.ok() || field_file_count > in.remaining() / 24) return false;
    f.field_files.resize(field_file_count);
    for (FieldFile& ff : f.field_files) {
      ff.field = in.U32();
      ff.path = in.Str();
      ff.size = in.U64();
      ff.mtime_ns = in.I64();
    }
  }
  if (!in.ok() || !in.at_end()) return false;
  try {
    h->map = SampleMap(std::move(files), std::move(fields));
  } catch (const std::invalid_argument& e) {
    *why = e.what();
    return false;
  }
  return true;
}

}  // namespace

bool DecodeHeader(std::span<const std::byte> bytes, std::uint32_t version, ScheduleHeader* h,
                  std::string* why) {
  Decoder in(bytes);
  return version == 1 ? DecodeVersion1(in, h) : DecodeMapVersions(in, version, h, why);
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
