#include "scheduler/simulate/report.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#ifndef PRESCIENT_PLOT_SCRIPT_DEFAULT
#define PRESCIENT_PLOT_SCRIPT_DEFAULT "plot_simulation.py"
#endif

namespace prescient::scheduler::simulate {
namespace {

std::string Grouped(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Fixed(double v, int decimals) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << v;
  return s.str();
}

bool UsesPeers(Policy p) { return p == Policy::kNopfs || p == Policy::kPrescient; }

std::uint64_t BoundFor(const SimulationResult& r, Policy p) {
  return UsesPeers(p) ? r.bounds.compulsory_global : r.bounds.compulsory_node;
}

std::string Ratio(std::uint64_t value, std::uint64_t bound) {
  if (bound == 0) return value == 0 ? "1.00" : "inf";
  return Fixed(static_cast<double>(value) / static_cast<double>(bound), 2);
}

std::ofstream OpenOut(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  return out;
}

void Finish(std::ofstream& out, const std::string& path) {
  out.flush();
  if (!out) throw std::runtime_error("error writing " + path);
}

}  // namespace

void PrintTable(const SimulationResult& r, std::ostream& out) {
  const double gib = static_cast<double>(r.row_bytes) / (1024.0 * 1024 * 1024);
  out << "schedule: " << Grouped(r.num_samples) << " samples, " << r.epochs << " epochs, "
      << r.layout.ranks << " ranks on " << r.layout.nodes() << " nodes (" << r.layout.ranks_per_node
      << " per node)\n";
  out << "cache: " << Grouped(r.cache_samples) << " samples per node ("
      << Fixed(r.num_samples ? 100.0 * static_cast<double>(r.cache_samples) /
                                   static_cast<double>(r.num_samples)
                             : 0,
               1)
      << "% of the dataset)";
  if (r.row_bytes) out << ", " << Grouped(r.row_bytes) << " bytes per sample";
  if (r.slot_bytes && r.slot_bytes != r.row_bytes) {
    out << " (" << Grouped(r.slot_bytes) << " in cache blocks)";
  }
  out << "; storage model: " << (r.model_name.empty() ? "none" : r.model_name) << "\n";
  if (r.fields.size() > 1) {
    out << "fields: " << r.fields.size() << " (";
    for (std::size_t i = 0; i < r.fields.size(); ++i) out << (i ? ", " : "") << r.fields[i];
    out << "); a sample read from storage reads one row of each field, so storage rows = "
        << r.fields.size() << " x storage reads\n";
  }
  out << "lower bounds: compulsory per node " << Grouped(r.bounds.compulsory_node)
      << ", compulsory overall " << Grouped(r.bounds.compulsory_global)
      << ", Belady optimum (node caches) " << Grouped(r.bounds.belady) << "\n";
  if (r.ownership) {
    out << "prescient owners: " << Grouped(r.ownership->owned) << " samples owned (at most "
        << Grouped(r.ownership->budget) << " per node), " << Grouped(r.ownership->unowned)
        << " read samples without owner\n";
  }
  out << "\n";

  const bool rows = r.fields.size() > 1;
  out << std::left << std::setw(10) << "policy" << std::right << std::setw(15) << "storage reads";
  if (rows) out << std::setw(15) << "storage rows";
  out << std::setw(15) << "local hits" << std::setw(13) << "remote hits";
  if (r.row_bytes) out << std::setw(11) << "GiB read";
  out << std::setw(15) << "slowest rank" << std::setw(15) << "lower bound" << std::setw(9)
      << "x bound" << std::setw(10) << "x Belady";
  if (!r.model_name.empty()) out << std::setw(13) << "model time" << std::setw(11) << "I/O time";
  out << "\n";
  for (const PolicyResult& p : r.policies) {
    const std::uint64_t bound = BoundFor(r, p.policy);
    out << std::left << std::setw(10) << PolicyName(p.policy) << std::right << std::setw(15)
        << Grouped(p.total.storage);
    if (rows) out << std::setw(15) << Grouped(p.total.storage * r.rows_per_sample());
    out << std::setw(15) << Grouped(p.total.hits) << std::setw(13) << Grouped(p.total.remote);
    if (r.row_bytes) out << std::setw(11) << Fixed(static_cast<double>(p.total.storage) * gib, 1);
    out << std::setw(15) << Grouped(p.slowest_rank_storage) << std::setw(14) << Grouped(bound)
        << (UsesPeers(p.policy) ? "*" : " ") << std::setw(9) << Ratio(p.total.storage, bound)
        << std::setw(10) << Ratio(p.total.storage, r.bounds.belady);
    if (!r.model_name.empty()) {
      out << std::setw(12) << Fixed(p.model_seconds / 3600, 3) << "h" << std::setw(10)
          << Fixed(p.io_seconds / 3600, 3) << "h";
    }
    out << "\n";
  }
  out << "\nslowest rank = sum over steps of the largest per-rank storage reads (imbalance);\n"
         "lower bound = compulsory misses per node, or overall (*) for policies that fetch from "
         "peers;\nx Belady = storage reads / Belady's optimum for this order with node caches.\n";

  out << "\nstorage reads per epoch\n" << std::setw(6) << "epoch";
  for (const PolicyResult& p : r.policies) out << std::setw(14) << PolicyName(p.policy);
  out << "\n";
  for (std::uint32_t e = 0; e < r.epochs; ++e) {
    out << std::setw(6) << e;
    for (const PolicyResult& p : r.policies)
      out << std::setw(14) << Grouped(p.epochs[e].counts.storage);
    out << "\n";
  }
}

void WriteCsv(const SimulationResult& r, const std::string& path) {
  std::ofstream out = OpenOut(path);
  out << "level,policy,epoch,step,rank,reads,storage,hits,remote,max_rank_storage,"
         "min_rank_storage,model_seconds,io_seconds\n";
  for (const PolicyResult& p : r.policies) {
    const char* name = PolicyName(p.policy);
    for (std::uint32_t e = 0; e < r.epochs; ++e) {
      const EpochStats& ep = p.epochs[e];
      out << "epoch," << name << ',' << e << ",,," << ep.counts.reads << ',' << ep.counts.storage
          << ',' << ep.counts.hits << ',' << ep.counts.remote << ',' << ep.slowest_rank_storage
          << ",," << ep.model_seconds << ',' << ep.io_seconds << '\n';
      for (std::uint32_t rank = 0; rank < r.layout.ranks; ++rank) {
        const Counts& c = p.rank_epochs[static_cast<std::size_t>(e) * r.layout.ranks + rank];
        out << "rank," << name << ',' << e << ",," << rank << ',' << c.reads << ',' << c.storage
            << ',' << c.hits << ',' << c.remote << ",,,,\n";
      }
    }
    for (const StepStats& s : p.steps) {
      out << "step," << name << ',' << s.epoch << ',' << s.step << ",," << s.counts.reads << ','
          << s.counts.storage << ',' << s.counts.hits << ',' << s.counts.remote << ','
          << s.max_rank_storage << ',' << s.min_rank_storage << ',' << s.model_seconds << ','
          << s.io_seconds << '\n';
    }
  }
  Finish(out, path);
}

void WriteJson(const SimulationResult& r, const std::string& path) {
  std::ofstream out = OpenOut(path);
  out << std::setprecision(9);
  out << "{\n  \"num_samples\": " << r.num_samples << ",\n  \"epochs\": " << r.epochs
      << ",\n  \"ranks\": " << r.layout.ranks
      << ",\n  \"ranks_per_node\": " << r.layout.ranks_per_node
      << ",\n  \"nodes\": " << r.layout.nodes() << ",\n  \"cache_samples\": " << r.cache_samples
      << ",\n  \"row_bytes\": " << r.row_bytes << ",\n  \"slot_bytes\": " << r.slot_bytes
      << ",\n  \"rows_per_sample\": " << r.rows_per_sample() << ",\n  \"fields\": [";
  for (std::size_t i = 0; i < r.fields.size(); ++i) {
    out << (i ? ", " : "") << '"';
    for (const char c : r.fields[i]) {
      if (c == '"' || c == '\\') out << '\\';
      out << c;
    }
    out << '"';
  }
  out << "],\n  \"model\": \"" << r.model_name
      << "\",\n  \"bounds\": {\"compulsory_node\": " << r.bounds.compulsory_node
      << ", \"compulsory_global\": " << r.bounds.compulsory_global
      << ", \"belady\": " << r.bounds.belady << "},\n";
  if (r.ownership) {
    out << "  \"ownership\": {\"budget\": " << r.ownership->budget
        << ", \"owned\": " << r.ownership->owned << ", \"unowned\": " << r.ownership->unowned
        << "},\n";
  }
  out << "  \"policies\": [";
  const auto counts = [&](const Counts& c) {
    out << "\"reads\": " << c.reads << ", \"storage\": " << c.storage << ", \"hits\": " << c.hits
        << ", \"remote\": " << c.remote;
  };
  for (std::size_t i = 0; i < r.policies.size(); ++i) {
    const PolicyResult& p = r.policies[i];
    out << (i ? ",\n" : "\n") << "    {\"policy\": \"" << PolicyName(p.policy) << "\", ";
    counts(p.total);
    out << ", \"storage_rows\": " << p.total.storage * r.rows_per_sample()
        << ", \"lower_bound\": " << BoundFor(r, p.policy)
        << ", \"slowest_rank_storage\": " << p.slowest_rank_storage
        << ", \"model_seconds\": " << p.model_seconds << ", \"io_seconds\": " << p.io_seconds
        << ",\n     \"epochs\": [";
    for (std::uint32_t e = 0; e < r.epochs; ++e) {
      out << (e ? ", " : "") << "{";
      counts(p.epochs[e].counts);
      out << ", \"slowest_rank_storage\": " << p.epochs[e].slowest_rank_storage
          << ", \"model_seconds\": " << p.epochs[e].model_seconds
          << ", \"io_seconds\": " << p.epochs[e].io_seconds << "}";
    }
    out << "],\n     \"rank_storage\": [";  // [epoch][rank]
    for (std::uint32_t e = 0; e < r.epochs; ++e) {
      out << (e ? ", [" : "[");
      for (std::uint32_t rank = 0; rank < r.layout.ranks; ++rank) {
        out << (rank ? "," : "")
            << p.rank_epochs[static_cast<std::size_t>(e) * r.layout.ranks + rank].storage;
      }
      out << "]";
    }
    out << "],\n     \"step_max_rank_storage\": [";
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
      out << (s ? "," : "") << p.steps[s].max_rank_storage;
    }
    out << "],\n     \"step_storage\": [";
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
      out << (s ? "," : "") << p.steps[s].counts.storage;
    }
    out << "]}";
  }
  out << "\n  ]\n}\n";
  Finish(out, path);
}

std::string PlotScriptPath() {
  if (const char* env = std::getenv("PRESCIENT_PLOT_SCRIPT"); env != nullptr && *env) return env;
  return PRESCIENT_PLOT_SCRIPT_DEFAULT;
}

void RunPlotScript(const std::string& json_path, const std::string& png_path) {
  const auto quote = [](const std::string& s) {
    std::string q = "'";
    for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string command =
      "python3 " + quote(PlotScriptPath()) + " " + quote(json_path) + " " + quote(png_path);
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("plot failed: " + command);
  }
}

}  // namespace prescient::scheduler::simulate
