#include "vol/serve/file_handles.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>

#include "cache/base/mutex.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace io = cache::io;

// A RandomAccessSource that borrows its descriptor from the pool per read.
class PooledFile final : public io::RandomAccessSource {
 public:
  PooledFile(FileHandles& pool, std::string path, FileHandles::Key key)
      : pool_(pool), path_(std::move(path)), key_(key) {}

  io::Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const override {
    auto file = pool_.Acquire(path_, key_);
    if (!file.ok()) return file.status();
    return file.value()->ReadExact(offset, out);
  }
  io::Status ReadScattered(std::uint64_t offset,
                           std::span<const io::ScatterPiece> pieces) const override {
    auto file = pool_.Acquire(path_, key_);
    if (!file.ok()) return file.status();
    return file.value()->ReadScattered(offset, pieces);
  }
  io::Result<std::uint64_t> Size() const override {
    auto file = pool_.Acquire(path_, key_);
    if (!file.ok()) return file.status();
    return file.value()->Size();
  }
  const std::string& name() const override { return path_; }

 private:
  FileHandles& pool_;
  std::string path_;
  FileHandles::Key key_;
};

namespace {

std::size_t DefaultCapacity() {
  struct rlimit limit{};
  std::size_t quarter = 256;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    quarter = static_cast<std::size_t>(limit.rlim_cur / 4);
  }
  return std::clamp<std::size_t>(quarter, 8, 256);
}

}  // namespace

FileHandles& FileHandles::Get() {
  // Never destroyed: prefetch threads and HDF5's atexit may still read.
  static FileHandles* pool = [] {
    auto* p = new FileHandles(DefaultCapacity());
    ::pthread_atfork(&FileHandles::AtForkPrepare, &FileHandles::AtForkParent,
                     &FileHandles::AtForkChild);
    return p;
  }();
  return *pool;
}

FileHandles::FileHandles(std::size_t capacity) : capacity_(std::max<std::size_t>(1, capacity)) {}

void FileHandles::AtForkPrepare() { Get().mutex_.Lock(); }
void FileHandles::AtForkParent() { Get().mutex_.Unlock(); }
void FileHandles::AtForkChild() { Get().mutex_.Unlock(); }

std::shared_ptr<const io::RandomAccessSource> FileHandles::Source(const FileState& file) {
  return std::make_shared<PooledFile>(*this, file.name,
                                      Key{file.identity.device, file.identity.inode});
}

io::Result<std::shared_ptr<const io::PosixFile>> FileHandles::Acquire(const std::string& path,
                                                                      Key key) {
  {
    cache::MutexLock lock(&mutex_);
    auto it = open_.find(key);
    if (it != open_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.file;
    }
  }
  // Opened without the lock: open() on a parallel file system can take long.
  io::Result<std::unique_ptr<io::PosixFile>> opened = io::PosixFile::Open(path);
  if (!opened.ok()) return opened.status();
  struct stat st{};
  if (::fstat(opened.value()->fd(), &st) != 0 ||
      static_cast<std::uint64_t>(st.st_dev) != key.first ||
      static_cast<std::uint64_t>(st.st_ino) != key.second) {
    return io::Status::Unsupported(path + " is no longer the file HDF5 opened");
  }
  std::shared_ptr<const io::PosixFile> file(std::move(opened.value()));
  Runtime::Get().stats().Add(Counter::kRawFileOpens);
  cache::MutexLock lock(&mutex_);
  auto it = open_.find(key);
  if (it != open_.end()) return it->second.file;  // another thread opened it meanwhile
  ++opens_;
  lru_.push_front(key);
  open_.emplace(key, Slot{file, lru_.begin()});
  while (open_.size() > capacity_) {
    // Closed when the last reader lets go of it.
    open_.erase(lru_.back());
    lru_.pop_back();
  }
  return file;
}

io::Result<FileIdentity> IdentityNow(const io::PosixFile& file) {
  struct stat st{};
  if (::fstat(file.fd(), &st) != 0) return io::Status::FromErrno(errno, "fstat " + file.name());
  return IdentityOf(st);
}

io::Result<FileIdentity> FileHandles::Stat(const std::string& path, std::uint64_t device,
                                           std::uint64_t inode) {
  auto file = Acquire(path, {device, inode});
  if (!file.ok()) return file.status();
  return IdentityNow(*file.value());
}

std::size_t FileHandles::open_count() const {
  cache::MutexLock lock(&mutex_);
  return open_.size();
}

std::uint64_t FileHandles::opens() const {
  cache::MutexLock lock(&mutex_);
  return opens_;
}

}  // namespace prescient::vol
