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

// Belady's MIN per node, with bypass.
class Belady final : public PolicyModel {
 public:
  Belady(const plan::ScheduleView& view, std::uint64_t capacity) {
    const std::uint64_t total_steps = view.EpochFirstSteps().back();
    caches_.reserve(view.layout.nodes());
    for (std::uint32_t n = 0; n < view.layout.nodes(); ++n) {
      caches_.emplace_back(capacity, view.num_samples, total_steps);
    }
  }

  Outcome Read(std::uint32_t node, SampleId s, std::uint32_t next_use, std::uint32_t) override {
    BeladyCache& cache = caches_[node];
    if (cache.Hit(s, next_use)) return Outcome::kHit;
    SampleId victim;
    cache.Admit(s, next_use, &victim);
    return Outcome::kStorage;
  }

  void EndStep(std::uint32_t now) override {
    for (BeladyCache& cache : caches_) cache.EndStep(now);
  }

 private:
  std::vector<BeladyCache> caches_;
};

// The node agent's policy (prescient-node, vol/agent), owners from
// plan/ownership.h. A node's cache is two parts: the samples it owns, held
// from their first load anywhere to the end of the job, and a Belady cache of
// the rest of its capacity for samples it does not own, keyed by its own next
// reads. An owned sample is read from storage once, by its owner, whoever
// asked for it first; after that every other node's miss is a remote hit.
class Prescient final : public PolicyModel {
 public:
  Prescient(const plan::ScheduleView& view, std::uint64_t capacity,
            const plan::SampleOwners& owners)
      : owners_(owners), loaded_((view.num_samples + 63) / 64, 0) {
    if (owners.nodes() != view.layout.nodes() || owners.num_samples() != view.num_samples) {
      throw std::invalid_argument("prescient policy: the owners are of another schedule");
    }
    const std::uint64_t total_steps = view.EpochFirstSteps().back();
    others_.reserve(view.layout.nodes());
    for (std::uint32_t n = 0; n < view.layout.nodes(); ++n) {
      if (owners.OwnedBy(n) > capacity) {
        throw std::invalid_argument("prescient policy: a node owns more samples than it caches");
      }
      others_.emplace_back(capacity - owners.OwnedBy(n), view.num_samples, total_steps);
    }
  }

  Outcome Read(std::uint32_t node, SampleId s, std::uint32_t next_use, std::uint32_t) override {
    const std::uint32_t owner = owners_.Owner(s);
    if (owner == node) return Load(s) ? Outcome::kStorage : Outcome::kHit;
    BeladyCache& cache = others_[node];
    if (cache.Hit(s, next_use)) return Outcome::kHit;
    // The owner reads a sample nobody has asked for yet from storage, on
    // behalf of this request.
    const Outcome outcome =
        owner != plan::SampleOwners::kNoOwner && !Load(s) ? Outcome::kRemote : Outcome::kStorage;
    SampleId victim;
    cache.Admit(s, next_use, &victim);
    return outcome;
  }

  void EndStep(std::uint32_t now) override {
    for (BeladyCache& cache : others_) cache.EndStep(now);
  }

 private:
  // Marks `s` loaded by its owner; true if this is its first load (a storage read).
  bool Load(SampleId s) {
    std::uint64_t& word = loaded_[s / 64];
    const std::uint64_t mask = std::uint64_t{1} << (s % 64);
    if (word & mask) return false;
    word |= mask;
    return true;
  }

  const plan::SampleOwners& owners_;
  std::vector<std::uint64_t> loaded_;  // by sample: its owner holds it
  std::vector<BeladyCache> others_;    // by node: samples it does not own
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
                                             const plan::StaticPlacement* placement,
                                             const plan::SampleOwners* owners) {
  switch (policy) {
    case Policy::kNone:
      return std::make_unique<NoCache>();
    case Policy::kLru:
      return std::make_unique<Lru>(view, cache_samples);
    case Policy::kBelady:
      return std::make_unique<Belady>(view, cache_samples);
    case Policy::kPrescient:
      if (owners == nullptr) throw std::invalid_argument("prescient policy needs sample owners");
      return std::make_unique<Prescient>(view, cache_samples, *owners);
    case Policy::kNopfs:
      if (placement == nullptr) throw std::invalid_argument("nopfs policy needs a placement");
      return std::make_unique<Nopfs>(view, *placement);
  }
  throw std::invalid_argument("unknown policy");
}

}  // namespace prescient::scheduler::simulate
