#include "vol/agent/peer_protocol.h"

#include <cstring>

namespace prescient::vol::agent {
namespace {

constexpr std::uint64_t kRequestMagic = 0x3151455250435250ull;  // "PRCPREQ1"
constexpr std::uint64_t kReplyMagic = 0x3150455250435250ull;    // "PRCPREP1"

struct RequestHeader {
  std::uint64_t magic;
  std::uint64_t id;
  std::uint32_t file;
  std::uint32_t field;
  std::uint64_t row_bytes;
  std::uint64_t file_size;
  std::int64_t file_mtime_ns;
  std::uint64_t count;
};

struct ReplyHeader {
  std::uint64_t magic;
  std::uint64_t id;
  std::uint32_t file;
  std::uint32_t field;
  std::uint64_t row_bytes;
  std::uint64_t count;
  std::uint32_t status;
  std::uint32_t padding;
};

template <typename T>
void Append(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof value);
}

void AppendRows(std::vector<std::byte>& out, const std::vector<std::uint64_t>& rows) {
  const auto* p = reinterpret_cast<const std::byte*>(rows.data());
  out.insert(out.end(), p, p + rows.size() * sizeof(std::uint64_t));
}

std::vector<std::byte> Reply(const RowRequest& request, ReplyStatus status,
                             std::span<const std::byte> data) {
  const bool ok = status == ReplyStatus::kOk;
  const ReplyHeader header{.magic = kReplyMagic,
                           .id = request.id,
                           .file = request.file,
                           .field = request.field,
                           .row_bytes = request.row_bytes,
                           .count = ok ? request.rows.size() : 0,
                           .status = static_cast<std::uint32_t>(status),
                           .padding = 0};
  std::vector<std::byte> out;
  out.reserve(sizeof header + (ok ? request.rows.size() * 8 + data.size() : 0));
  Append(out, header);
  if (ok) {
    AppendRows(out, request.rows);
    out.insert(out.end(), data.begin(), data.end());
  }
  return out;
}

}  // namespace

std::vector<std::byte> EncodeRequest(const RowRequest& request) {
  const RequestHeader header{.magic = kRequestMagic,
                             .id = request.id,
                             .file = request.file,
                             .field = request.field,
                             .row_bytes = request.row_bytes,
                             .file_size = request.file_size,
                             .file_mtime_ns = request.file_mtime_ns,
                             .count = request.rows.size()};
  std::vector<std::byte> out;
  out.reserve(sizeof header + request.rows.size() * 8);
  Append(out, header);
  AppendRows(out, request.rows);
  return out;
}

std::optional<RowRequest> DecodeRequest(std::span<const std::byte> message) {
  RequestHeader header;
  if (message.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, message.data(), sizeof header);
  if (header.magic != kRequestMagic || header.count == 0 || header.count > kMaxRowsPerRequest ||
      header.row_bytes == 0 || message.size() != sizeof header + header.count * 8) {
    return std::nullopt;
  }
  RowRequest request{.id = header.id,
                     .file = header.file,
                     .field = header.field,
                     .row_bytes = header.row_bytes,
                     .file_size = header.file_size,
                     .file_mtime_ns = header.file_mtime_ns,
                     .rows = std::vector<std::uint64_t>(header.count)};
  std::memcpy(request.rows.data(), message.data() + sizeof header, header.count * 8);
  for (std::size_t i = 1; i < request.rows.size(); ++i) {
    if (request.rows[i] <= request.rows[i - 1]) return std::nullopt;
  }
  return request;
}

std::vector<std::byte> EncodeReply(const RowRequest& request, std::span<const std::byte> data) {
  return Reply(request, ReplyStatus::kOk, data);
}

std::vector<std::byte> EncodeRefusal(const RowRequest& request) {
  return Reply(request, ReplyStatus::kRefused, {});
}

std::uint64_t ReplyId(std::span<const std::byte> message) {
  ReplyHeader header;
  if (message.size() < sizeof header) return 0;
  std::memcpy(&header, message.data(), sizeof header);
  return header.magic == kReplyMagic ? header.id : 0;
}

std::optional<std::span<const std::byte>> CheckReply(const RowRequest& request,
                                                     std::span<const std::byte> message) {
  ReplyHeader header;
  if (message.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, message.data(), sizeof header);
  const std::uint64_t count = request.rows.size();
  if (header.magic != kReplyMagic || header.id != request.id || header.file != request.file ||
      header.field != request.field || header.row_bytes != request.row_bytes ||
      header.status != static_cast<std::uint32_t>(ReplyStatus::kOk) || header.count != count ||
      message.size() != sizeof header + count * 8 + count * request.row_bytes) {
    return std::nullopt;
  }
  if (std::memcmp(message.data() + sizeof header, request.rows.data(), count * 8) != 0) {
    return std::nullopt;
  }
  return message.subspan(sizeof header + count * 8);
}

}  // namespace prescient::vol::agent
