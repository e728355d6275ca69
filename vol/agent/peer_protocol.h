// The messages node agents exchange (MPI two-sided, see peer_link.h): a
// request for rows of one dataset, named by the schedule's sample map (file
// and field index: every node has the same map), and its reply carrying the
// rows' bytes. Both carry what the requester checks before it publishes a
// byte: the request id, the dataset, the rows in order and their size.
//
// The requester also names the file as it sees it (size and modification
// time): an owner that sees another file refuses, so nodes that disagree about
// a file's contents never exchange its rows.
//
// MPI- and HDF5-free, so it is unit-tested on its own.
#ifndef PRESCIENT_VOL_AGENT_PEER_PROTOCOL_H_
#define PRESCIENT_VOL_AGENT_PEER_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace prescient::vol::agent {

// MPI tags.
inline constexpr int kTagRequest = 0x5031;
inline constexpr int kTagReply = 0x5032;
// The sender's node is done reading; it still serves until every peer is done.
inline constexpr int kTagBye = 0x5033;
// The sender stops serving before every peer was done (--wait-for-job ran
// out, SIGTERM): ask it no more.
inline constexpr int kTagGone = 0x5034;

// Rows of one request at most (and bytes of one reply, roughly).
inline constexpr std::size_t kMaxRowsPerRequest = 256;
inline constexpr std::uint64_t kMaxReplyBytes = 16u << 20;

struct RowRequest {
  std::uint64_t id = 0;
  std::uint32_t file = 0;   // index in the sample map
  std::uint32_t field = 0;  // index of the field (dataset) in the map
  std::uint64_t row_bytes = 0;
  std::uint64_t file_size = 0;
  std::int64_t file_mtime_ns = 0;
  std::vector<std::uint64_t> rows;  // ascending, distinct
};

enum class ReplyStatus : std::uint32_t {
  kOk = 0,       // every row, in the request's order
  kRefused = 1,  // none: unknown dataset, another file, or the rows could not be read
};

std::vector<std::byte> EncodeRequest(const RowRequest& request);
// Nullopt when `message` is not a well-formed request.
std::optional<RowRequest> DecodeRequest(std::span<const std::byte> message);

// A reply to `request`: `data` holds request.rows.size() * row_bytes bytes.
std::vector<std::byte> EncodeReply(const RowRequest& request, std::span<const std::byte> data);
std::vector<std::byte> EncodeRefusal(const RowRequest& request);
// The id a reply answers (0 when it is too short to say).
std::uint64_t ReplyId(std::span<const std::byte> message);
// The rows' bytes when `message` is a complete kOk reply to exactly
// `request`; nullopt otherwise (a refusal, or anything that does not match).
std::optional<std::span<const std::byte>> CheckReply(const RowRequest& request,
                                                     std::span<const std::byte> message);

}  // namespace prescient::vol::agent

#endif  // PRESCIENT_VOL_AGENT_PEER_PROTOCOL_H_
