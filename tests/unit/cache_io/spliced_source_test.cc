#include "cache/io/spliced_source.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace prescient::cache::io {
namespace {

// A file in memory whose byte i is (seed + i) mod 251; counts its requests.
class CountingFile final : public RandomAccessSource {
 public:
  CountingFile(std::uint64_t size, int seed, std::string name)
      : size_(size), seed_(seed), name_(std::move(name)) {}
  static std::byte At(int seed, std::uint64_t i) {
    return static_cast<std::byte>((seed + i) % 251);
  }
  Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const override {
    ++requests;
    if (offset + out.size() > size_) return Status::IoError(name_ + ": file ends");
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = At(seed_, offset + i);
    return Status();
  }
  Status ReadScattered(std::uint64_t offset, std::span<const ScatterPiece> pieces) const override {
    ++scattered;
    std::uint64_t total = 0;
    for (const ScatterPiece& p : pieces) total += p.size;
    if (offset + total > size_) return Status::IoError(name_ + ": file ends");
    for (const ScatterPiece& p : pieces) {
      for (std::size_t i = 0; p.data != nullptr && i < p.size; ++i)
        p.data[i] = At(seed_, offset + i);
      offset += p.size;
    }
    return Status();
  }
  Result<std::uint64_t> Size() const override { return size_; }
  const std::string& name() const override { return name_; }
  mutable int requests = 0;
  mutable int scattered = 0;

 private:
  std::uint64_t size_;
  int seed_;
  std::string name_;
};

struct Spliced {
  std::shared_ptr<CountingFile> a = std::make_shared<CountingFile>(1000, 1, "a");
  std::shared_ptr<CountingFile> b = std::make_shared<CountingFile>(1000, 77, "b");
  std::unique_ptr<SplicedSource> source;
  // [0,300) = a[500,800), [300,400) = b[0,100), [400,700) = a[0,300): given out of order.
  Spliced() {
    source = SplicedSource::Make({{.begin = 300, .bytes = 100, .file = b, .file_offset = 0},
                                  {.begin = 0, .bytes = 300, .file = a, .file_offset = 500},
                                  {.begin = 400, .bytes = 300, .file = a, .file_offset = 0}},
                                 "vds")
                 .value();
  }
  // What byte `at` of the spliced space must be.
  static std::byte Expected(std::uint64_t at) {
    if (at < 300) return CountingFile::At(1, 500 + at);
    if (at < 400) return CountingFile::At(77, at - 300);
    return CountingFile::At(1, at - 400);
  }
};

TEST(SplicedSourceTest, ReadsAcrossSeams) {
  Spliced s;
  EXPECT_EQ(s.source->Size().value(), 700u);
  std::vector<std::byte> out(650);
  ASSERT_TRUE(s.source->ReadExact(20, out).ok());
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], Spliced::Expected(20 + i)) << i;
  EXPECT_EQ(s.a->requests + s.b->requests, 3);  // one per run touched
}

TEST(SplicedSourceTest, ScatteredReadsSplitPiecesAtSeamsAndKeepGaps) {
  Spliced s;
  // Pieces straddling both seams, skipped bytes among them, an empty one.
  std::vector<std::byte> p1(250), p2(100), p3(0), p4(150);
  std::vector<ScatterPiece> pieces = {{p1.data(), p1.size()}, {nullptr, 40},
                                      {p2.data(), p2.size()}, {p3.data(), 0},
                                      {nullptr, 10},          {p4.data(), p4.size()}};
  ASSERT_TRUE(s.source->ReadScattered(10, pieces).ok());
  std::uint64_t at = 10;
  for (const ScatterPiece& piece : pieces) {
    for (std::size_t i = 0; piece.data != nullptr && i < piece.size; ++i)
      ASSERT_EQ(piece.data[i], Spliced::Expected(at + i)) << at + i;
    at += piece.size;
  }
  EXPECT_EQ(at, 560u);
  EXPECT_EQ(s.a->scattered + s.b->scattered, 3);
}

TEST(SplicedSourceTest, RefusesReadsPastItsEnd) {
  Spliced s;
  std::vector<std::byte> out(10);
  const Status status = s.source->ReadExact(695, out);
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find("vds"), std::string::npos) << status.message();
  std::vector<ScatterPiece> pieces = {{out.data(), out.size()}};
  EXPECT_FALSE(s.source->ReadScattered(691, pieces).ok());
  EXPECT_TRUE(s.source->ReadExact(700, std::span<std::byte>()).ok());
}

TEST(SplicedSourceTest, ReportsAFileThatEndsEarly) {
  auto a = std::make_shared<CountingFile>(100, 1, "short");
  auto spliced =
      SplicedSource::Make({{.begin = 0, .bytes = 200, .file = a, .file_offset = 0}}, "v").value();
  std::vector<std::byte> out(50);
  const Status status = spliced->ReadExact(80, out);
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find("short"), std::string::npos);
}

TEST(SplicedSourceTest, RefusesGapsOverlapsAndEmptyRuns) {
  auto a = std::make_shared<CountingFile>(1000, 1, "a");
  using Run = SplicedSource::Run;
  EXPECT_FALSE(SplicedSource::Make({Run{.begin = 10, .bytes = 5, .file = a}}, "v").ok());
  EXPECT_FALSE(
      SplicedSource::Make(
          {Run{.begin = 0, .bytes = 10, .file = a}, Run{.begin = 5, .bytes = 10, .file = a}}, "v")
          .ok());
  EXPECT_FALSE(SplicedSource::Make({Run{.begin = 0, .bytes = 0, .file = a}}, "v").ok());
  EXPECT_FALSE(SplicedSource::Make({Run{.begin = 0, .bytes = 10, .file = nullptr}}, "v").ok());
  EXPECT_TRUE(SplicedSource::Make({}, "empty").ok());
}

}  // namespace
}  // namespace prescient::cache::io
