#include "cache/io/raw_layout_text.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <vector>

namespace prescient::cache::io {
namespace {

std::vector<std::string_view> SplitWords(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

std::optional<std::uint64_t> ParseU64(std::string_view word) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return value;
}

std::optional<std::vector<std::byte>> ParseHex(std::string_view word) {
  if (word.size() % 2 != 0) return std::nullopt;
  std::vector<std::byte> bytes;
  for (std::size_t i = 0; i < word.size(); i += 2) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(word.data() + i, word.data() + i + 2, value, 16);
    if (ec != std::errc() || end != word.data() + i + 2) return std::nullopt;
    bytes.push_back(static_cast<std::byte>(value));
  }
  return bytes;
}

struct Fields {
  std::string kind;
  std::string path;
  std::uint64_t data_offset = 0;
  std::uint64_t row_bytes = 0;
  std::uint64_t num_rows = 0;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> chunk_shape;
  std::uint64_t element_size = 0;
  std::vector<std::byte> fill;
  std::vector<Filter> filters;
  std::vector<std::vector<std::uint64_t>> chunks;  // offset..., file offset, size, mask
};

Status Error(std::size_t line_number, std::string_view what) {
  return Status::InvalidArgument("raw layout text, line " + std::to_string(line_number) + ": " +
                                 std::string(what));
}

// Parses the numbers after the key.
std::optional<std::vector<std::uint64_t>> Numbers(const std::vector<std::string_view>& words) {
  std::vector<std::uint64_t> values;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const auto value = ParseU64(words[i]);
    if (!value) return std::nullopt;
    values.push_back(*value);
  }
  return values;
}

Status ParseLine(std::string_view line, std::size_t number, Fields& f) {
  const std::vector<std::string_view> words = SplitWords(line);
  if (words.empty() || words[0].front() == '#') return Status();
  const std::string_view key = words[0];
  if (key == "prescient-raw-layout") {
    return words.size() == 2 && words[1] == "1" ? Status() : Error(number, "unknown version");
  }
  if (key == "kind") {
    if (words.size() != 2) return Error(number, "kind takes one word");
    f.kind = std::string(words[1]);
    return Status();
  }
  if (key == "path") {
    const std::size_t at = line.find("path") + 4;
    const std::size_t begin = line.find_first_not_of(" \t", at);
    f.path = begin == std::string_view::npos ? "" : std::string(line.substr(begin));
    while (!f.path.empty() && f.path.back() == '\r') f.path.pop_back();
    return Status();
  }
  if (key == "fill") {
    auto bytes = words.size() == 2 ? ParseHex(words[1]) : std::nullopt;
    if (!bytes) return Error(number, "fill takes one hex string");
    f.fill = std::move(*bytes);
    return Status();
  }
  const auto values = Numbers(words);
  if (!values) return Error(number, "expected unsigned integers after '" + std::string(key) + "'");
  const auto one = [&](std::uint64_t& out) {
    if (values->size() != 1) return Error(number, std::string(key) + " takes one value");
    out = values->front();
    return Status();
  };
  if (key == "data_offset") return one(f.data_offset);
  if (key == "row_bytes") return one(f.row_bytes);
  if (key == "num_rows") return one(f.num_rows);
  if (key == "element_size") return one(f.element_size);
  if (key == "shape") {
    f.shape = *values;
    return Status();
  }
  if (key == "chunk_shape") {
    f.chunk_shape = *values;
    return Status();
  }
  if (key == "filter") {
    if (values->empty() || values->front() > 65535) return Error(number, "bad filter id");
    Filter filter{.id = static_cast<int>(values->front()), .client_data = {}};
    for (std::size_t i = 1; i < values->size(); ++i) {
      if ((*values)[i] > UINT32_MAX) return Error(number, "filter client data exceeds 32 bits");
      filter.client_data.push_back(static_cast<std::uint32_t>((*values)[i]));
    }
    f.filters.push_back(std::move(filter));
    return Status();
  }
  if (key == "chunk") {
    f.chunks.push_back(*values);
    return Status();
  }
  return Error(number, "unknown key '" + std::string(key) + "'");
}

}  // namespace

Result<RawLayout> ParseRawLayoutText(std::string_view text) {
  Fields f;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    PRESCIENT_RETURN_IF_ERROR(ParseLine(line, ++number, f));
  }
  if (f.kind == "contiguous") {
    ContiguousLayout layout{.path = f.path,
                            .data_offset = f.data_offset,
                            .row_bytes = f.row_bytes,
                            .num_rows = f.num_rows};
    PRESCIENT_RETURN_IF_ERROR(layout.Validate());
    return RawLayout(std::move(layout));
  }
  if (f.kind != "chunked") {
    return Status::InvalidArgument("raw layout text: kind must be contiguous or chunked");
  }
  auto layout =
      ChunkedLayout::Make(f.path, f.shape, f.chunk_shape, f.element_size, f.filters, f.fill);
  if (!layout.ok()) return layout.status();
  for (const auto& chunk : f.chunks) {
    const std::size_t rank = f.shape.size();
    if (chunk.size() != rank + 3 || chunk[rank + 2] > UINT32_MAX) {
      return Status::InvalidArgument("raw layout text: a chunk record needs " +
                                     std::to_string(rank) + " offsets, file offset, size, mask");
    }
    ChunkLocation location{.file_offset = chunk[rank],
                           .stored_size = chunk[rank + 1],
                           .filter_mask = static_cast<std::uint32_t>(chunk[rank + 2])};
    PRESCIENT_RETURN_IF_ERROR(layout->SetChunk({chunk.data(), rank}, location));
  }
  return RawLayout(std::move(layout).value());
}

std::string FormatRawLayoutText(const RawLayout& layout) {
  std::string out = "prescient-raw-layout 1\n";
  const auto list = [&](const char* key, const std::vector<std::uint64_t>& values) {
    out += key;
    for (const std::uint64_t v : values) out += " " + std::to_string(v);
    out += "\n";
  };
  if (const auto* c = std::get_if<ContiguousLayout>(&layout)) {
    out += "kind contiguous\npath " + c->path + "\n";
    list("data_offset", {c->data_offset});
    list("row_bytes", {c->row_bytes});
    list("num_rows", {c->num_rows});
    return out;
  }
  const auto& k = std::get<ChunkedLayout>(layout);
  out += "kind chunked\npath " + k.path() + "\n";
  list("shape", k.shape());
  list("chunk_shape", k.chunk_shape());
  list("element_size", {k.element_size()});
  if (!k.fill_value().empty()) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "fill ";
    for (const std::byte b : k.fill_value()) {
      out += kHex[static_cast<unsigned>(b) >> 4];
      out += kHex[static_cast<unsigned>(b) & 15];
    }
    out += "\n";
  }
  for (const Filter& filter : k.filters()) {
    std::vector<std::uint64_t> values = {static_cast<std::uint64_t>(filter.id)};
    values.insert(values.end(), filter.client_data.begin(), filter.client_data.end());
    list("filter", values);
  }
  for (std::uint64_t i = 0; i < k.num_chunks(); ++i) {
    const auto& chunk = k.chunk(i);
    if (!chunk) continue;
    std::vector<std::uint64_t> values = k.GridCoords(i);
    for (std::size_t d = 0; d < values.size(); ++d) values[d] *= k.chunk_shape()[d];
    values.push_back(chunk->file_offset);
    values.push_back(chunk->stored_size);
    values.push_back(chunk->filter_mask);
    list("chunk", values);
  }
  return out;
}

}  // namespace prescient::cache::io
