// cache/base/status.h: one error type for cache/core and cache/io.
#include "cache/base/status.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "cache/io/status.h"

namespace prescient::cache {
namespace {

TEST(Status, OkIsOnePointerAndEmpty) {
  static_assert(sizeof(Status) == sizeof(void*));
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), Status::Code::kOk);
  EXPECT_TRUE(ok.message().empty());
  EXPECT_EQ(ok.ToString(), "OK");
  EXPECT_TRUE(ok.Annotate("context").ok());
}

TEST(Status, CodesAndMessagesSurviveCopiesAndAnnotation) {
  Status s = Status::Corruption("bad chunk");
  Status copy = s;
  EXPECT_EQ(copy.code(), Status::Code::kCorruption);
  EXPECT_EQ(copy.message(), "bad chunk");
  EXPECT_EQ(copy.ToString(), "corruption: bad chunk");
  const Status annotated = s.Annotate("file x");
  EXPECT_EQ(annotated.code(), Status::Code::kCorruption);
  EXPECT_EQ(annotated.message(), "file x: bad chunk");
  EXPECT_EQ(s.message(), "bad chunk");
  EXPECT_FALSE(Status::Unavailable("").message().empty());
}

TEST(Status, FromErrnoPicksTheCodeFromErrno) {
  EXPECT_EQ(Status::FromErrno(ENOSPC, "x").code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(Status::FromErrno(EMFILE, "x").code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(Status::FromErrno(ETIMEDOUT, "x").code(), Status::Code::kUnavailable);
  EXPECT_EQ(Status::FromErrno(EINVAL, "x").code(), Status::Code::kInvalidArgument);
  const Status io = Status::FromErrno(ENOENT, "open 'f'");
  EXPECT_EQ(io.code(), Status::Code::kIoError);
  EXPECT_EQ(io.message(), "open 'f': No such file or directory");
}

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd");
  return x / 2;
}

Status Chain(int x, int* out) {
  PRESCIENT_RETURN_IF_ERROR(Half(x).status());
  *out = Half(x).value();
  return Status::Ok();
}

TEST(Status, ResultAndReturnIfError) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_EQ(Chain(3, &out).code(), Status::Code::kInvalidArgument);
  Result<int> from_ok = Status::Ok();  // a bug in the caller: reported, not hidden
  EXPECT_FALSE(from_ok.ok());
  EXPECT_EQ(from_ok.status().code(), Status::Code::kInternal);
  // io::Status is the same type: no conversion between the layers.
  static_assert(std::is_same_v<io::Status, Status>);
}

}  // namespace
}  // namespace prescient::cache
