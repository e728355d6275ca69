#include "scheduler/plan/remap.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace prescient::scheduler::plan {

RemapPlanner::RemapPlanner(std::uint64_t num_samples, const WorldLayout& layout,
                           std::uint64_t cache_per_node, std::uint64_t steps_per_epoch,
                           bool balance, double balance_cap)
    : layout_(layout),
      nodes_(layout.nodes()),
      capacity_(cache_per_node),
      balance_(balance),
      cap_(balance_cap),
      held_(num_samples),
      model_(layout.nodes()),
      hits_(layout.nodes()),
      kept_(layout.nodes()),
      quota_(layout.ranks),
      hit_share_(layout.ranks) {
  // Keys lie at most three epochs ahead of now (next epoch, or the guess for a
  // sample the next epoch drops).
  ring_size_ = static_cast<std::uint32_t>(3 * steps_per_epoch + 2);
  for (NodeModel& m : model_) m.ring.resize(capacity_ == 0 ? 0 : ring_size_);
}

void RemapPlanner::Hold(std::uint32_t node, SampleId s, std::uint32_t key) {
  NodeModel& m = model_[node];
  if (held_[s].holder != node) {
    held_[s].holder = node;
    ++m.held;
  }
  held_[s].key = key;
  if (key == kNeverUsed) {
    m.never.push_back(s);
  } else {
    m.ring[key % ring_size_].push_back(s);
    m.top = std::max(m.top, key);
  }
}

// Evicts node's held sample with the furthest next use if it lies beyond
// `than`; false (nothing evicted) otherwise.
bool RemapPlanner::EvictFurthest(std::uint32_t node, std::uint32_t now, std::uint32_t than) {
  NodeModel& m = model_[node];
  const auto evict = [&](SampleId s) {
    held_[s].holder = kNoHolder;
    held_[s].key = kNeverUsed;
    --m.held;
  };
  while (!m.never.empty()) {
    const SampleId s = m.never.back();
    m.never.pop_back();
    if (held_[s].holder == node && held_[s].key == kNeverUsed) {
      evict(s);
      return true;
    }
  }
  while (m.top > than && m.top >= now) {
    std::vector<SampleId>& bucket = m.ring[m.top % ring_size_];
    while (!bucket.empty()) {
      const SampleId s = bucket.back();
      bucket.pop_back();
      if (held_[s].holder == node && held_[s].key == m.top) {
        evict(s);
        return true;
      }
    }
    --m.top;
  }
  return false;
}

void RemapPlanner::Admit(std::uint32_t node, SampleId s, std::uint32_t key, std::uint32_t now) {
  if (key == kNeverUsed || capacity_ == 0) return;
  if (model_[node].held < capacity_ || EvictFurthest(node, now, key)) Hold(node, s, key);
}

// Entries keyed `now` whose sample was not read now (its next use was a guess,
// see the constructor) move one epoch on; the rest are stale and dropped.
void RemapPlanner::ExpireBucket(std::uint32_t now) {
  if (capacity_ == 0) return;
  for (std::uint32_t node = 0; node < nodes_; ++node) {
    std::vector<SampleId>& bucket = model_[node].ring[now % ring_size_];
    due_.clear();
    for (const SampleId s : bucket) {
      if (held_[s].holder == node && held_[s].key == now) due_.push_back(s);
    }
    bucket.clear();  // keeps its capacity for the step that reuses the slot
    for (const SampleId s : due_) Hold(node, s, now + (ring_size_ - 2) / 3);
  }
}

// Decides how many hits each node keeps and how many storage reads (quota_)
// and hits (hit_share_) each rank gets.
void RemapPlanner::SplitCounts(std::uint64_t batch, std::uint32_t now) {
  const std::uint32_t ranks = layout_.ranks;
  const std::uint64_t nominal = batch / ranks;
  const std::uint64_t max_batch =
      balance_ ? std::max<std::uint64_t>(
                     nominal,
                     static_cast<std::uint64_t>(std::floor(cap_ * static_cast<double>(nominal))))
               : nominal;
  const auto node_ranks = [&](std::uint32_t n) {
    const std::uint32_t first = n * layout_.ranks_per_node;
    return std::pair{first, std::min(first + layout_.ranks_per_node, ranks)};
  };
  for (std::uint32_t n = 0; n < nodes_; ++n) kept_[n] = hits_[n].size();
  const std::uint32_t rotate = now % ranks;  // who gets the +1 reads rotates
  for (bool changed = true; changed;) {
    changed = false;
    std::uint64_t kept_total = 0;
    for (std::uint32_t n = 0; n < nodes_; ++n) kept_total += kept_[n];
    const std::uint64_t misses = batch - kept_total;
    for (std::uint32_t n = 0; n < nodes_; ++n) {
      const auto [first, last] = node_ranks(n);
      std::uint64_t room = 0;
      for (std::uint32_t r = first; r < last; ++r) {
        if (balance_) {
          quota_[r] = misses / ranks + ((r + ranks - rotate) % ranks < misses % ranks ? 1 : 0);
          room += max_batch - std::min(max_batch, quota_[r]);
        } else {
          room += nominal;
        }
      }
      if (kept_[n] > room) {
        kept_[n] = room;
        changed = true;
      }
    }
  }
  for (std::uint32_t n = 0; n < nodes_; ++n) {
    const auto [first, last] = node_ranks(n);
    const std::uint32_t count = last - first;
    if (!balance_) {
      // Hits spread evenly; every rank reads the rest of its nominal batch.
      for (std::uint32_t i = 0; i < count; ++i) {
        hit_share_[first + i] = kept_[n] / count + (i < kept_[n] % count ? 1 : 0);
        quota_[first + i] = nominal - hit_share_[first + i];
      }
      continue;
    }
    // Water-fill: each hit goes to the node's rank with the smallest batch so far.
    for (std::uint32_t r = first; r < last; ++r) hit_share_[r] = 0;
    for (std::uint64_t h = 0; h < kept_[n]; ++h) {
      std::uint32_t pick = last;
      for (std::uint32_t r = first; r < last; ++r) {
        if (quota_[r] + hit_share_[r] >= max_batch) continue;
        if (pick == last || quota_[r] + hit_share_[r] < quota_[pick] + hit_share_[pick]) pick = r;
      }
      if (pick == last) throw std::logic_error("RemapPlanner: kept hits exceed node room");
      ++hit_share_[pick];
    }
  }
  if (balance_ && nominal > 0) GiveEveryRankASample();
}

// Balance can leave a rank with nothing to read (no reads due, no hits on its
// node) when a step is almost all hits; a data-parallel step needs every rank
// to have a batch. Such a rank takes a hit from a node mate with at least two
// samples (reads stay even), else one read from the rank with the most reads,
// else (nothing to read anywhere) a hit of another node, read from storage.
void RemapPlanner::GiveEveryRankASample() {
  const std::uint32_t ranks = layout_.ranks;
  const auto size = [&](std::uint32_t r) { return quota_[r] + hit_share_[r]; };
  for (std::uint32_t r = 0; r < ranks; ++r) {
    if (size(r) > 0) continue;
    const std::uint32_t first = layout_.NodeOf(r) * layout_.ranks_per_node;
    const std::uint32_t last = std::min(first + layout_.ranks_per_node, ranks);
    std::uint32_t donor = ranks;
    for (std::uint32_t d = first; d < last; ++d) {
      if (hit_share_[d] > 0 && size(d) >= 2 && (donor == ranks || size(d) > size(donor))) donor = d;
    }
    if (donor != ranks) {
      --hit_share_[donor];
      ++hit_share_[r];
      continue;
    }
    for (std::uint32_t d = 0; d < ranks; ++d) {
      if (quota_[d] > 0 && size(d) >= 2 && (donor == ranks || quota_[d] > quota_[donor])) donor = d;
    }
    if (donor != ranks) {
      --quota_[donor];
      ++quota_[r];
      continue;
    }
    // An all-hit step: a hit of another node becomes this rank's read.
    for (std::uint32_t d = 0; d < ranks; ++d) {
      if (hit_share_[d] > 0 && size(d) >= 2 && (donor == ranks || size(d) > size(donor))) donor = d;
    }
    if (donor == ranks) continue;  // nothing to spare: fewer samples than ranks
    --hit_share_[donor];
    --kept_[layout_.NodeOf(donor)];
    ++quota_[r];
  }
}

void RemapPlanner::AssignStep(std::span<const SampleId> batch,
                              std::span<const std::uint32_t> next_use, std::uint32_t now,
                              std::vector<std::vector<SampleId>>& out) {
  const std::uint32_t ranks = layout_.ranks;
  if (batch.size() % ranks != 0) throw std::invalid_argument("AssignStep: batch not divisible");
  for (auto& h : hits_) h.clear();
  misses_.clear();
  for (std::uint32_t i = 0; i < batch.size(); ++i) {
    const std::uint32_t holder = held_[batch[i]].holder;
    if (holder == kNoHolder) {
      misses_.push_back(i);
    } else {
      hits_[holder].push_back(i);
    }
  }
  SplitCounts(batch.size(), now);

  // Displaced hits join the storage reads.
  std::uint64_t kept_total = 0;
  for (std::uint32_t n = 0; n < nodes_; ++n) {
    kept_total += kept_[n];
    report_.displaced_hits += hits_[n].size() - kept_[n];
    misses_.insert(misses_.end(), hits_[n].begin() + static_cast<std::ptrdiff_t>(kept_[n]),
                   hits_[n].end());
  }
  report_.predicted_hits += kept_total;

  // Decide every batch index's rank, then emit each rank's samples in batch
  // order (the random order of the global batch) in one pass.
  reader_node_.resize(batch.size());
  rank_of_.resize(batch.size());
  out.resize(ranks);
  std::size_t next_miss = 0;
  std::uint64_t min_reads = ~std::uint64_t{0}, max_reads = 0;
  for (std::uint32_t n = 0; n < nodes_; ++n) {
    const std::uint32_t first = n * layout_.ranks_per_node;
    const std::uint32_t last = std::min(first + layout_.ranks_per_node, ranks);
    std::size_t next_hit = 0;
    for (std::uint32_t r = first; r < last; ++r) {
      for (std::uint64_t k = 0; k < hit_share_[r]; ++k) rank_of_[hits_[n][next_hit++]] = r;
      for (std::uint64_t k = 0; k < quota_[r]; ++k) rank_of_[misses_[next_miss++]] = r;
      out[r].clear();
      min_reads = std::min(min_reads, quota_[r]);
      max_reads = std::max(max_reads, quota_[r]);
    }
  }
  for (std::uint32_t i = 0; i < batch.size(); ++i) {
    const std::uint32_t r = rank_of_[i];
    out[r].push_back(batch[i]);
    reader_node_[i] = layout_.NodeOf(r);
  }
  for (std::uint32_t r = 0; r < ranks; ++r) {
    report_.max_rank_batch =
        std::max(report_.max_rank_batch, static_cast<std::uint32_t>(out[r].size()));
    report_.min_rank_batch =
        std::min(report_.min_rank_batch, static_cast<std::uint32_t>(out[r].size()));
  }
  if (next_miss != misses_.size()) throw std::logic_error("RemapPlanner: reads left unassigned");
  report_.max_storage_spread =
      std::max(report_.max_storage_spread, static_cast<std::uint32_t>(max_reads - min_reads));

  // The cache model learns this step: holders refresh their key, the readers of
  // uncached samples admit them Belady-style.
  for (std::uint32_t i = 0; i < batch.size(); ++i) {
    const SampleId s = batch[i];
    const std::uint32_t holder = held_[s].holder;
    if (capacity_ == 0) break;
    if (holder != kNoHolder) {
      Hold(holder, s, next_use[i]);
    } else {
      Admit(reader_node_[i], s, next_use[i], now);
    }
  }
  ExpireBucket(now);
}

}  // namespace prescient::scheduler::plan
