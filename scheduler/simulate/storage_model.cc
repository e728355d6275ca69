#include "scheduler/simulate/storage_model.h"

#include <algorithm>
#include <stdexcept>

namespace prescient::scheduler::simulate {

double StorageModel::PfsPerClient(double clients) const {
  if (clients <= 0 || pfs_table.empty()) return 0;
  double aggregate = pfs_table.front().second;
  if (clients >= pfs_table.back().first) {
    aggregate = pfs_table.back().second;
  } else {
    for (std::size_t i = 1; i < pfs_table.size(); ++i) {
      const auto [x0, y0] = pfs_table[i - 1];
      const auto [x1, y1] = pfs_table[i];
      if (clients <= x1) {
        aggregate = clients <= x0 ? y0 : y0 + (y1 - y0) * (clients - x0) / (x1 - x0);
        break;
      }
    }
  }
  const double per_client = aggregate / clients;
  return pfs_link_mbps > 0 ? std::min(per_client, pfs_link_mbps) : per_client;
}

double StorageModel::RankSeconds(double batch_bytes, double storage_bytes, double remote_bytes,
                                 double local_bytes, double storage_clients) const {
  return std::max(batch_bytes / 1e6 / compute_mbps,
                  FetchSeconds(storage_bytes, remote_bytes, local_bytes, storage_clients));
}

double StorageModel::FetchSeconds(double storage_bytes, double remote_bytes, double local_bytes,
                                  double storage_clients) const {
  constexpr double kMB = 1e6;
  double fetch = 0;
  if (storage_bytes > 0) fetch += storage_bytes / kMB / PfsPerClient(storage_clients);
  if (remote_bytes > 0) fetch += remote_bytes / kMB / remote_mbps;
  if (local_bytes > 0) fetch += local_bytes / kMB / local_mbps;
  return fetch;
}

StorageModel StorageModel::Lassen() {
  StorageModel m;
  m.name = "lassen";
  m.compute_mbps = 64;
  m.pfs_link_mbps = 0;
  m.pfs_table = {{1, 330}, {2, 730}, {4, 1540}, {8, 2870}};
  const double ram_per_thread = 85'000.0 / 4;  // r_1(4) = 85 GB/s, p_1 = 4
  m.remote_mbps = std::min(24'000.0, ram_per_thread);
  m.local_mbps = ram_per_thread;
  return m;
}

StorageModel StorageModelByName(const std::string& name) {
  if (name == "lassen") return StorageModel::Lassen();
  if (name == "none") return StorageModel{};
  throw std::invalid_argument("storage model '" + name + "': accepted: lassen | none");
}

}  // namespace prescient::scheduler::simulate
