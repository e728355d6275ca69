// The filters of filter_codecs.h undone against chunks their reference HDF5
// plugins wrote: 96 uint16 values (a ramp of 32, 32 repeats of 0x4142, 32
// random), one chunk, written by h5py 3.13 with h5py's LZF filter and
// Debian trixie's HDF5 plugins (hdf5-filter-plugin 0.0~git20221111: LZ4 with
// blocks of 64 bytes; hdf5-filter-plugin-blosc-serial with libblosc 1.21.5:
// blosclz + byte shuffle, zstd + bitshuffle; bitshuffle 0.5.2 with
// Zstandard; bzip2 at level 9), read back as stored with Dataset.id.read_direct_chunk.
#include "cache/io/filter_codecs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/io/bitshuffle.h"
#include "cache/io/block_codecs.h"
#include "cache/io/blosc2_frames.h"
#include "cache/io/chunk_decoder.h"
#include "cache/io/lzf.h"
#include "test_dataset.h"

namespace prescient::cache::io {
namespace {

using testing::Hex;

const std::vector<std::byte> kValues =
    Hex("00000100020003000400050006000700080009000a000b000c000d000e000f0010001100120013001400150016"
        "001700180019001a001b001c001d001e001f004241424142414241424142414241424142414241424142414241"
        "4241424142414241424142414241424142414241424142414241424142414241424142414241e4f105a025afae"
        "e50a9492c669d5a639370ed74cf948a0dfa0e95901f17f3bd2a5210bcc7c1eca7703d1934d725746472eb83e41"
        "8dfdf071677a29812095b18d");

// Two literal runs of 32, a literal of 2, a reference of 62 bytes at
// distance 2 (a long length: the extra length byte), literal runs.
const std::vector<std::byte> kLzf =
    Hex("1f00000100020003000400050006000700080009000a000b000c000d000e000f001f1000110012001300140015"
        "0016001700180019001a001b001c001d001e001f00014241e035011fe4f105a025afaee50a9492c669d5a63937"
        "0ed74cf948a0dfa0e95901f17f3bd21fa5210bcc7c1eca7703d1934d725746472eb83e418dfdf071677a298120"
        "95b18d");

// Blocks of 64 bytes: the first and last stored as they are, the middle one
// (the repeats) an LZ4 block of 12 bytes.
const std::vector<std::byte> kLz4 =
    Hex("00000000000000c0000000400000004000000100020003000400050006000700080009000a000b000c000d000e"
        "000f0010001100120013001400150016001700180019001a001b001c001d001e001f000000000c2f4241020026"
        "50414241424100000040e4f105a025afaee50a9492c669d5a639370ed74cf948a0dfa0e95901f17f3bd2a5210b"
        "cc7c1eca7703d1934d725746472eb83e418dfdf071677a29812095b18d");

const std::vector<std::byte> kBloscLzShuffle =
    Hex("02011102c0000000c00000008a00000014000000720000003f000102030405060708090a0b0c0d0e0f10111213"
        "1415161718191a1b1c1d1e1f0042e016001fe40525ae0a9269a637d7f9a0a059f13ba50b7cca039372462e3e8d"
        "f0672920b10000e016000041e016001ff1a0afe594c6d5390e4c48dfe9017fd221cc1e77d14d5747b841fd717a"
        "81958d");

const std::vector<std::byte> kBloscZstdBitshuffle =
    Hex("02017402c0000000c000000094000000140000007c000000785e5bb56ad52a0620707b6ebce50c10fc07821dcd"
        "bf843f000148bc9fb9559ce13f100241c4123e750686ff60b6c2f3942e0628387bd7f5378806e9754c3b230113"
        "5f19a7d903133f5bf1f31d4c5ce5e4190118bbc6fbdd1118bb255e6d2a8c7df1444c2c8cdd1fc0290b3327f3de"
        "2f399878fd0ca1a70070ef3d36");

// Bitshuffle with Zstandard: the 12-byte header, one block's length (141)
// and its Zstandard frame, which holds the block's bitshuffled bytes.
const std::vector<std::byte> kBitshuffleZstd =
    Hex("00000000000000c0000020000000008d28b52ffd20c0250400b405aaaaaaaa0000000046e733b4ccccccccffff"
        "ffffb883fa13f0f0f0f08f03851700ff00ff58a40e270000ff20e7648acddd45fb4166cc18a95e298ccd78f9ee"
        "24c9cc107c4beec4845f2695d1c85c5d8f50091d69defa1e7f9812e51300403486002010400820020140100800"
        "020184004276127d15000481002b41c09917e3ac359d");
const std::vector<std::uint32_t> kBitshuffleZstdData = {0, 5, 2, 0, 3};

// bzip2 (307): one stream, "BZh9" and its blocks.
const std::vector<std::byte> kBzip2 =
    Hex("425a6839314159265359a06009e20000007fffffffffffe22100a931c600a000a03094a0021e004301a0400114"
        "3280862060222000742b520000001a0000003469a066883d4cd4f26a153d50d3434d1a1a313434006831061193"
        "4034c1006dc1224ca1e591326ce26795428974a9d432ad634e3eba162cda46da3a404b80be80c2f61840649210"
        "8425525975fa6fd4c76f2a0000704a2a80000b7274a360e323a36da72c30e4b215567bfb398e7219b36c648533"
        "5a279de2107423f8bb9229c2848503004f10");

// Blosc2 (32026) as PyTables 3.10.2 writes it (libblosc2 2.17.1): a frame
// of one chunk. Flat: the values above, Zstandard + byte shuffle, client
// data (1, 192, 2, 192, 5, 1, 5). Grid: the same values as an 8 x 12 B2ND
// array (bitshuffle, BloscLZ, which stored them as they are). Edge: the
// first 3 x 4 chunk of arange(35, int32).reshape(5, 7), B2ND with LZ4.
const std::vector<std::byte> kBlosc2Flat =
    Hex("9ea862326672616d6500d200000061cf000000000000015ea412005503d300000000000000c0d3000000000000"
        "00b2d200000002d2000000c0d2000000c0d10000d10001c2d8060000000000010500000000000000000093cd00"
        "07de0000dc000005018502c0000000c0000000b200000000000000000105000000000000000000240000005100"
        "000028b52ffd20604502001404000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
        "42e40525ae0a9269a637d7f9a0a059f13ba50b7cca039372462e3e8df0672920b1010069c0133500000028b52f"
        "fd20606501003402000041f1a0afe594c6d5390e4c48dfe9017fd221cc1e77d14d5747b841fd717a81958d0200"
        "a01122c00205010708080000000800000028000000000000000001000000000000000000000000000000000000"
        "940193cd0006de0000dc0000ce00000023d80000000000000000000000000000000000");
const std::vector<std::byte> kBlosc2Grid =
    Hex("9ea862326672616d6500d2000000a5cf00000000000001d0a412005003d300000000000000c0d3000000000000"
        "00e0d200000002d2000000c0d2000000c0d10000d10001c2d8060000000000020000000000000000000093cd00"
        "11de0001a462326e64d20000006bdc0001c60000003597000292d30000000000000008d3000000000000000c92"
        "d200000008d20000000c92d200000008d20000000c00db000000037c563205011702c0000000c0000000e00000"
        "000000000000020000000000000000000000000100020003000400050006000700080009000a000b000c000d00"
        "0e000f0010001100120013001400150016001700180019001a001b001c001d001e001f00424142414241424142"
        "414241424142414241424142414241424142414241424142414241424142414241424142414241424142414241"
        "42414241424142414241e4f105a025afaee50a9492c669d5a639370ed74cf948a0dfa0e95901f17f3bd2a5210b"
        "cc7c1eca7703d1934d725746472eb83e418dfdf071677a29812095b18d05010708080000000800000028000000"
        "000000000001000000000000000000000000000000000000940193cd0006de0000dc0000ce00000023d8000000"
        "0000000000000000000000000000");
const std::vector<std::byte> kBlosc2Edge =
    Hex("9ea862326672616d6500d2000000a5cf000000000000012fa412009103d30000000000000030d3000000000000"
        "003fd200000004d200000030d200000030d10000d10001c2d8060000000000010100000000000000000093cd00"
        "11de0001a462326e64d20000006bdc0001c60000003597000292d30000000000000003d3000000000000000492"
        "d200000003d20000000492d200000003d20000000400db000000037c56340501350430000000300000003f0000"
        "00000000000001010000000000000000002400000017000000df000102030708090a0e0f10110001000b500000"
        "000000050107080800000008000000280000000000000000010000000000000000000000000000000000009401"
        "93cd0006de0000dc0000ce00000023d80000000000000000000000000000000000");
// B2ND frames with blocks smaller than the chunk, padded at its far edges,
// made as the filter makes them (b2nd_from_cbuffer, b2nd_to_cframe; byte
// shuffle): 5 x 7 int32 in blocks of 2 x 3 (LZ4), 3 x 4 x 5 uint16 in blocks
// of 2 x 2 x 3 (Zstandard); byte b of element i (C order) is 7 i + 3 b.
const std::vector<std::byte> kBlosc2Padded2d =
    Hex("9ea862326672616d6500d2000000a5cf00000000000001e8a412005103d300000000000000d8d3000000000000"
        "00f8d200000004d200000018d2000000d8d10000d10001c2d8060000000000010100000000000000000093cd00"
        "11de0001a462326e64d20000006bdc0001c60000003597000292d30000000000000005d3000000000000000792"
        "d200000005d20000000792d200000002d20000000300db000000037c563205013704d800000018000000f80000"
        "000000000000010100000000000000000000030609070a0d100e1114173134373a383b3e413f42454815181b1e"
        "1c1f22252326292c46494c4f4d50535654575a5d2a2d303300000000000000005b5e6164000000000000000062"
        "65686b696c6f72707376799396999c9a9da0a3a1a4a7aa777a7d807e81848785888b8ea8abaeb1afb2b5b8b6b9"
        "bcbf8c8f92950000000000000000bdc0c3c60000000000000000c4c7cacdcbced1d4d2d5d8db00000000000000"
        "0000000000d9dcdfe2e0e3e6e9e7eaedf0000000000000000000000000eef1f4f7000000000000000000000000"
        "000000000000000005010708080000000800000028000000000000000001000000000000000000000000000000"
        "000000940193cd0006de0000dc0000ce00000023d80000000000000000000000000000000000");
const std::vector<std::byte> kBlosc2Padded3d =
    Hex("9ea862326672616d6500d2000000b8cf00000000000001e3a412005503d300000000000000c0d3000000000000"
        "00e0d200000002d200000018d2000000c0d10000d10001c2d8060000000000010500000000000000000093cd00"
        "11de0001a462326e64d20000006bdc0001c60000004897000393d30000000000000003d30000000000000004d3"
        "000000000000000593d200000003d200000004d20000000593d200000002d200000002d20000000300db000000"
        "037c563205019702c000000018000000e0000000000000000001050000000000000000000003070a0e1123262a"
        "2d31348c8f93969a9dafb2b6b9bdc015181c1f0000383b3f420000a1a4a8ab0000c4c7cbce000046494d505457"
        "696c7073777ad2d5d9dce0e3f5f8fcff03065b5e626500007e8185880000e7eaeef100000a0d11140000181b1f"
        "2226293b3e4245494c0000000000000000000000002d30343700005053575a0000000000000000000000000000"
        "5e6165686c6f8184888b8f9200000000000000000000000073767a7d000096999da00000000000000000000000"
        "000000050107080800000008000000280000000000000000010000000000000000000000000000000000009401"
        "93cd0006de0000dc0000ce00000023d80000000000000000000000000000000000");

std::vector<std::byte> Decode(int id, const std::vector<std::byte>& stored,
                              std::vector<std::uint32_t> client_data = {}, std::size_t size = 192,
                              Status* status = nullptr) {
  const FilterCodec* codec = FindFilterCodec(id);
  EXPECT_NE(codec, nullptr) << "filter " << id << " is not in this build's table";
  if (codec == nullptr) return {};
  std::vector<std::byte> out(size);
  const Status decoded = codec->decode(stored, client_data, 2, out);
  if (status != nullptr) *status = decoded;
  EXPECT_TRUE(status != nullptr || decoded.ok()) << decoded.message();
  return out;
}

TEST(FilterCodecsTest, LzfIsUndone) { EXPECT_EQ(Decode(kFilterLzf, kLzf), kValues); }

TEST(FilterCodecsTest, Hdf5Lz4IsUndoneBlockByBlock) {
  ASSERT_TRUE(Lz4Available()) << "built without liblz4";
  EXPECT_EQ(Decode(kFilterLz4, kLz4), kValues);
}

TEST(FilterCodecsTest, BloscIsUndoneWhateverItsCodecAndShuffle) {
  ASSERT_NE(FindFilterCodec(kFilterBlosc), nullptr) << "built without libblosc";
  EXPECT_EQ(Decode(kFilterBlosc, kBloscLzShuffle), kValues);
  EXPECT_EQ(Decode(kFilterBlosc, kBloscZstdBitshuffle), kValues);
}

TEST(FilterCodecsTest, BitshuffleWithZstandardIsUndone) {
  ASSERT_TRUE(ZstdAvailable()) << "built without libzstd";
  EXPECT_EQ(Decode(kFilterBitshuffle, kBitshuffleZstd, kBitshuffleZstdData), kValues);
}

TEST(FilterCodecsTest, ZstandardFilterIsOneFrame) {
  ASSERT_TRUE(ZstdAvailable()) << "built without libzstd";
  // The frame inside the bitshuffle chunk above, as the Zstandard filter
  // would store it: it decodes to the bitshuffled values.
  const std::vector<std::byte> frame(kBitshuffleZstd.begin() + 16, kBitshuffleZstd.end());
  std::vector<std::byte> shuffled(kValues.size());
  BitshuffleBlock(kValues.data(), 96, 2, shuffled.data());
  EXPECT_EQ(Decode(kFilterZstd, frame), shuffled);
}

TEST(FilterCodecsTest, Bzip2IsOneStream) {
  ASSERT_TRUE(Bzip2Available()) << "built without libbz2";
  EXPECT_EQ(Decode(kFilterBzip2, kBzip2, {9}), kValues);
  // What follows the end of the stream is ignored, as the reference filter does.
  std::vector<std::byte> padded = kBzip2;
  padded.resize(padded.size() + 7, std::byte{0x5a});
  EXPECT_EQ(Decode(kFilterBzip2, padded, {9}), kValues);
}

TEST(FilterCodecsTest, Blosc2FramesAreUndoneFlatOrAsB2ndArrays) {
  ASSERT_TRUE(Blosc2Available()) << "built without libblosc2";
  EXPECT_EQ(Decode(kFilterBlosc2, kBlosc2Flat, {1, 192, 2, 192, 5, 1, 5}), kValues);
  EXPECT_EQ(Decode(kFilterBlosc2, kBlosc2Grid, {1, 192, 2, 192, 5, 2, 0, 2, 8, 12}), kValues);
  // Without the rank and shape (an older writer's client data) the array's own are used.
  EXPECT_EQ(Decode(kFilterBlosc2, kBlosc2Grid, {1, 192, 2, 192, 5, 2, 0}), kValues);
  std::vector<std::byte> edge;
  for (std::int32_t row = 0; row < 3; ++row) {
    for (std::int32_t col = 0; col < 4; ++col) {
      const std::int32_t value = row * 7 + col;  // little-endian, as written
      for (int b = 0; b < 4; ++b) edge.push_back(static_cast<std::byte>((value >> (8 * b)) & 0xff));
    }
  }
  EXPECT_EQ(Decode(kFilterBlosc2, kBlosc2Edge, {1, 48, 4, 48, 9, 1, 1, 2, 3, 4}, 48), edge);
  auto ramp = [](std::size_t elements, std::size_t element_size) {
    std::vector<std::byte> bytes;
    for (std::size_t i = 0; i < elements; ++i) {
      for (std::size_t b = 0; b < element_size; ++b)
        bytes.push_back(static_cast<std::byte>((7 * i + 3 * b) & 0xff));
    }
    return bytes;
  };
  EXPECT_EQ(Decode(kFilterBlosc2, kBlosc2Padded2d, {1, 24, 4, 140, 5, 1, 1, 2, 5, 7}, 140),
            ramp(35, 4));
  EXPECT_EQ(Decode(kFilterBlosc2, kBlosc2Padded3d, {1, 24, 2, 120, 5, 1, 5, 3, 3, 4, 5}, 120),
            ramp(60, 2));
  // A shape other than the dataset's chunk is refused, as the reference filter refuses it.
  Status status;
  Decode(kFilterBlosc2, kBlosc2Edge, {1, 48, 4, 48, 9, 1, 1, 2, 4, 3}, 48, &status);
  EXPECT_EQ(status.code(), Status::Code::kCorruption) << status.message();
  Decode(kFilterBlosc2, kBlosc2Edge, {1, 48, 4, 48, 9, 1, 1, 1, 12}, 48, &status);
  EXPECT_EQ(status.code(), Status::Code::kCorruption) << status.message();
}

TEST(FilterCodecsTest, ShuffleThenLzfAsAPipeline) {
  // h5py's compression="lzf", shuffle=True: LZF over the shuffled bytes.
  std::vector<std::byte> unshuffled(kValues.size());
  Unshuffle(kValues, 2, unshuffled);
  const std::vector<Filter> pipeline = {{.id = kFilterShuffle, .client_data = {2}},
                                        {.id = kFilterLzf, .client_data = {4, 261, 192}}};
  DecodeBuffers buffers;
  Result<std::span<const std::byte>> decoded =
      DecodeChunk(kLzf, pipeline, /*filter_mask=*/0, 2, kValues.size(), buffers);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(std::equal(decoded.value().begin(), decoded.value().end(), unshuffled.begin(),
                         unshuffled.end()));
  // LZF skipped for this chunk (its mask bit: stored as it was shuffled).
  std::vector<std::byte> shuffled(kValues.size());
  Shuffle(kValues, 2, shuffled);
  decoded = DecodeChunk(shuffled, pipeline, /*filter_mask=*/0b10, 2, kValues.size(), buffers);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(
      std::equal(decoded.value().begin(), decoded.value().end(), kValues.begin(), kValues.end()));
}

// Fletcher-32 as h5py 3.13 / HDF5 1.14.5 stored it (fletcher32=True): the
// values above with their checksum, alone and after shuffle + deflate; and
// 1,001 bytes (i * 2654435761 mod 2^32 mod 251), an odd length past the
// 360-word fold.
const std::vector<std::byte> kFletcherGzip =
    Hex("785e6360646266616563e7e0e4e2e6e1e5e3171014121611151397909492969195937722009eb0aaaee39a94b9"
        "ccfcfacf050b223f5a2fe5ae39c53cb9c84dcfaef743baa6c2460602c09100f8b860fdd329c7ae5af2f978dc7f"
        "c9587f49f18c5cf945df70f71d8e7f0bab1aa7f602002a00321d9c75b83a");

TEST(FilterCodecsTest, Fletcher32IsVerifiedAndDropped) {
  const std::vector<Filter> alone = {{.id = kFilterFletcher32, .client_data = {}}};
  std::vector<std::byte> stored = kValues;
  const std::vector<std::byte> checksum = Hex("440aac26");
  stored.insert(stored.end(), checksum.begin(), checksum.end());
  DecodeBuffers buffers;
  Result<std::span<const std::byte>> decoded =
      DecodeChunk(stored, alone, 0, 2, kValues.size(), buffers);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(
      std::equal(decoded.value().begin(), decoded.value().end(), kValues.begin(), kValues.end()));
  // HDF5 before 1.6.3 wrote the halves' bytes swapped; HDF5 reads both.
  std::vector<std::byte> old = stored;
  std::swap(old[old.size() - 4], old[old.size() - 3]);
  std::swap(old[old.size() - 2], old[old.size() - 1]);
  EXPECT_TRUE(DecodeChunk(old, alone, 0, 2, kValues.size(), buffers).ok());
  // One flipped bit of the data: the read fails, as HDF5's does.
  stored[50] ^= std::byte{0x04};
  EXPECT_EQ(DecodeChunk(stored, alone, 0, 2, kValues.size(), buffers).status().code(),
            Status::Code::kCorruption);

  const std::vector<Filter> pipeline = {{.id = kFilterShuffle, .client_data = {2}},
                                        {.id = kFilterDeflate, .client_data = {4}},
                                        {.id = kFilterFletcher32, .client_data = {}}};
  decoded = DecodeChunk(kFletcherGzip, pipeline, 0, 2, kValues.size(), buffers);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(
      std::equal(decoded.value().begin(), decoded.value().end(), kValues.begin(), kValues.end()));

  std::vector<std::byte> odd(1001);
  for (std::size_t i = 0; i < odd.size(); ++i)
    odd[i] = static_cast<std::byte>(static_cast<std::uint32_t>(i) * 2654435761u % 251);
  EXPECT_EQ(Fletcher32(odd), 0xcca62ca2u);  // stored as a22ca6cc
}

// Every damage a stored chunk can have is Corruption, never a read or write
// outside the buffers (the ASan build runs these).
TEST(FilterCodecsTest, DamagedChunksAreCorruption) {
  struct Case {
    int id;
    std::vector<std::byte> stored;
    std::vector<std::uint32_t> client_data;
    std::size_t size = 192;
  };
  const std::vector<Case> cases = {
      {kFilterLzf, kLzf, {}},
      {kFilterLz4, kLz4, {}},
      {kFilterBlosc, kBloscLzShuffle, {}},
      {kFilterBlosc, kBloscZstdBitshuffle, {}},
      {kFilterBitshuffle, kBitshuffleZstd, kBitshuffleZstdData},
      {kFilterBzip2, kBzip2, {9}},
      {kFilterBlosc2, kBlosc2Flat, {1, 192, 2, 192, 5, 1, 5}},
      {kFilterBlosc2, kBlosc2Grid, {1, 192, 2, 192, 5, 2, 0, 2, 8, 12}},
      {kFilterBlosc2, kBlosc2Edge, {1, 48, 4, 48, 9, 1, 1, 2, 3, 4}, 48},
      {kFilterBlosc2, kBlosc2Padded3d, {1, 24, 2, 120, 5, 1, 5, 3, 3, 4, 5}, 120}};
  for (const Case& c : cases) {
    if (FindFilterCodec(c.id) == nullptr) continue;
    for (std::size_t cut : {std::size_t{1}, c.stored.size() / 2, c.stored.size() - 1}) {
      Status status;
      Decode(c.id, std::vector<std::byte>(c.stored.begin(), c.stored.begin() + cut), c.client_data,
             c.size, &status);
      EXPECT_EQ(status.code(), Status::Code::kCorruption) << c.id << " cut at " << cut;
    }
    Status status;
    Decode(c.id, c.stored, c.client_data, c.size - 2, &status);  // not the chunk's size
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << c.id << " into " << c.size - 2;
    // Every bit and every byte flipped in turn: an error or other bytes,
    // never a crash, a leak or a read out of bounds (the ASan build).
    for (std::size_t i = 0; i < c.stored.size(); ++i) {
      for (unsigned mask : {0x01u, 0x02u, 0x04u, 0x08u, 0x10u, 0x20u, 0x40u, 0x80u, 0xffu}) {
        std::vector<std::byte> flipped = c.stored;
        flipped[i] ^= static_cast<std::byte>(mask);
        Decode(c.id, flipped, c.client_data, c.size, &status);
      }
    }
  }
  // LZF: a reference before the start of the chunk.
  Status status;
  Decode(kFilterLzf, Hex("2005"), {}, 192, &status);
  EXPECT_EQ(status.code(), Status::Code::kCorruption);
  // LZ4: a block size of 0 (the reference filter would never end).
  Decode(kFilterLz4, Hex("00000000000000c000000000"), {}, 192, &status);
  EXPECT_EQ(status.code(), Status::Code::kCorruption);
}

TEST(CheckRawDecodableTest, TheTablesFiltersWithTheirSettings) {
  const std::vector<Filter> ok = {{.id = 2, .client_data = {4}}, {.id = 1, .client_data = {9}}};
  EXPECT_TRUE(CheckRawDecodable(ok, 4).ok());
  const std::vector<Filter> lzf = {{.id = kFilterLzf, .client_data = {4, 261, 4096}}};
  EXPECT_TRUE(CheckRawDecodable(lzf, 4).ok());
  // Bitshuffle+LZ4 as its HDF5 filter records it (version, element size, block, LZ4).
  const std::vector<Filter> detector = {{.id = 32008, .client_data = {0, 5, 4, 0, 2}}};
  EXPECT_TRUE(CheckRawDecodable(detector, 4).ok());
  EXPECT_EQ(CheckRawDecodable(detector, 2).code(), Status::Code::kUnsupported);
  // Blosc2 needs the element size its frames were made for, which must be the dataset's.
  if (Blosc2Available()) {
    const std::vector<Filter> blosc2 = {{.id = kFilterBlosc2, .client_data = {1, 0, 4, 4096}}};
    EXPECT_TRUE(CheckRawDecodable(blosc2, 4).ok());
    EXPECT_EQ(CheckRawDecodable(blosc2, 8).code(), Status::Code::kUnsupported);
    const std::vector<Filter> short_data = {{.id = kFilterBlosc2, .client_data = {1, 0, 4}}};
    EXPECT_EQ(CheckRawDecodable(short_data, 4).code(), Status::Code::kUnsupported);
  }
  const std::vector<Filter> scaleoffset = {{.id = 6, .client_data = {}}};
  const Status refused = CheckRawDecodable(scaleoffset, 4);
  EXPECT_EQ(refused.code(), Status::Code::kUnsupported);
  EXPECT_NE(refused.message().find("filter id 6 at pipeline stage 0"), std::string::npos)
      << refused.message();
  // A checksum is undone first only when it was applied last.
  const std::vector<Filter> checked = {{.id = kFilterShuffle, .client_data = {4}},
                                       {.id = kFilterDeflate, .client_data = {4}},
                                       {.id = kFilterFletcher32, .client_data = {}}};
  EXPECT_TRUE(CheckRawDecodable(checked, 4).ok());
  const std::vector<Filter> inner = {{.id = kFilterFletcher32, .client_data = {}},
                                     {.id = kFilterDeflate, .client_data = {4}}};
  EXPECT_EQ(CheckRawDecodable(inner, 4).code(), Status::Code::kUnsupported);
  // Two compressors: a stage would not decode to the chunk's size.
  const std::vector<Filter> twice = {{.id = kFilterLzf, .client_data = {}},
                                     {.id = kFilterDeflate, .client_data = {4}}};
  EXPECT_EQ(CheckRawDecodable(twice, 4).code(), Status::Code::kUnsupported);
  // Bitshuffle without compression reorders only: deflate after it is fine.
  const std::vector<Filter> reorder = {{.id = 32008, .client_data = {0, 5, 4, 0, 0}},
                                       {.id = kFilterDeflate, .client_data = {4}}};
  EXPECT_TRUE(CheckRawDecodable(reorder, 4).ok());
}

}  // namespace
}  // namespace prescient::cache::io
