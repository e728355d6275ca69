#include "scheduler/simulate/policies.h"

#include <stdexcept>
#include <vector>

#include "scheduler/simulate/next_use.h"
#include "scheduler/simulate/node_caches.h"

namespace prescient::scheduler::simulate {
namespace {

class NoCache final : public PolicyModel {
 public:
  Outcome Read(std::uint32_t, SampleId, std::uint32_t, std::uint32_t) override {
    return Outcome::kStorage;
  }
};

// What the runtime does without a schedule: LRU, admitting one miss in
// kAdmitWhenFullEvery once full (cache/core/read_rows.cc; the two must agree).
class Lru final : public PolicyModel {
 public:
  static constexpr std::uint32_t kAdmitWhenFullEvery = 8;
  Lru(const plan::ScheduleView& view, std::uint64_t capacity) {
    caches_.reserve(view.layout.nodes());
    for (std::uint32_t n = 0; n < view.layout.nodes(); ++n) {
      caches_.emplace_back(capacity, view.num_samples, kAdmitWhenFullEvery);
    }
  }

  Outcome Read(std::uint32_t node, SampleId s, std::uint32_t, std::uint32_t) override {
    return caches_[node].Read(s) ? Outcome::kHit : Outcome::kStorage;
  }

 private:
  std::vector<LruCache> caches_;
};

// Belady's MIN per node, with bypass; with `peers`, a miss another node
// caches is a remote hit (Prescient's runtime).
class Belady final : public PolicyModel {
 public:
  Belady(const plan::ScheduleView& view, std::uint64_t capacity, bool peers) : peers_(peers) {
    const std::uint64_t total_steps = view.EpochFirstSteps().back();
    caches_.reserve(view.layout.nodes());
    for (std::uint32_t n = 0; n < view.layout.nodes(); ++n) {
      caches_.emplace_back(capacity, view.num_samples, total_steps);
    }
    if (peers_) holders_.assign(view.num_samples, 0);
  }

  Outcome Read(std::uint32_t node, SampleId s, std::uint32_t next_use, std::uint32_t) override {
    BeladyCache& cache = caches_[node];
    if (cache.Hit(s, next_use)) return Outcome::kHit;
    const Outcome outcome = peers_ && holders_[s] > 0 ? Outcome::kRemote : Outcome::kStorage;
    SampleId victim;
    if (cache.Admit(s, next_use, &victim) && peers_) {
      ++holders_[s];
      if (victim != BeladyCache::kNoVictim) --holders_[victim];
    }
    return outcome;
  }

  void EndStep(std::uint32_t now) override {
    for (BeladyCache& cache : caches_) cache.EndStep(now);
  }

 private:
  std::vector<BeladyCache> caches_;
  bool peers_;
  std::vector<std::uint16_t> holders_;  // nodes caching each sample
};

// NoPFS: static per-node placement, filled by the first read of each placed
// sample (from a peer that already holds it, else from storage).
class Nopfs final : public PolicyModel {
 public:
  Nopfs(const plan::ScheduleView& view, const plan::StaticPlacement& placement)
      : placement_(placement),
        num_samples_(view.num_samples),
        loaded_((static_cast<std::uint64_t>(view.layout.nodes()) * view.num_samples + 63) / 64, 0) {
  }

  Outcome Read(std::uint32_t node, SampleId s, std::uint32_t, std::uint32_t now) override {
    const std::uint32_t owner = placement_.Owner(s);
    const bool peer_has = owner != plan::StaticPlacement::kNoOwner && owner != node &&
                          placement_.OwnerFirstStep(s) < now;
    if (placement_.CachedOn(node, s)) {
      const std::uint64_t bit = static_cast<std::uint64_t>(node) * num_samples_ + s;
      std::uint64_t& word = loaded_[bit / 64];
      const std::uint64_t mask = std::uint64_t{1} << (bit % 64);
      if (word & mask) return Outcome::kHit;
      word |= mask;
    }
    return peer_has ? Outcome::kRemote : Outcome::kStorage;
  }

 private:
  const plan::StaticPlacement& placement_;
  std::uint64_t num_samples_;
  std::vector<std::uint64_t> loaded_;  // node-major bitset: placed and filled
};

}  // namespace

std::unique_ptr<PolicyModel> MakePolicyModel(Policy policy, const plan::ScheduleView& view,
                                             std::uint64_t cache_samples,
                                             const plan::StaticPlacement* placement) {
  switch (policy) {
    case Policy::kNone:
      return std::make_unique<NoCache>();
    case Policy::kLru:
      return std::make_unique<Lru>(view, cache_samples);
    case Policy::kBelady:
      return std::make_unique<Belady>(view, cache_samples, false);
    case Policy::kPrescient:
      return std::make_unique<Belady>(view, cache_samples, true);
    case Policy::kNopfs:
      if (placement == nullptr) throw std::invalid_argument("nopfs policy needs a placement");
      return std::make_unique<Nopfs>(view, *placement);
  }
  throw std::invalid_argument("unknown policy");
}

}  // namespace prescient::scheduler::simulate
