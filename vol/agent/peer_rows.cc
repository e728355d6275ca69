#include "vol/agent/peer_rows.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <utility>

#include "cache/base/mutex.h"
#include "vol/agent/peer_protocol.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol::agent {
namespace {

// Finish waits at most this long (the link's own timeout is shorter: this
// only guards against a link that stopped polling).
constexpr std::chrono::milliseconds kFinishWaitLimit{5000};

}  // namespace

// The requests of one Start, shared with the link's callbacks (which may
// outlive a Finish that stopped waiting).
class PeerRows::PendingFetch final : public RemoteRows::Fetch {
 public:
  struct Batch {
    RowRequest request;
    std::optional<std::vector<std::byte>> reply;
  };
  struct Shared {
    cache::Mutex mutex;
    cache::CondVar answered;
    std::vector<Batch> batches GUARDED_BY(mutex);
    std::size_t outstanding GUARDED_BY(mutex) = 0;
  };

  PendingFetch(cache::NodeCache& cache, const CachedDataset& dataset,
               const cache::NextUseOracle* oracle, std::optional<std::uint32_t> field,
               std::uint32_t epoch, std::shared_ptr<Shared> shared,
               std::chrono::milliseconds wait_limit)
      : cache_(cache),
        epoch_(epoch),
        dataset_(dataset),
        oracle_(oracle),
        field_(field),
        shared_(std::move(shared)),
        wait_limit_(wait_limit) {}

  std::vector<std::uint64_t> Finish() override {
    std::vector<std::uint64_t> left;
    std::vector<Batch> batches;
    {
      cache::MutexLock lock(&shared_->mutex);
      const auto end = std::chrono::steady_clock::now() + wait_limit_;
      while (shared_->outstanding > 0 && std::chrono::steady_clock::now() < end) {
        shared_->answered.WaitFor(&shared_->mutex, std::chrono::milliseconds(50));
        // Waiting on a peer is progress: the node's processes must not take
        // this agent for stuck (their stall timeout, 1.5 s, is shorter than a
        // peer's, 2 s) and lead its prefetching from storage meanwhile.
        cache_.Heartbeat();
      }
      batches = std::move(shared_->batches);
      shared_->batches.clear();
      shared_->outstanding = 0;
    }
    std::uint64_t delivered = 0;
    std::uint64_t failed = 0;
    for (const Batch& batch : batches) {
      const std::optional<std::span<const std::byte>> data =
          batch.reply ? CheckReply(batch.request, *batch.reply) : std::nullopt;
      if (!data) {
        left.insert(left.end(), batch.request.rows.begin(), batch.request.rows.end());
        failed += batch.request.rows.size();
        continue;
      }
      const std::uint64_t row_bytes = batch.request.row_bytes;
      for (std::size_t i = 0; i < batch.request.rows.size(); ++i) {
        (void)cache_.Publish(dataset_.slot(), batch.request.rows[i], data->data() + i * row_bytes,
                             oracle_);
      }
      delivered += batch.request.rows.size();
    }
    Runtime& runtime = Runtime::Get();
    runtime.stats().AddInEpoch(epoch_, Counter::kRowsRemote, delivered);
    if (field_) runtime.stats().AddField(*field_, FieldCounter::kRowsRemote, delivered);
    if (failed > 0) {
      runtime.Fallback(Counter::kFallbackPeerFailed,
                       "node agent: a peer did not deliver rows in time; they are read from "
                       "storage",
                       failed);
    }
    std::sort(left.begin(), left.end());
    return left;
  }

 private:
  cache::NodeCache& cache_;
  std::uint32_t epoch_;  // the node's, for the statistics
  const CachedDataset& dataset_;
  const cache::NextUseOracle* oracle_;
  std::optional<std::uint32_t> field_;
  std::shared_ptr<Shared> shared_;
  std::chrono::milliseconds wait_limit_;
};

PeerRows::PeerRows(cache::NodeCache& cache, ScheduleFollower& follower,
                   const scheduler::plan::SampleOwners& owners, PeerLink& link)
    : cache_(cache), follower_(follower), owners_(owners), link_(link) {}

std::unique_ptr<RemoteRows::Fetch> PeerRows::Start(const CachedDataset& dataset,
                                                   std::vector<std::uint64_t>& rows) {
  if (dataset.grouped()) return nullptr;
  const std::optional<std::uint32_t> field = follower_.FieldOf(dataset);
  const std::optional<FieldRef> ref = follower_.FieldRefOf(dataset);
  if (!field || !ref) return nullptr;
  const ScheduleBinding& binding = follower_.binding();
  const auto self = static_cast<std::uint32_t>(link_.rank());
  // Rows by owner; the rest stay in `rows` for storage.
  std::map<std::uint32_t, std::vector<std::uint64_t>> by_owner;
  std::vector<std::uint64_t> local;
  for (const std::uint64_t row : rows) {
    const std::uint64_t sample = binding.SampleOf(ref->file, row);
    const std::uint32_t owner = sample < owners_.num_samples()
                                    ? owners_.Owner(static_cast<scheduler::SampleId>(sample))
                                    : scheduler::plan::SampleOwners::kNoOwner;
    if (owner == scheduler::plan::SampleOwners::kNoOwner || owner == self ||
        !link_.PeerUsable(static_cast<int>(owner))) {
      local.push_back(row);
    } else {
      by_owner[owner].push_back(row);
    }
  }
  if (by_owner.empty()) return nullptr;
  rows = std::move(local);

  auto shared = std::make_shared<PendingFetch::Shared>();
  const FileIdentity& file = dataset.file_identity();
  const std::size_t per_request = std::clamp<std::size_t>(
      kMaxReplyBytes / std::max<std::uint64_t>(1, dataset.row_bytes()), 1, kMaxRowsPerRequest);
  for (auto& [owner, owned_rows] : by_owner) {
    for (std::size_t at = 0; at < owned_rows.size(); at += per_request) {
      RowRequest request{.id = next_id_.fetch_add(1),
                         .file = ref->file,
                         .field = ref->field,
                         .row_bytes = dataset.row_bytes(),
                         .file_size = file.size,
                         .file_mtime_ns = file.mtime_ns,
                         .rows = std::vector<std::uint64_t>(
                             owned_rows.begin() + static_cast<std::ptrdiff_t>(at),
                             owned_rows.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                      owned_rows.size(), at + per_request)))};
      std::size_t index;
      {
        cache::MutexLock lock(&shared->mutex);
        index = shared->batches.size();
        shared->batches.push_back({request, std::nullopt});
        ++shared->outstanding;
      }
      std::vector<std::byte> bytes = EncodeRequest(request);
      const bool queued =
          link_.Send(static_cast<int>(owner), request.id, std::move(bytes),
                     [shared, index](std::optional<std::vector<std::byte>>&& reply) {
                       cache::MutexLock lock(&shared->mutex);
                       if (index < shared->batches.size())
                         shared->batches[index].reply = std::move(reply);
                       if (shared->outstanding > 0) --shared->outstanding;
                       shared->answered.SignalAll();
                     });
      if (!queued) {
        cache::MutexLock lock(&shared->mutex);
        --shared->outstanding;
        // Its batch stays without a reply: Finish returns its rows for storage.
        shared->answered.SignalAll();
      }
    }
  }
  const std::uint64_t total = binding.total_steps();
  const std::uint32_t epoch =
      total == 0 ? 0 : binding.EpochAndStep(std::min(cache_.NodeStep(), total - 1)).first;
  return std::make_unique<PendingFetch>(cache_, dataset, follower_.oracle(), field, epoch,
                                        std::move(shared), kFinishWaitLimit);
}

}  // namespace prescient::vol::agent
