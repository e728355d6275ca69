#include "cache/core/segment_keeper.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

namespace prescient::cache::detail {
namespace {

// posix_spawn's file actions and attributes, destroyed on every path.
class SpawnSetup {
 public:
  SpawnSetup() {
    ok_ = posix_spawn_file_actions_init(&actions_) == 0;
    ok_ = posix_spawnattr_init(&attr_) == 0 && ok_;
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  bool ok() const { return ok_; }
  posix_spawn_file_actions_t* actions() { return &actions_; }
  posix_spawnattr_t* attr() { return &attr_; }

 private:
  bool ok_ = false;
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

}  // namespace

Result<ProcessIdentity> SpawnKeeper(const std::string& executable, int segment_fd,
                                    const ProcessIdentity& anchor,
                                    const std::string& registry_path) {
  if (access(executable.c_str(), X_OK) != 0) {
    return Status::FromErrno(errno, "cache: the segment keeper " + executable + " cannot run");
  }
  SpawnSetup setup;
  if (!setup.ok()) return Status::ResourceExhausted("cache: posix_spawn set-up failed");
  posix_spawn_file_actions_t* actions = setup.actions();
  int error = posix_spawn_file_actions_addopen(actions, 0, "/dev/null", O_RDONLY, 0);
  if (error == 0) error = posix_spawn_file_actions_addopen(actions, 1, "/dev/null", O_WRONLY, 0);
  if (error == 0) error = posix_spawn_file_actions_adddup2(actions, 1, 2);
  // dup2 clears close-on-exec on the copy (and, when the numbers are equal,
  // glibc clears the flag on the descriptor itself).
  if (error == 0) error = posix_spawn_file_actions_adddup2(actions, segment_fd, kKeeperSegmentFd);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  if (error == 0) error = posix_spawn_file_actions_addclosefrom_np(actions, kKeeperSegmentFd + 1);
#endif  // (older C libraries: the keeper closes the rest itself, first thing)
  if (error == 0) error = posix_spawnattr_setflags(setup.attr(), POSIX_SPAWN_SETSID);
  if (error != 0) return Status::FromErrno(error, "cache: posix_spawn set-up failed");

  std::vector<std::string> args = {executable, std::to_string(anchor.pid),
                                   std::to_string(anchor.start_time), registry_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  pid_t pid = 0;
  error = posix_spawn(&pid, executable.c_str(), actions, setup.attr(), argv.data(), envp);
  if (error != 0) return Status::FromErrno(error, "cache: cannot start " + executable);
  // The start time exists from the moment the child does; it names the keeper
  // whether or not its exec has finished.
  ProcessIdentity keeper = IdentityOf(pid);
  if (keeper.pid == 0) {
    return Status::Unavailable("cache: the segment keeper " + executable + " exited at once");
  }
  return keeper;
}

}  // namespace prescient::cache::detail
