// NoPFS's performance model (Dryden et al., SC'21, section 4), reduced to
// what a cache simulation needs: per step, every rank fetches its samples
// (storage, peer cache, own cache) while computing on the previous batch, and
// the step lasts as long as the slowest rank.
//
//   rank time = max(compute, fetch)
//   compute   = batch bytes / c
//   fetch     = storage bytes / min(b_fs, t(g) / g)      g = ranks reading storage
//             + remote bytes  / min(b_c, r_1(p_1) / p_1)
//             + local bytes   / (r_1(p_1) / p_1)
//
// t(g) is the PFS's aggregate random-read throughput with g clients, linearly
// interpolated between table points and clamped at the ends (as NoPFS's code
// does). Megabytes are 10^6 bytes.
#ifndef PRESCIENT_SCHEDULER_SIMULATE_STORAGE_MODEL_H_
#define PRESCIENT_SCHEDULER_SIMULATE_STORAGE_MODEL_H_

#include <string>
#include <utility>
#include <vector>

namespace prescient::scheduler::simulate {

struct StorageModel {
  std::string name;
  double compute_mbps = 0;                           // c, per rank
  double pfs_link_mbps = 0;                          // b_fs per rank; 0 = no limit
  std::vector<std::pair<double, double>> pfs_table;  // (clients, aggregate MB/s), ascending
  double remote_mbps = 0;                            // min(b_c, r_1(p_1) / p_1)
  double local_mbps = 0;                             // r_1(p_1) / p_1

  // Per-client storage throughput with `clients` ranks reading at once.
  double PfsPerClient(double clients) const;

  // Seconds one rank spends fetching its step's samples.
  double FetchSeconds(double storage_bytes, double remote_bytes, double local_bytes,
                      double storage_clients) const;

  // Seconds for one rank's step: max(compute, fetch).
  double RankSeconds(double batch_bytes, double storage_bytes, double remote_bytes,
                     double local_bytes, double storage_clients) const;

  // The simulation setup of NoPFS section 6.1, based on Lassen benchmarks:
  // c = 64 MB/s, b_c = 24,000 MB/s, RAM class r_1(4) = 85 GB/s with 4
  // threads, PFS t(1) = 330, t(2) = 730, t(4) = 1,540, t(8) = 2,870 MB/s. The
  // paper gives no b_fs for that setup: no link limit.
  static StorageModel Lassen();
};

// "lassen" or "none"; std::invalid_argument otherwise. "none" gives nullopt-like
// empty name (caller checks name.empty()).
StorageModel StorageModelByName(const std::string& name);

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_STORAGE_MODEL_H_
