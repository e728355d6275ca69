#include "vol/schedule/node_ownership.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "cache/core/process_identity.h"

namespace prescient::vol {
namespace {

constexpr std::uint64_t kMagic = 0x314e574f43535250ull;  // "PRSCOWN1"
constexpr auto kCheckPeriod = std::chrono::seconds(1);

struct FileHeader {
  std::uint64_t magic;
  std::uint32_t node;
  std::int32_t agent_pid;
  std::uint64_t agent_start_time;
  std::uint64_t num_samples;
};

std::uint64_t BitsetBytes(std::uint64_t num_samples) { return (num_samples + 63) / 64 * 8; }

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool WriteAll(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

struct NodeOwnership::Mapping {
  const void* base = nullptr;
  std::size_t size = 0;
  dev_t device = 0;
  ino_t inode = 0;
  cache::ProcessIdentity agent;
  const std::uint64_t* bits = nullptr;
  const Mapping* older = nullptr;
};

cache::Status NodeOwnership::Publish(const std::string& path, std::uint32_t node,
                                     std::uint64_t num_samples,
                                     std::span<const std::uint64_t> owned,
                                     const cache::ProcessIdentity& agent) {
  if (owned.size() * 8 != BitsetBytes(num_samples)) {
    return cache::Status::InvalidArgument("ownership: bitset of the wrong size");
  }
  const std::string temporary = path + ".tmp." + std::to_string(agent.pid);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return cache::Status::IoError("cannot write " + temporary + ": " + std::strerror(errno));
  }
  const FileHeader header{.magic = kMagic,
                          .node = node,
                          .agent_pid = agent.pid,
                          .agent_start_time = agent.start_time,
                          .num_samples = num_samples};
  const bool written =
      WriteAll(fd, &header, sizeof header) && WriteAll(fd, owned.data(), owned.size() * 8);
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    return cache::Status::IoError("cannot write " + path + ": " + why);
  }
  return cache::Status::Ok();
}

void NodeOwnership::Withdraw(const std::string& path, const cache::ProcessIdentity& agent) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  FileHeader header{};
  const bool ours = ::pread(fd, &header, sizeof header, 0) == sizeof header &&
                    header.magic == kMagic && header.agent_pid == agent.pid &&
                    header.agent_start_time == agent.start_time;
  ::close(fd);
  if (ours) ::unlink(path.c_str());
}

NodeOwnership::~NodeOwnership() {
  while (newest_ != nullptr) {
    const Mapping* m = newest_;
    newest_ = m->older;
    ::munmap(const_cast<void*>(m->base), m->size);
    delete m;
  }
}

std::optional<bool> NodeOwnership::Owned(std::uint64_t sample) const {
  const std::int64_t now = NowNs();
  std::int64_t due = next_check_ns_.load(std::memory_order_relaxed);
  if (now >= due && next_check_ns_.compare_exchange_strong(
                        due, now + std::chrono::nanoseconds(kCheckPeriod).count())) {
    const std::int32_t self = cache::CurrentPid();
    std::int32_t holder = refreshing_.load();
    while (holder != self && !refreshing_.compare_exchange_weak(holder, self)) {
    }
    if (holder != self) {  // ours now (a claim inherited from a parent is taken over)
      Refresh();
      refreshing_.store(0);
    }
  }
  const Mapping* m = current_.load(std::memory_order_acquire);
  if (m == nullptr || sample >= num_samples_) return std::nullopt;
  return ((m->bits[sample / 64] >> (sample % 64)) & 1) != 0;
}

void NodeOwnership::Refresh() const {
  const Mapping* current = current_.load(std::memory_order_relaxed);
  struct stat st{};
  const bool present = ::stat(path_.c_str(), &st) == 0;
  if (current != nullptr && present && st.st_dev == current->device &&
      st.st_ino == current->inode) {
    if (!cache::IsAlive(current->agent)) current_.store(nullptr, std::memory_order_release);
    return;
  }
  current_.store(nullptr, std::memory_order_release);
  if (!present) return;
  const std::size_t size = sizeof(FileHeader) + BitsetBytes(num_samples_);
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat opened{};
  // Only a regular file of the user's, of exactly the expected size, is
  // mapped: a shorter one would fault past its end.
  if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_uid != ::geteuid() ||
      static_cast<std::size_t>(opened.st_size) != size) {
    ::close(fd);
    return;
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return;
  FileHeader header;
  std::memcpy(&header, base, sizeof header);
  const cache::ProcessIdentity agent{header.agent_pid, header.agent_start_time};
  if (header.magic != kMagic || header.node != node_ || header.num_samples != num_samples_ ||
      !cache::IsAlive(agent)) {
    ::munmap(base, size);
    return;
  }
  auto* mapping = new Mapping;
  mapping->base = base;
  mapping->size = size;
  mapping->device = opened.st_dev;
  mapping->inode = opened.st_ino;
  mapping->agent = agent;
  mapping->bits =
      reinterpret_cast<const std::uint64_t*>(static_cast<const char*>(base) + sizeof(FileHeader));
  mapping->older = newest_;
  newest_ = mapping;
  current_.store(mapping, std::memory_order_release);
}

}  // namespace prescient::vol
