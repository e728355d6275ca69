// The node agent's word to the training processes of its node: which samples
// this node owns (scheduler/plan/ownership.h), so that every process of the
// node keys owned rows to be evicted last.
//
// The agent (vol/agent) writes the file once it has placed the samples, next
// to the node's segment: `<cache path>.owners`, mode 0600 in the user's own
// directory, written to a temporary name and renamed (a published file is
// never changed in place, so a mapping of it never shrinks). It names the
// agent (pid and start time), the node, and the sample count. A process that
// follows the schedule maps it and, while that agent is alive, keys its rows
// with HeldKey: rows of owned samples below every row of a sample owned
// elsewhere, so the node keeps what it owes its peers and the rest of the
// cache follows Belady over the node's own reads. Without a live agent the
// file is ignored and keys are as they always were.
#ifndef PRESCIENT_VOL_SCHEDULE_NODE_OWNERSHIP_H_
#define PRESCIENT_VOL_SCHEDULE_NODE_OWNERSHIP_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/base/status.h"
#include "cache/core/next_use_oracle.h"
#include "cache/core/process_identity.h"

namespace prescient::vol {

// Keys of rows of samples owned elsewhere are offset by this (steps never
// come near 2^40), so every owned row's key is below theirs.
inline constexpr std::uint64_t kNotOwnedKeyBase = std::uint64_t{1} << 40;

// The eviction key of a row whose sample is next read on this node at
// `next_use` (NextUseOracle::kNever: not again), under a live agent.
inline std::uint64_t HeldKey(std::uint64_t next_use, bool owned) {
  if (owned) return next_use == cache::NextUseOracle::kNever ? kNotOwnedKeyBase - 1 : next_use;
  return next_use == cache::NextUseOracle::kNever ? next_use : next_use + kNotOwnedKeyBase;
}

// Whether a row keyed `key` (a schedule oracle's answer, HeldKey under a live
// agent) is read again on this node and, under an agent, owned by it: a row
// worth bringing in from storage beside a row that is.
inline bool ReadAgainHere(std::uint64_t key) { return key < kNotOwnedKeyBase - 1; }

class NodeOwnership {
 public:
  // The file of the node whose segment is at `cache_path` (NodeCache::path()).
  static std::string PathFor(const std::string& cache_path) { return cache_path + ".owners"; }

  // Writes the file for `node`: `owned` is a bitset of `num_samples` bits
  // (bit s set: the node owns sample s), `agent` the writing process.
  static cache::Status Publish(const std::string& path, std::uint32_t node,
                               std::uint64_t num_samples, std::span<const std::uint64_t> owned,
                               const cache::ProcessIdentity& agent);

  // Removes the file at `path` if `agent` wrote it (not a newer agent's).
  static void Withdraw(const std::string& path, const cache::ProcessIdentity& agent);

  // Watches the file at `path` for a process of node `node` whose schedule
  // has `num_samples` samples.
  NodeOwnership(std::string path, std::uint32_t node, std::uint64_t num_samples)
      : path_(std::move(path)), node_(node), num_samples_(num_samples) {}
  ~NodeOwnership();
  NodeOwnership(const NodeOwnership&) = delete;
  NodeOwnership& operator=(const NodeOwnership&) = delete;

  // Whether this node owns `sample`, when a live agent says; nullopt when no
  // agent speaks (keys as without one). A few atomic loads: the file and the
  // agent's liveness are looked at again at most once a second, by whichever
  // caller comes first.
  std::optional<bool> Owned(std::uint64_t sample) const;

 private:
  struct Mapping;
  // Looks at the file and the agent again; called by one thread at a time.
  void Refresh() const;

  std::string path_;
  std::uint32_t node_;
  std::uint64_t num_samples_;
  mutable std::atomic<std::int64_t> next_check_ns_{0};
  // The process refreshing now (0: none). Not a mutex: a DataLoader worker
  // forked while a thread of its parent refreshed must not wait for a thread
  // it does not have; a pid not its own is taken over.
  mutable std::atomic<std::int32_t> refreshing_{0};
  mutable std::atomic<const Mapping*> current_{nullptr};  // null: no live agent
  // Every mapping made (an agent restart makes a new one), chained; kept
  // until this object goes, so a reader never sees one unmapped.
  mutable const Mapping* newest_ = nullptr;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_NODE_OWNERSHIP_H_
