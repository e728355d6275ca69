#include "cache/io/random_access_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace prescient::cache::io {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/prescient_cache_io_" +
         std::to_string(::getpid()) + "_" + name;
}

std::string WriteFileAt(const std::string& path, std::size_t size) {
  std::ofstream out(path, std::ios::binary);
  for (std::size_t i = 0; i < size; ++i) out.put(static_cast<char>(i * 7));
  return path;
}

std::string WriteFile(const std::string& name, std::size_t size) {
  return WriteFileAt(TempPath(name), size);
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

// Pages of [offset, offset + length) of `path` in the page cache (mincore).
std::size_t ResidentPages(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const int fd = ::open(path.c_str(), O_RDONLY);
  void* map = ::mmap(nullptr, offset + length, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return 0;
  std::vector<unsigned char> resident((offset + length + page - 1) / page);
  ::mincore(map, offset + length, resident.data());
  ::munmap(map, offset + length);
  std::size_t count = 0;
  for (std::size_t i = offset / page; i < resident.size(); ++i) count += resident[i] & 1;
  return count;
}

// A file whose pages can be dropped from the page cache: in TMPDIR unless
// that is a tmpfs (whose pages cannot be), else in the working directory.
std::string WriteDroppableFile(const std::string& name, std::size_t size) {
  std::string path = WriteFile(name, size);
  struct statfs fs{};
  if (::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    std::remove(path.c_str());
    path = WriteFileAt("prescient_cache_io_" + std::to_string(::getpid()) + "_" + name, size);
  }
  return path;
}

// ResidentPages once `want` pages are resident (advice is read asynchronously), or after 2 s.
std::size_t AwaitResidentPages(const std::string& path, std::uint64_t offset, std::uint64_t length,
                               std::size_t want) {
  std::size_t resident = ResidentPages(path, offset, length);
  for (int i = 0; i < 200 && resident < want; ++i) {
    ::usleep(10000);
    resident = ResidentPages(path, offset, length);
  }
  return resident;
}

// What this thread's read syscalls returned so far (rchar in
// /proc/thread-self/io), or nothing where the kernel does not account it.
std::optional<std::uint64_t> BytesReadByThisThread() {
  std::ifstream io("/proc/thread-self/io");
  std::string name;
  std::uint64_t value = 0;
  while (io >> name >> value) {
    if (name == "rchar:") return value;
  }
  return std::nullopt;
}

TEST(PosixFileTest, TrailingSkipIsBroughtIntoThePageCacheNotRead) {
  // A miss reads a row and HDF5's sieve size after it; the bytes after the
  // row are for the page cache, not for the caller.
  const std::string path = WriteDroppableFile("trailing", 600000);
  auto file = PosixFile::Open(path, AccessPattern::kRandom).value();
  ASSERT_TRUE(DropFromPageCache(file->fd()).ok());
  std::vector<std::byte> row(16384);
  const std::vector<ScatterPiece> pieces = {{row.data(), row.size()}, {nullptr, 49152}};
  ASSERT_TRUE(file->ReadScattered(131072, pieces).ok());
  for (std::size_t j = 0; j < row.size(); ++j) {
    ASSERT_EQ(row[j], static_cast<std::byte>(((131072 + j) * 7) & 0xff)) << j;
  }
  // Only the wanted bytes must exist: a skip past the end of the file is no error.
  const std::vector<ScatterPiece> past_end = {{row.data(), 1000}, {nullptr, 65536}};
  EXPECT_TRUE(file->ReadScattered(598000, past_end).ok());
  EXPECT_EQ(row[1], static_cast<std::byte>((598001 * 7) & 0xff));

  // The skipped range reaches the page cache (asynchronously), where a file
  // system lets pages be dropped at all (not tmpfs).
  if (ResidentPages(path, 196608, 49152) > 0) {
    std::remove(path.c_str());
    GTEST_SKIP() << "this file system keeps the pages of " << path;
  }
  ASSERT_TRUE(DropFromPageCache(file->fd()).ok());
  ASSERT_TRUE(file->ReadScattered(131072, pieces).ok());
  const std::size_t skipped_pages = 49152 / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(AwaitResidentPages(path, 147456, 49152, skipped_pages), skipped_pages)
      << "pages of the skipped 48 KiB in the page cache";
  std::remove(path.c_str());
}

TEST(PosixFileTest, ALeadingSkipIsBroughtIntoThePageCacheNotRead) {
  // A miss in the middle of its window: the window's rows before it are for
  // the page cache, as those after it are. Only the row is read: the discard
  // buffer never sees the bytes before it (a file that lacks them is no error).
  const std::string path = WriteDroppableFile("leading", 600000);
  auto file = PosixFile::Open(path, AccessPattern::kRandom).value();
  std::vector<std::byte> row(16384);
  const std::vector<ScatterPiece> pieces = {
      {nullptr, 32768}, {row.data(), row.size()}, {nullptr, 16384}};
  const std::optional<std::uint64_t> read_before = BytesReadByThisThread();
  ASSERT_TRUE(file->ReadScattered(65536, pieces).ok());
  const std::optional<std::uint64_t> read_after = BytesReadByThisThread();
  for (std::size_t j = 0; j < row.size(); ++j) {
    ASSERT_EQ(row[j], static_cast<std::byte>(((65536 + 32768 + j) * 7) & 0xff)) << j;
  }
  if (read_before && read_after) {  // the row, and the few bytes of reading /proc itself
    EXPECT_GE(*read_after - *read_before, row.size());
    EXPECT_LT(*read_after - *read_before, row.size() + 4096) << "the 32 KiB before were read";
  }
  // The whole window reaches the page cache, where a file system lets pages
  // be dropped at all (not tmpfs).
  ASSERT_TRUE(DropFromPageCache(file->fd()).ok());
  if (ResidentPages(path, 0, 600000) > 0) {
    std::remove(path.c_str());
    GTEST_SKIP() << "this file system keeps the pages of " << path;
  }
  ASSERT_TRUE(file->ReadScattered(65536, pieces).ok());
  const std::size_t window_pages = 65536 / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(AwaitResidentPages(path, 65536, 65536, window_pages), window_pages)
      << "pages of the window in the page cache";
  EXPECT_EQ(ResidentPages(path, 0, 65536), 0u) << "nothing before the window";
  std::remove(path.c_str());
}

TEST(PosixFileTest, ALeadingSkipOfAFileThatEndsEarlyIsNoError) {
  // Only the wanted bytes must exist, on either side of them.
  const std::string path = WriteFile("leading_short", 1000);
  auto file = PosixFile::Open(path).value();
  std::vector<std::byte> row(100);
  const std::vector<ScatterPiece> pieces = {{nullptr, 500}, {row.data(), 100}, {nullptr, 65536}};
  ASSERT_TRUE(file->ReadScattered(0, pieces).ok());
  EXPECT_EQ(row[0], static_cast<std::byte>((500 * 7) & 0xff));
  const std::vector<ScatterPiece> past_end = {{nullptr, 950}, {row.data(), 100}};
  EXPECT_FALSE(file->ReadScattered(0, past_end).ok());
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
