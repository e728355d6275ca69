#include "scheduler/plan/epoch_order.h"

#include <algorithm>
#include <bit>
#include <exception>
#include <limits>
#include <stdexcept>
#include <thread>

namespace prescient::scheduler::plan {
namespace {

// Edge cost with -1 standing for "no epoch" (the open ends of the path).
struct Edges {
  const EpochCostMatrix& cost;
  std::int64_t operator()(std::int64_t u, std::int64_t v) const {
    if (u < 0 || v < 0) return 0;
    return static_cast<std::int64_t>(
        cost(static_cast<std::uint32_t>(u), static_cast<std::uint32_t>(v)));
  }
};

// One improving 2-opt move (segment reversal; the matrix is asymmetric, so the
// reversed inner edges are costed through prefix sums). True if applied.
bool TwoOptMove(const Edges& c, std::vector<std::uint32_t>& p) {
  const std::size_t n = p.size();
  std::vector<std::int64_t> fwd(n, 0), bwd(n, 0);
  for (std::size_t k = 1; k < n; ++k) {
    fwd[k] = fwd[k - 1] + c(p[k - 1], p[k]);
    bwd[k] = bwd[k - 1] + c(p[k], p[k - 1]);
  }
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const std::int64_t before_i = i == 0 ? -1 : static_cast<std::int64_t>(p[i - 1]);
    for (std::size_t j = i + 1; j < n; ++j) {
      const std::int64_t after_j = j + 1 == n ? -1 : static_cast<std::int64_t>(p[j + 1]);
      const std::int64_t old_cost = c(before_i, p[i]) + (fwd[j] - fwd[i]) + c(p[j], after_j);
      const std::int64_t new_cost = c(before_i, p[j]) + (bwd[j] - bwd[i]) + c(p[i], after_j);
      if (new_cost < old_cost) {
        std::reverse(p.begin() + static_cast<std::ptrdiff_t>(i),
                     p.begin() + static_cast<std::ptrdiff_t>(j + 1));
        return true;
      }
    }
  }
  return false;
}

// One improving Or-opt move: a segment of 1-3 epochs moved elsewhere, unreversed.
bool OrOptMove(const Edges& c, std::vector<std::uint32_t>& p) {
  const auto n = static_cast<std::int64_t>(p.size());
  const auto at = [&](std::int64_t k) -> std::int64_t {
    return k < 0 || k >= n ? -1 : static_cast<std::int64_t>(p[static_cast<std::size_t>(k)]);
  };
  for (std::int64_t len = 1; len <= 3 && len < n; ++len) {
    for (std::int64_t i = 0; i + len <= n; ++i) {
      const std::int64_t first = at(i), last = at(i + len - 1);
      const std::int64_t gain =
          c(at(i - 1), first) + c(last, at(i + len)) - c(at(i - 1), at(i + len));
      for (std::int64_t k = -1; k < n; ++k) {  // insert between at(k) and at(k + 1)
        if (k >= i - 1 && k <= i + len - 1) continue;
        const std::int64_t add = c(at(k), first) + c(last, at(k + 1)) - c(at(k), at(k + 1));
        if (add < gain) {
          std::vector<std::uint32_t> segment(p.begin() + i, p.begin() + i + len);
          std::vector<std::uint32_t> rest;
          rest.reserve(p.size());
          std::int64_t insert_at = -1;
          for (std::int64_t t = 0; t < n; ++t) {
            if (t >= i && t < i + len) continue;
            rest.push_back(p[static_cast<std::size_t>(t)]);
            if (t == k) insert_at = static_cast<std::int64_t>(rest.size());
          }
          if (k == -1) insert_at = 0;
          rest.insert(rest.begin() + insert_at, segment.begin(), segment.end());
          p = std::move(rest);
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

// N(u, v) = |H_v| - |H_v & T_u| (H: distinct samples of the first `buffer`
// reads, T: of the last `buffer`). When every epoch reads every sample and the
// buffer is more than half an epoch, the complement C_u (samples u does not
// read in its last `buffer` reads) is the small set: N(u, v) = |H_v & C_u|.
// Either way pass 1 records, per sample, the epochs u whose small set X_u holds
// it, and pass 2 walks every head H_v through a bitmap of "in some X" that
// fits in cache. Epoch sequences are regenerated rather than kept.
EpochCostMatrix BuildEpochCostMatrix(
    std::uint64_t num_samples, std::uint32_t epochs, std::uint64_t buffer,
    const std::function<void(std::uint32_t, std::vector<SampleId>&)>& sequence) {
  EpochCostMatrix cost(epochs);
  if (buffer == 0 || epochs < 2) return cost;
  const std::size_t words = (epochs + 63) / 64;
  std::vector<std::uint64_t> in_x(num_samples * words, 0);  // per sample: epochs u with s in X_u
  std::vector<std::uint64_t> any_x((num_samples + 63) / 64, 0);
  std::vector<std::uint64_t> scratch((num_samples + 63) / 64, 0);
  const auto test = [](const std::vector<std::uint64_t>& bits, SampleId s) {
    return (bits[s / 64] >> (s % 64)) & 1;
  };
  const auto set = [](std::vector<std::uint64_t>& bits, SampleId s) {
    bits[s / 64] |= std::uint64_t{1} << (s % 64);
  };
  const auto clear = [](std::vector<std::uint64_t>& bits, SampleId s) {
    bits[s / 64] &= ~(std::uint64_t{1} << (s % 64));
  };

  std::vector<SampleId> seq;
  bool complement = false;
  for (std::uint32_t u = 0; u < epochs; ++u) {
    sequence(u, seq);
    const bool every_sample = seq.size() >= num_samples;  // padded permutations hold all
    if (u == 0) complement = every_sample && buffer * 2 > seq.size();
    if (complement && !every_sample) {
      throw std::logic_error("BuildEpochCostMatrix: epochs differ in which samples they read");
    }
    const std::size_t edge = seq.size() > buffer ? seq.size() - buffer : 0;
    const std::uint64_t bit = std::uint64_t{1} << (u % 64);
    const auto add = [&](SampleId s) {
      in_x[s * words + u / 64] |= bit;
      set(any_x, s);
    };
    if (complement) {
      for (std::size_t p = 0; p < edge; ++p) set(scratch, seq[p]);
      for (std::size_t p = edge; p < seq.size(); ++p) clear(scratch, seq[p]);
      for (std::size_t p = 0; p < edge; ++p) {
        if (test(scratch, seq[p])) {
          add(seq[p]);
          clear(scratch, seq[p]);
        }
      }
    } else {
      for (std::size_t p = edge; p < seq.size(); ++p) add(seq[p]);
    }
  }

  // Pass 2 on two threads (the machine's cores), epochs v split odd/even; a
  // thread writes only column v of `pairs` and head_size[v], so they share both.
  std::vector<std::uint64_t> pairs(static_cast<std::size_t>(epochs) * epochs, 0);
  std::vector<std::uint64_t> head_size(epochs, 0);
  const auto heads = [&](std::uint32_t first, std::vector<SampleId>& sequence_buffer,
                         std::vector<std::uint64_t>& seen) {
    for (std::uint32_t v = first; v < epochs; v += 2) {
      sequence(v, sequence_buffer);
      const std::vector<SampleId>& sq = sequence_buffer;
      const std::size_t head = std::min<std::size_t>(buffer, sq.size());
      for (std::size_t p = 0; p < head; ++p) {  // distinct samples of the head
        if (test(seen, sq[p])) continue;
        set(seen, sq[p]);
        ++head_size[v];
        if (!test(any_x, sq[p])) continue;
        for (std::size_t w = 0; w < words; ++w) {
          for (std::uint64_t bits = in_x[sq[p] * words + w]; bits != 0; bits &= bits - 1) {
            ++pairs[(w * 64 + std::countr_zero(bits)) * epochs + v];
          }
        }
      }
      for (std::size_t p = 0; p < head; ++p) clear(seen, sq[p]);
    }
  };
  std::vector<SampleId> other_seq;
  std::vector<std::uint64_t> other_scratch(scratch.size(), 0);
  std::exception_ptr failure;
  std::thread second([&] {
    try {
      heads(1, other_seq, other_scratch);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  try {
    heads(0, seq, scratch);
  } catch (...) {
    second.join();
    throw;
  }
  second.join();
  if (failure) std::rethrow_exception(failure);
  for (std::uint32_t u = 0; u < epochs; ++u) {
    for (std::uint32_t v = 0; v < epochs; ++v) {
      if (u == v) continue;
      const std::uint64_t shared = pairs[static_cast<std::size_t>(u) * epochs + v];
      cost.at(u, v) = complement ? shared : head_size[v] - shared;
    }
  }
  return cost;
}

std::uint64_t PathCost(const EpochCostMatrix& cost, std::span<const std::uint32_t> order) {
  std::uint64_t total = 0;
  for (std::size_t i = 1; i < order.size(); ++i) total += cost(order[i - 1], order[i]);
  return total;
}

// Held-Karp over open paths: best[mask][j] = cheapest path visiting `mask`
// and ending at j; any start.
std::vector<std::uint32_t> SolveEpochOrderExact(const EpochCostMatrix& cost) {
  const std::uint32_t n = cost.epochs();
  if (n > kExactEpochLimit) throw std::invalid_argument("SolveEpochOrderExact: too many epochs");
  if (n == 0) return {};
  constexpr std::uint64_t kInf = std::numeric_limits<std::uint64_t>::max();
  const std::size_t masks = std::size_t{1} << n;
  std::vector<std::uint64_t> best(masks * n, kInf);
  std::vector<std::uint8_t> parent(masks * n, 0);
  for (std::uint32_t j = 0; j < n; ++j) best[(std::size_t{1} << j) * n + j] = 0;
  for (std::size_t mask = 1; mask < masks; ++mask) {
    for (std::uint32_t j = 0; j < n; ++j) {
      const std::uint64_t here = best[mask * n + j];
      if (here == kInf) continue;
      for (std::uint32_t k = 0; k < n; ++k) {
        if (mask & (std::size_t{1} << k)) continue;
        const std::size_t next = mask | (std::size_t{1} << k);
        const std::uint64_t candidate = here + cost(j, k);
        if (candidate < best[next * n + k]) {
          best[next * n + k] = candidate;
          parent[next * n + k] = static_cast<std::uint8_t>(j);
        }
      }
    }
  }
  std::size_t mask = masks - 1;
  std::uint32_t end = 0;
  for (std::uint32_t j = 1; j < n; ++j) {
    if (best[mask * n + j] < best[mask * n + end]) end = j;
  }
  std::vector<std::uint32_t> order(n);
  for (std::uint32_t i = n; i-- > 0;) {
    order[i] = end;
    const std::uint32_t previous = parent[mask * n + end];
    mask &= ~(std::size_t{1} << end);
    end = previous;
  }
  return order;
}

std::vector<std::uint32_t> SolveEpochOrderHeuristic(const EpochCostMatrix& cost) {
  const std::uint32_t n = cost.epochs();
  std::vector<std::uint32_t> best_path(n);
  for (std::uint32_t i = 0; i < n; ++i) best_path[i] = i;
  std::uint64_t best_cost = PathCost(cost, best_path);
  const Edges edges{cost};
  for (std::uint32_t start = 0; start < n; ++start) {
    std::vector<std::uint32_t> path = {start};
    std::vector<bool> used(n, false);
    used[start] = true;
    while (path.size() < n) {
      std::uint32_t next = n;
      for (std::uint32_t k = 0; k < n; ++k) {
        if (!used[k] && (next == n || cost(path.back(), k) < cost(path.back(), next))) next = k;
      }
      used[next] = true;
      path.push_back(next);
    }
    while (TwoOptMove(edges, path) || OrOptMove(edges, path)) {
    }
    const std::uint64_t path_cost = PathCost(cost, path);
    if (path_cost < best_cost) {
      best_cost = path_cost;
      best_path = std::move(path);
    }
  }
  return best_path;
}

}  // namespace prescient::scheduler::plan
