// The node agents' messages (vol/agent/peer_protocol.h): what a requester
// accepts before it publishes a byte, and what an owner refuses to decode.
#include "vol/agent/peer_protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace prescient::vol::agent {
namespace {

RowRequest Request() {
  return {.id = 42,
          .file = 3,
          .field = 1,
          .row_bytes = 4,
          .file_size = 1000,
          .file_mtime_ns = 77,
          .rows = {5, 9, 12}};
}

std::vector<std::byte> Data(std::size_t rows, std::size_t row_bytes) {
  std::vector<std::byte> data(rows * row_bytes);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  return data;
}

TEST(PeerProtocol, ARequestSurvivesItsRoundTrip) {
  const RowRequest sent = Request();
  const std::optional<RowRequest> got = DecodeRequest(EncodeRequest(sent));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, sent.id);
  EXPECT_EQ(got->file, sent.file);
  EXPECT_EQ(got->field, sent.field);
  EXPECT_EQ(got->row_bytes, sent.row_bytes);
  EXPECT_EQ(got->file_size, sent.file_size);
  EXPECT_EQ(got->file_mtime_ns, sent.file_mtime_ns);
  EXPECT_EQ(got->rows, sent.rows);
}

TEST(PeerProtocol, MalformedRequestsAreNotDecoded) {
  std::vector<std::byte> bytes = EncodeRequest(Request());
  EXPECT_FALSE(DecodeRequest(std::span(bytes).first(bytes.size() - 1)));  // truncated
  std::vector<std::byte> extra = bytes;
  extra.push_back(std::byte{0});
  EXPECT_FALSE(DecodeRequest(extra));  // longer than its count says
  std::vector<std::byte> magic = bytes;
  magic[0] ^= std::byte{1};
  EXPECT_FALSE(DecodeRequest(magic));
  RowRequest unsorted = Request();
  unsorted.rows = {9, 5};
  EXPECT_FALSE(DecodeRequest(EncodeRequest(unsorted)));
  RowRequest repeated = Request();
  repeated.rows = {5, 5};
  EXPECT_FALSE(DecodeRequest(EncodeRequest(repeated)));
  RowRequest empty = Request();
  empty.rows.clear();
  EXPECT_FALSE(DecodeRequest(EncodeRequest(empty)));
  RowRequest too_many = Request();
  too_many.rows.clear();
  for (std::uint64_t r = 0; r <= kMaxRowsPerRequest; ++r) too_many.rows.push_back(r);
  EXPECT_FALSE(DecodeRequest(EncodeRequest(too_many)));
}

TEST(PeerProtocol, AReplyToExactlyTheRequestGivesItsRows) {
  const RowRequest request = Request();
  const std::vector<std::byte> data = Data(3, 4);
  const std::vector<std::byte> reply = EncodeReply(request, data);
  EXPECT_EQ(ReplyId(reply), 42u);
  const auto rows = CheckReply(request, reply);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), data.size());
  EXPECT_EQ(std::memcmp(rows->data(), data.data(), data.size()), 0);
}

TEST(PeerProtocol, ARequesterRejectsEveryReplyThatDoesNotMatch) {
  const RowRequest request = Request();
  const std::vector<std::byte> data = Data(3, 4);
  // A refusal.
  EXPECT_FALSE(CheckReply(request, EncodeRefusal(request)));
  // Another request's reply: id, dataset, file, rows, row size.
  for (auto change : std::vector<void (*)(RowRequest&)>{
           [](RowRequest& r) { r.id = 43; },
           [](RowRequest& r) { r.file = 4; },
           [](RowRequest& r) { r.field = 0; },
           [](RowRequest& r) { r.rows = {5, 9, 13}; },
       }) {
    RowRequest other = request;
    change(other);
    EXPECT_FALSE(CheckReply(request, EncodeReply(other, data)));
  }
  RowRequest wider = request;
  wider.row_bytes = 8;
  EXPECT_FALSE(CheckReply(request, EncodeReply(wider, Data(3, 8))));
  // Short of data, or with a byte too many.
  std::vector<std::byte> reply = EncodeReply(request, data);
  EXPECT_FALSE(CheckReply(request, std::span(reply).first(reply.size() - 1)));
  reply.push_back(std::byte{0});
  EXPECT_FALSE(CheckReply(request, reply));
  // Garbage.
  EXPECT_FALSE(CheckReply(request, std::vector<std::byte>(8)));
  EXPECT_EQ(ReplyId(std::vector<std::byte>(8)), 0u);
}

}  // namespace
}  // namespace prescient::vol::agent
