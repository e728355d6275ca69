// The bitshuffle filter undone (bitshuffle.h), against bytes the reference
// library wrote: bitshuffle 0.5.2 (Debian's python3 package), 29 uint32
// values (i * 2654435761 mod 4294967291) in blocks of 8 elements: three
// blocks and a tail of 5 elements stored as they are.
//   bitshuffle.bitshuffle(a, 8), bitshuffle.compress_lz4(a, 8)
// (compress_lz4 writes the blocks; the HDF5 filter puts the 12-byte header
// of decoded size and block bytes before them).
#include "cache/io/bitshuffle.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cache/io/chunk_decoder.h"
#include "test_dataset.h"

namespace prescient::cache::io {
namespace {

using testing::Hex;

const std::vector<std::byte> kValues = Hex(
    "00000000b179379e62f36e3c136da6dac4e6dd787560151726da4cb5d753845388cdbbf13947f38feac02a2e9b3a"
    "62cc4cb4996afd2dd108aea708a75f214045109b77e3c114af81728ee61f23081ebed481555c85fb8cfa3675c4"
    "98e7eefb36986833d549e26a73fa5ba211abd5d9af5c4f114e");
const std::vector<std::byte> kShuffled = Hex(
    "aaccf000aa66b4928ed4184ac63efe54320efe54320e5498e0aa661efe54984aaaccf0ffaa66b46de34a732918f8"
    "0755330f0055330faa33c356ce3e0155994baaccf00055cc96b271a5c6ad63e0e0b5938f7faa9987d5e607ad9c"
    "7cfca9316b986833d549e26a73fa5ba211abd5d9af5c4f114e");
const std::vector<std::byte> kLz4Blocks = Hex(
    "00000021f003aaccf000aa66b4928ed4184ac63efe54320e0400a05498e0aa661efe54984a00000022f011aaccf0"
    "ffaa66b46de34a732918f80755330f0055330faa33c356ce3e0155994b00000022f011aaccf00055cc96b271a5"
    "c6ad63e0e0b5938f7faa9987d5e607ad9c7cfca9316b986833d549e26a73fa5ba211abd5d9af5c4f114e");

// H5Pget_filter2's client data: version 0.5, element size, block size, compression.
const std::vector<std::uint32_t> kNone = {0, 5, 4, 8, 0};
const std::vector<std::uint32_t> kLz4 = {0, 5, 4, 8, 2};

std::vector<std::byte> WithHeader(const std::vector<std::byte>& blocks) {
  std::vector<std::byte> out =
      Hex("0000000000000074"
          "00000020");  // 116 bytes, blocks of 32
  out.insert(out.end(), blocks.begin(), blocks.end());
  return out;
}

TEST(BitshuffleTest, UndoesTheReferenceLibrarysBlocks) {
  ASSERT_EQ(kValues.size(), 116u);
  std::vector<std::byte> out(kValues.size());
  ASSERT_TRUE(Unbitshuffle(kShuffled, kNone, 4, out).ok());
  EXPECT_EQ(out, kValues);
}

TEST(BitshuffleTest, UndoesTheReferenceLibrarysLz4Chunks) {
  ASSERT_TRUE(CheckBitshuffle(kLz4, 4).ok()) << "built without liblz4";
  std::vector<std::byte> out(kValues.size());
  const Status status = Unbitshuffle(WithHeader(kLz4Blocks), kLz4, 4, out);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(out, kValues);
}

// As a stage of a chunk's filter pipeline (chunk_decoder.h).
TEST(BitshuffleTest, IsAStageOfThePipeline) {
  const std::vector<Filter> pipeline = {{.id = kFilterBitshuffle, .client_data = kLz4}};
  DecodeBuffers buffers;
  const std::vector<std::byte> stored = WithHeader(kLz4Blocks);
  Result<std::span<const std::byte>> decoded =
      DecodeChunk(stored, pipeline, /*filter_mask=*/0, 4, kValues.size(), buffers);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(
      std::equal(decoded.value().begin(), decoded.value().end(), kValues.begin(), kValues.end()));
}

TEST(BitshuffleTest, ShufflingABlockIsUndone) {
  for (std::size_t element_size : {1u, 2u, 3u, 8u}) {
    std::vector<std::byte> in(64 * element_size), shuffled(in.size()), back(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i * 37 + 11);
    BitshuffleBlock(in.data(), 64, element_size, shuffled.data());
    EXPECT_NE(shuffled, in);
    UnbitshuffleBlock(shuffled.data(), 64, element_size, back.data());
    EXPECT_EQ(back, in) << element_size;
  }
}

// Blocks long enough for the SIMD path (16 groups of 8 elements at a time)
// and a remainder of groups for the scalar one, every element size it
// handles and two it leaves to the scalar loop, against the scalar forward
// transform (itself checked against the reference library above).
TEST(BitshuffleTest, LongBlocksAreUndoneWhateverTheElementSize) {
  for (std::size_t element_size : {1u, 2u, 3u, 4u, 8u, 16u}) {
    for (std::size_t elements : {128u, 8u * 133u, 4096u}) {
      std::vector<std::byte> in(elements * element_size), shuffled(in.size()), back(in.size());
      std::uint64_t state = 88172645463325252ull;
      for (std::byte& b : in) {  // xorshift: every bit position takes both values
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        b = static_cast<std::byte>(state);
      }
      BitshuffleBlock(in.data(), elements, element_size, shuffled.data());
      UnbitshuffleBlock(shuffled.data(), elements, element_size, back.data());
      EXPECT_EQ(back, in) << element_size << " bytes, " << elements << " elements";
    }
  }
}

TEST(BitshuffleTest, DamagedChunksAreCorruption) {
  std::vector<std::byte> out(kValues.size());
  std::vector<std::byte> short_chunk = WithHeader(kLz4Blocks);
  short_chunk.pop_back();
  EXPECT_EQ(Unbitshuffle(short_chunk, kLz4, 4, out).code(), Status::Code::kCorruption);
  std::vector<std::byte> bad_block = WithHeader(kLz4Blocks);
  bad_block[12 + 3] = std::byte{0x7f};  // the first block's length
  EXPECT_EQ(Unbitshuffle(bad_block, kLz4, 4, out).code(), Status::Code::kCorruption);
  std::vector<std::byte> bigger(out.size() + 4);  // the header's size is not the chunk's
  EXPECT_EQ(Unbitshuffle(WithHeader(kLz4Blocks), kLz4, 4, bigger).code(),
            Status::Code::kCorruption);
  EXPECT_EQ(Unbitshuffle(std::span(kShuffled).first(100), kNone, 4, out).code(),
            Status::Code::kCorruption);
  // A header naming blocks of 4 GiB: the decoder's buffer stays the chunk's
  // size (it was made the block's, zeroed: 7 s of page faults in the
  // damaged-chunk test).
  std::vector<std::byte> huge_block = WithHeader(kLz4Blocks);
  for (int i = 8; i < 12; ++i) huge_block[static_cast<std::size_t>(i)] = std::byte{0xff};
  huge_block[11] = std::byte{0xe0};  // a multiple of 8 elements of 4 bytes
  const std::size_t mapped = mallinfo2().hblkhd;
  EXPECT_EQ(Unbitshuffle(huge_block, kLz4, 4, out).code(), Status::Code::kCorruption);
  EXPECT_LT(mallinfo2().hblkhd, mapped + (1u << 20));
}

TEST(BitshuffleTest, SettingsItCannotUndoAreUnsupported) {
  EXPECT_EQ(CheckBitshuffle(std::vector<std::uint32_t>{0, 5, 2, 8, 2}, 4).code(),
            Status::Code::kUnsupported);  // another element size
  EXPECT_EQ(CheckBitshuffle(std::vector<std::uint32_t>{0, 5, 4, 12, 0}, 4).code(),
            Status::Code::kUnsupported);  // a block not a multiple of 8
  EXPECT_EQ(CheckBitshuffle(std::vector<std::uint32_t>{0, 5, 4, 0, 4}, 4).code(),
            Status::Code::kUnsupported);  // a codec the format does not name
  EXPECT_TRUE(CheckBitshuffle(std::vector<std::uint32_t>{0, 5, 4}, 4).ok());
}

}  // namespace
}  // namespace prescient::cache::io
