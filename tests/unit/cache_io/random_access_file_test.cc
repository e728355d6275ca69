#include "cache/io/random_access_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace prescient::cache::io {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/prescient_cache_io_" +
         std::to_string(::getpid()) + "_" + name;
}

std::string WriteFile(const std::string& name, std::size_t size) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary);
  for (std::size_t i = 0; i < size; ++i) out.put(static_cast<char>(i * 7));
  return path;
}

TEST(PosixFileTest, ReadsExactRanges) {
  const std::string path = WriteFile("read", 10000);
  auto file = PosixFile::Open(path).value();
  std::vector<std::byte> out(100);
  ASSERT_TRUE(file->ReadExact(5000, out).ok());
  EXPECT_EQ(out[1], static_cast<std::byte>((5001 * 7) & 0xff));
  EXPECT_EQ(file->Size().value(), 10000u);
  std::remove(path.c_str());
}

TEST(PosixFileTest, ReadPastEndNamesFileAndOffset) {
  const std::string path = WriteFile("short", 1000);
  auto file = PosixFile::Open(path).value();
  std::vector<std::byte> out(100);
  const Status status = file->ReadExact(950, out);
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find("file ends at 1000"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(path), std::string::npos);
  std::remove(path.c_str());
}

TEST(PosixFileTest, ScatteredReadFillsPiecesAndSkipsGaps) {
  const std::string path = WriteFile("scatter", 600000);
  auto file = PosixFile::Open(path, AccessPattern::kRandom).value();
  // More pieces than IOV_MAX, and gaps larger than the discard buffer.
  std::vector<std::vector<std::byte>> buffers;
  std::vector<ScatterPiece> pieces;
  std::vector<std::uint64_t> offsets;
  std::uint64_t at = 100;
  for (int i = 0; i < 2500; ++i) {
    const std::size_t gap = i == 7 ? 300000 : static_cast<std::size_t>(i % 3);
    pieces.push_back({nullptr, gap});
    at += gap;
    buffers.emplace_back(static_cast<std::size_t>(1 + i % 50));
    pieces.push_back({buffers.back().data(), buffers.back().size()});
    offsets.push_back(at);
    at += buffers.back().size();
  }
  ASSERT_TRUE(file->ReadScattered(100, pieces).ok());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    for (std::size_t j = 0; j < buffers[i].size(); ++j) {
      ASSERT_EQ(buffers[i][j], static_cast<std::byte>(((offsets[i] + j) * 7) & 0xff)) << i;
    }
  }
  std::vector<std::byte> tail(1000);
  const std::vector<ScatterPiece> past_end = {{nullptr, 10}, {tail.data(), tail.size()}};
  const Status status = file->ReadScattered(599000, past_end);
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find("file ends at 600000"), std::string::npos) << status.message();
  std::remove(path.c_str());
}

TEST(PosixFileTest, OpenMissingFileCarriesErrnoText) {
  const auto file = PosixFile::Open(TempPath("does-not-exist"));
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("No such file"), std::string::npos)
      << file.status().message();
}

TEST(PosixFileTest, BorrowedDescriptorStaysOpen) {
  const std::string path = WriteFile("borrow", 100);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  {
    auto borrowed = PosixFile::Borrow(fd, "borrowed");
  }
  char c;
  EXPECT_EQ(::pread(fd, &c, 1, 0), 1);  // still valid
  ::close(fd);
  std::remove(path.c_str());
}

TEST(PosixFileTest, ReadErrorOnBadDescriptorIsStatus) {
  auto file = PosixFile::Borrow(-1, "bad");
  std::vector<std::byte> out(8);
  const Status status = file->ReadExact(0, out);
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find("Bad file descriptor"), std::string::npos) << status.message();
}

TEST(DropFromPageCacheTest, WorksOnARegularFile) {
  const std::string path = WriteFile("cold", 1 << 16);
  EXPECT_TRUE(DropFromPageCache(path).ok());
  EXPECT_FALSE(DropFromPageCache(TempPath("missing")).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace prescient::cache::io
