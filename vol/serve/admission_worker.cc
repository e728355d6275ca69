#include "vol/serve/admission_worker.h"

#include <unistd.h>

#include <algorithm>
#include <new>
#include <utility>
#include <variant>

#include "cache/io/raw_layout.h"
#include "vol/runtime/runtime.h"
#include "vol/serve/cached_dataset.h"

namespace prescient::vol {

void AdmissionWorker::Attach(cache::NodeCache* cache) {
  cache::MutexLock lock(&mu_);
  cache_ = cache;
  if (cache_ != nullptr) cache_->SetAdmissionQueue(this);
}

void AdmissionWorker::Drain() noexcept {
  std::unique_ptr<cache::io::ThreadPool> pool;
  {
    cache::MutexLock lock(&mu_);
    // No new rows from here on: reads publish their own, and a hand-over
    // racing with this finds no cache and is given back.
    if (cache_ != nullptr) cache_->SetAdmissionQueue(nullptr);
    cache_ = nullptr;
    pool = std::move(pool_);
  }
  pool.reset();  // runs what is queued, then joins (in a forked child: lets go)
}

bool AdmissionWorker::RowsReadAgainCheaply(const CachedDataset& dataset) {
  const std::shared_ptr<const cache::io::RawLayout>& layout = dataset.raw_layout();
  if (!layout) return false;
  if (const auto* chunked = std::get_if<cache::io::ChunkedLayout>(layout.get())) {
    return chunked->filters().empty();
  }
  return true;  // contiguous
}

void AdmissionWorker::ReadRowsAgainFrom(cache::DatasetSlot slot,
                                        std::shared_ptr<const CachedDataset> dataset) {
  if (dataset == nullptr || !RowsReadAgainCheaply(*dataset)) return;
  cache::MutexLock lock(&mu_);
  read_again_.insert_or_assign(slot, std::move(dataset));
}

void AdmissionWorker::MayLeaveUnkept(cache::DatasetSlot slot) {
  if (busy_unkept_run_bytes_ == 0) return;  // off: nothing is ever left unkept
  cache::MutexLock lock(&mu_);
  may_leave_unkept_.insert(slot);
}

bool AdmissionWorker::ReadsRowsAgain(cache::DatasetSlot ds, std::uint64_t bytes) noexcept {
  if (bytes < kReadAgainMinBytes) return false;
  cache::MutexLock lock(&mu_);
  return read_again_.count(ds) > 0;
}

bool AdmissionWorker::ReadAgain(const CachedDataset& dataset, cache::LoadedRows& rows) noexcept {
  // A file rewritten since the reader's read would give other bytes than
  // the reader got: not published (FileChanged re-checks it at most once a
  // second, the same bound as for every read and prefetch of the file).
  if (dataset.FileChanged()) return false;
  const std::uint64_t entry_bytes = dataset.entry_bytes();
  if (rows.bytes.size() != rows.rows.size() * entry_bytes) return false;
  try {
    thread_local std::vector<std::byte*> dest;
    dest.clear();
    for (std::size_t i = 0; i < rows.rows.size(); ++i) {
      dest.push_back(rows.bytes.data() + i * entry_bytes);
    }
    return dataset.LoadEntries(nullptr, rows.rows, dest, nullptr).ok();
  } catch (...) {
    return false;
  }
}

void AdmissionWorker::LeaveToReaders(cache::DatasetSlot slot) {
  cache::MutexLock lock(&mu_);
  left_to_readers_.insert(slot);
}

bool AdmissionWorker::LeavesUnkept(cache::DatasetSlot ds, std::uint64_t bytes_per_run) noexcept {
  if (!only_on_spare_cpu_ || busy_unkept_run_bytes_ == 0 || bytes_per_run < busy_unkept_run_bytes_)
    return false;
  cache::MutexLock lock(&mu_);
  if (cache_ == nullptr || !may_leave_unkept_.contains(ds)) return false;
  return !headroom_.SpareCpu(in_flight_bytes_ != 0 ? 1 : 0);
}

std::span<std::byte> AdmissionWorker::Reserve(cache::DatasetSlot ds, std::uint64_t bytes) noexcept {
  cache::MutexLock lock(&mu_);
  if (cache_ == nullptr || bytes == 0 || budget_bytes_ == 0) return {};
  if (left_to_readers_.contains(ds)) return {};
  if (only_on_spare_cpu_ && bytes < kMinHandOverBytes) {
    Runtime::Get().stats().Add(Counter::kReadsAdmitSmall, 1);
    return {};
  }
  // The thread, when it has rows already, is one of the runnable threads.
  if (only_on_spare_cpu_ && !headroom_.SpareCpu(in_flight_bytes_ != 0 ? 1 : 0)) {
    Runtime::Get().stats().Add(Counter::kReadsAdmitNoSpareCpu, 1);
    return {};
  }
  // A read larger than the whole budget may still go when nothing waits:
  // memory stays bounded by one read (itself at most a quarter of the cache).
  if (in_flight_bytes_ != 0 && in_flight_bytes_ + bytes > budget_bytes_) return {};
  // The smallest free buffer that fits; else a new one, after letting go of
  // free ones that would keep more than the budget allocated.
  Buffer buffer;
  if (auto fit = free_buffers_.lower_bound(bytes); fit != free_buffers_.end()) {
    buffer.capacity = fit->first;
    buffer.data = std::move(fit->second);
    free_buffers_.erase(fit);
  } else {
    ReleaseFreeBuffersFor(bytes);
    try {
      buffer.data = std::unique_ptr<std::byte[]>(new std::byte[bytes]);
    } catch (const std::bad_alloc&) {
      return {};
    }
    buffer.capacity = bytes;
    kept_bytes_ += bytes;
  }
  buffer.used = bytes;
  std::byte* const data = buffer.data.get();
  const std::uint64_t capacity = buffer.capacity;
  try {
    buffers_in_use_.emplace(data, std::move(buffer));
  } catch (...) {
    kept_bytes_ -= capacity;  // freed with the buffer, wherever it went
    return {};
  }
  in_flight_bytes_ += bytes;
  return {data, static_cast<std::size_t>(bytes)};
}

void AdmissionWorker::ReleaseFreeBuffersFor(std::uint64_t more) {
  while (!free_buffers_.empty() && kept_bytes_ + more > budget_bytes_) {
    kept_bytes_ -= free_buffers_.begin()->first;
    free_buffers_.erase(free_buffers_.begin());
  }
}

void AdmissionWorker::Unreserve(std::span<std::byte> buffer) noexcept {
  cache::MutexLock lock(&mu_);
  auto it = buffers_in_use_.find(buffer.data());
  if (it == buffers_in_use_.end()) return;
  in_flight_bytes_ -= it->second.used;
  const std::uint64_t capacity = it->second.capacity;
  std::unique_ptr<std::byte[]> data = std::move(it->second.data);
  buffers_in_use_.erase(it);
  // A buffer for a read beyond the budget is not kept for the process's life.
  if (kept_bytes_ > budget_bytes_) {
    kept_bytes_ -= capacity;
    return;
  }
  try {
    free_buffers_.emplace(capacity, std::move(data));
  } catch (...) {
    kept_bytes_ -= capacity;  // freed with `data`
  }
}

bool AdmissionWorker::Submit(cache::LoadedRows&& rows) noexcept {
  const std::span<std::byte> buffer = rows.bytes;
  try {
    cache::MutexLock lock(&mu_);
    std::shared_ptr<const CachedDataset> source;
    if (rows.read_again) {
      // (Always found: ReadsRowsAgain said so, and nothing is ever removed.)
      if (auto it = read_again_.find(rows.ds); it != read_again_.end()) source = it->second;
    }
    if (cache_ != nullptr && (source != nullptr || !rows.read_again)) {
      const pid_t self = ::getpid();
      if (pool_ == nullptr || pool_pid_ != self) {
        pool_.reset();  // a parent's pool, in a forked child, is let go unjoined
        pool_ = std::make_unique<cache::io::ThreadPool>(cache::io::ThreadPoolOptions{.threads = 1});
        pool_pid_ = self;
      }
      cache::NodeCache* cache = cache_;
      auto task = [this, cache, loaded = std::move(rows), buffer,
                   source = std::move(source)]() mutable {
        // Not read again (a failure): published with read_again still set,
        // which releases the claims; the rows' next reader loads them.
        if (source != nullptr && ReadAgain(*source, loaded)) loaded.read_again = false;
        const cache::PublishedRows published = cache->PublishLoaded(std::move(loaded));
        Unreserve(buffer);
        if (published.not_admitted != 0) {
          Runtime::Get().stats().Add(Counter::kRowsAdmittedBehindDeclined, published.not_admitted);
        }
      };
      if (pool_->Submit(std::move(task))) return true;
    }
  } catch (...) {
  }
  Unreserve(buffer);
  return false;
}

std::uint64_t AdmissionWorker::KeptBytes() {
  cache::MutexLock lock(&mu_);
  return kept_bytes_;
}

void AdmissionWorker::ForgetAfterForkInChild() noexcept {
  cache::MutexLock lock(&mu_);
  // The parent's hand-overs: their buffers are the parent's to reuse; here
  // they are copies nobody writes (fork shares their pages), let go unused.
  for (auto& [data, b] : buffers_in_use_) {
    kept_bytes_ -= b.capacity;
    (void)b.data.release();
  }
  buffers_in_use_.clear();
  in_flight_bytes_ = 0;
}

}  // namespace prescient::vol
