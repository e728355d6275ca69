#include "cache/io/chunk_decoder.h"

#include <gtest/gtest.h>

#include "test_dataset.h"

namespace prescient::cache::io {
namespace {

using testing::Deflate;
using testing::MakeArray;

const Filter kShuffle4{.id = kFilterShuffle, .client_data = {4}};
const Filter kDeflate{.id = kFilterDeflate, .client_data = {6}};

TEST(ShuffleTest, MatchesHdf5ByteOrder) {
  // Elements {00 01 02 03}, {10 11 12 13}: shuffled = 00 10 01 11 02 12 03 13.
  const std::vector<std::byte> in = {std::byte{0x00}, std::byte{0x01}, std::byte{0x02},
                                     std::byte{0x03}, std::byte{0x10}, std::byte{0x11},
                                     std::byte{0x12}, std::byte{0x13}};
  std::vector<std::byte> shuffled(in.size());
  Shuffle(in, 4, shuffled);
  EXPECT_EQ(shuffled[1], std::byte{0x10});
  EXPECT_EQ(shuffled[2], std::byte{0x01});
  EXPECT_EQ(shuffled[7], std::byte{0x13});
  std::vector<std::byte> back(in.size());
  Unshuffle(shuffled, 4, back);
  EXPECT_EQ(back, in);
}

TEST(ShuffleTest, RoundTripsWithTrailingBytesAndOddSizes) {
  for (const std::size_t element_size : {1u, 2u, 3u, 8u, 16u}) {
    const std::vector<std::byte> in = MakeArray(1001, 1);  // not a multiple of most sizes
    std::vector<std::byte> shuffled(in.size()), back(in.size());
    Shuffle(in, element_size, shuffled);
    if (element_size > 1) {
      EXPECT_NE(shuffled, in);
    }
    // HDF5 leaves the bytes past the last whole element in place.
    const std::size_t tail = in.size() % element_size;
    EXPECT_TRUE(std::equal(in.end() - static_cast<std::ptrdiff_t>(tail), in.end(),
                           shuffled.end() - static_cast<std::ptrdiff_t>(tail)));
    Unshuffle(shuffled, element_size, back);
    EXPECT_EQ(back, in) << "element size " << element_size;
  }
}

TEST(InflateTest, DecodesZlibStream) {
  const std::vector<std::byte> raw = MakeArray(5000, 1);
  const std::vector<std::byte> stored = Deflate(raw, 1);
  std::vector<std::byte> out(raw.size());
  ASSERT_TRUE(Inflate(stored, out).ok());
  EXPECT_EQ(out, raw);
}

TEST(InflateTest, CorruptStreamIsCorruptionNotCrash) {
  const std::vector<std::byte> raw(4096, std::byte{7});
  std::vector<std::byte> stored = Deflate(raw);
  for (std::size_t i = 2; i < stored.size(); i += 3) stored[i] ^= std::byte{0x5a};
  std::vector<std::byte> out(raw.size());
  const Status status = Inflate(stored, out);
  EXPECT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
}

TEST(InflateTest, GarbageHeaderIsCorruption) {
  const std::vector<std::byte> garbage = MakeArray(64, 1);
  std::vector<std::byte> out(100);
  const Status status = Inflate(garbage, out);
  EXPECT_EQ(status.code(), Status::Code::kCorruption);
  EXPECT_NE(status.message().find("damaged"), std::string::npos) << status.message();
}

TEST(InflateTest, TruncatedStreamIsCorruption) {
  const std::vector<std::byte> raw = MakeArray(4096, 1);
  std::vector<std::byte> stored = Deflate(raw);
  stored.resize(stored.size() / 2);
  std::vector<std::byte> out(raw.size());
  const Status status = Inflate(stored, out);
  EXPECT_EQ(status.code(), Status::Code::kCorruption);
  EXPECT_NE(status.message().find("truncated"), std::string::npos) << status.message();
}

TEST(InflateTest, WrongDecodedSizeIsCorruption) {
  const std::vector<std::byte> raw = MakeArray(4096, 1);
  const std::vector<std::byte> stored = Deflate(raw);
  std::vector<std::byte> small(4000), large(5000);
  EXPECT_EQ(Inflate(stored, small).code(), Status::Code::kCorruption);
  const Status status = Inflate(stored, large);
  EXPECT_EQ(status.code(), Status::Code::kCorruption);
  EXPECT_NE(status.message().find("4096"), std::string::npos) << status.message();
}

TEST(DecodeChunkTest, NoFiltersViewsStoredBytes) {
  const std::vector<std::byte> raw = MakeArray(256, 1);
  DecodeBuffers buffers;
  const auto decoded = DecodeChunk(raw, {}, 0, 4, raw.size(), buffers).value();
  EXPECT_EQ(decoded.data(), raw.data());
  EXPECT_EQ(DecodeChunk(raw, {}, 0, 4, 128, buffers).status().code(), Status::Code::kCorruption);
}

TEST(DecodeChunkTest, ShuffleThenDeflateInReverseOrder) {
  const std::vector<std::byte> raw = MakeArray(1024, 4);
  std::vector<std::byte> shuffled(raw.size());
  Shuffle(raw, 4, shuffled);
  const std::vector<std::byte> stored = Deflate(shuffled);
  const std::vector<Filter> pipeline = {kShuffle4, kDeflate};
  DecodeBuffers buffers;
  const auto decoded = DecodeChunk(stored, pipeline, 0, 4, raw.size(), buffers).value();
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), raw.begin(), raw.end()));
}

TEST(DecodeChunkTest, FilterMaskSkipsStages) {
  const std::vector<std::byte> raw = MakeArray(1024, 4);
  std::vector<std::byte> shuffled(raw.size());
  Shuffle(raw, 4, shuffled);
  const std::vector<Filter> pipeline = {kShuffle4, kDeflate};
  DecodeBuffers buffers;
  // Deflate (stage 1) skipped: the chunk is stored shuffled but uncompressed.
  auto decoded = DecodeChunk(shuffled, pipeline, 0b10, 4, raw.size(), buffers).value();
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), raw.begin(), raw.end()));
  // Shuffle (stage 0) skipped: only deflated.
  const std::vector<std::byte> deflated = Deflate(raw);
  decoded = DecodeChunk(deflated, pipeline, 0b01, 4, raw.size(), buffers).value();
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), raw.begin(), raw.end()));
  // Both skipped: stored raw.
  decoded = DecodeChunk(raw, pipeline, 0b11, 4, raw.size(), buffers).value();
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), raw.begin(), raw.end()));
  // Ignoring the mask would misdecode: the raw bytes are no deflate stream.
  EXPECT_FALSE(DecodeChunk(raw, pipeline, 0, 4, raw.size(), buffers).ok());
}

TEST(DecodeChunkTest, UnsupportedFilterIsUnsupported) {
  const std::vector<std::byte> raw = MakeArray(64, 1);
  const std::vector<Filter> pipeline = {{.id = 6, .client_data = {}}};  // scale-offset
  DecodeBuffers buffers;
  EXPECT_EQ(DecodeChunk(raw, pipeline, 0, 4, 64, buffers).status().code(),
            Status::Code::kUnsupported);
  const std::vector<Filter> wrong_shuffle = {{.id = kFilterShuffle, .client_data = {8}}};
  EXPECT_EQ(DecodeChunk(raw, wrong_shuffle, 0, 4, 64, buffers).status().code(),
            Status::Code::kUnsupported);
}

}  // namespace
}  // namespace prescient::cache::io
