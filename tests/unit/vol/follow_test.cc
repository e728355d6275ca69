// The connector's pieces of PRESCIENT_FOLLOW: the per-thread read recorder the
// Python follower learns rows from, and the watch that notices a newly
// published schedule file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "vol/follow/read_recorder.h"
#include "vol/schedule/schedule_watch.h"

namespace prescient::vol {
namespace {

TEST(ReadRecorder, RecordsOnlyInsideTheBracketOfItsOwnThread) {
  const RowSelection rows = RowSelection::Runs({{4, 2}, {9, 1}});
  ReadRecorder::Note("f.h5", "/x", 10, rows);  // before any bracket: nothing
  ReadRecorder::Begin();
  EXPECT_TRUE(ReadRecorder::Active());
  ReadRecorder::Note("f.h5", "/x", 10, rows);
  std::thread other([&] {
    EXPECT_FALSE(ReadRecorder::Active());
    ReadRecorder::Note("g.h5", "/y", 3, rows);  // another thread's read is not ours
  });
  other.join();
  ReadRecorder::Note("f.h5", "/y", 10, RowSelection::Pattern(4, 1, 2, 1));
  EXPECT_EQ(ReadRecorder::End(), "f.h5\t/x\t10\t4+2,9+1\nf.h5\t/y\t10\t4+2\n");
  EXPECT_FALSE(ReadRecorder::Active());
  ReadRecorder::Note("f.h5", "/x", 10, rows);  // after the bracket: nothing
  ReadRecorder::Begin();
  EXPECT_EQ(ReadRecorder::End(), "");
}

TEST(ReadRecorder, TooManyRowsOrUnprintableNamesOverflow) {
  ReadRecorder::Begin();
  ReadRecorder::Note("f.h5", "/x", 1u << 20,
                     RowSelection::Pattern(0, 1, ReadRecorder::kMaxRows + 1, 1));
  EXPECT_EQ(ReadRecorder::End(), "overflow\n");
  ReadRecorder::Begin();
  ReadRecorder::Note("a\tb.h5", "/x", 10, RowSelection::Pattern(0, 1, 1, 1));
  EXPECT_EQ(ReadRecorder::End(), "overflow\n");
}

// Runs `body` in a forked child (BeginAtFirstRead acts once per process) and
// returns its exit status: 0 when every check in it held.
template <typename Body>
int InChild(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body() ? 0 : 1);
  int status = -1;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ReadRecorder, TheNamedProcessRecordsFromItsFirstReadOnly) {
  const RowSelection rows = RowSelection::Runs({{3, 1}});
  EXPECT_EQ(InChild([&] {
              ReadRecorder::BeginAtFirstRead(::getpid());  // the first read: a bracket begins
              if (!ReadRecorder::Active()) return false;
              ReadRecorder::Note("f.h5", "/x", 10, rows);
              if (ReadRecorder::End() != "f.h5\t/x\t10\t3+1\n") return false;
              ReadRecorder::BeginAtFirstRead(::getpid());  // a later read: nothing
              return !ReadRecorder::Active();
            }),
            0);
  EXPECT_EQ(InChild([&] {
              ReadRecorder::BeginAtFirstRead(::getpid() + 1);  // another process is named
              if (ReadRecorder::Active()) return false;
              ReadRecorder::BeginAtFirstRead(::getpid());  // too late: not the first read
              if (ReadRecorder::Active()) return false;
              ReadRecorder::BeginAtFirstRead(0);
              return !ReadRecorder::Active();
            }),
            0);
}

TEST(ScheduleWatch, ReportsEachNewFileOnce) {
  char dir_template[] = "/tmp/prescient-watch-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/schedule";
  ScheduleWatch watch(path);
  EXPECT_FALSE(watch.Changed());  // not there yet: normal in follow mode
  std::ofstream(path) << "one";
  std::this_thread::sleep_for(ScheduleWatch::kInterval + std::chrono::milliseconds(20));
  EXPECT_TRUE(watch.Changed());
  std::this_thread::sleep_for(ScheduleWatch::kInterval + std::chrono::milliseconds(20));
  EXPECT_FALSE(watch.Changed());  // the same file
  // A new file renamed over the path, as the follower publishes it.
  std::ofstream(path + ".tmp") << "second version";
  ASSERT_EQ(::rename((path + ".tmp").c_str(), path.c_str()), 0);
  EXPECT_FALSE(watch.Changed());  // looked less than kInterval ago
  std::this_thread::sleep_for(ScheduleWatch::kInterval + std::chrono::milliseconds(20));
  EXPECT_TRUE(watch.Changed());
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace prescient::vol
