#include "scheduler/core/loader_spec.h"

#include <charconv>
#include <limits>
#include <stdexcept>

namespace prescient::scheduler {
namespace {

struct SourceName {
  LoaderSource source;
  std::string_view name;
};
constexpr SourceName kSourceNames[] = {
    {LoaderSource::kTorchDistributed, "torch-distributed"},
    {LoaderSource::kTorchLoader, "torch-loader"},
    {LoaderSource::kNumpy, "numpy"},
    {LoaderSource::kNumpyLegacy, "numpy-legacy"},
    {LoaderSource::kSequential, "sequential"},
};

bool ParseBool(std::string_view key, std::string_view value) {
  if (value == "1" || value == "true" || value == "on") return true;
  if (value == "0" || value == "false" || value == "off") return false;
  throw std::invalid_argument("loader parameter '" + std::string(key) +
                              "': expected 0 or 1, got '" + std::string(value) + "'");
}

std::uint64_t ParseU64(std::string_view key, std::string_view value) {
  std::uint64_t out = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    throw std::invalid_argument("loader parameter '" + std::string(key) +
                                "': expected an unsigned integer, got '" + std::string(value) +
                                "'");
  }
  return out;
}

}  // namespace

std::string_view LoaderSourceName(LoaderSource source) {
  for (const SourceName& s : kSourceNames) {
    if (s.source == source) return s.name;
  }
  return "unknown";
}

std::optional<LoaderSource> ParseLoaderSource(std::string_view name) {
  for (const SourceName& s : kSourceNames) {
    if (s.name == name) return s.source;
  }
  return std::nullopt;
}

std::string CanonicalLoaderParameters(const LoaderSpec& spec) {
  auto flag = [](bool b) { return b ? "1" : "0"; };
  std::string out = "seed=" + std::to_string(spec.seed);
  out += std::string(",shuffle=") + flag(spec.shuffle);
  out += std::string(",drop_last=") + flag(spec.drop_last);
  out += std::string(",drop_last_batch=") + flag(spec.drop_last_batch);
  out += std::string(",persistent_workers=") + flag(spec.persistent_workers);
  out += std::string(",reseed_each_epoch=") + flag(spec.reseed_each_epoch);
  return out;
}

LoaderSpec ParseLoaderSpec(std::string_view source, std::string_view parameters) {
  LoaderSpec spec;
  std::optional<LoaderSource> parsed = ParseLoaderSource(source);
  if (!parsed) {
    throw std::invalid_argument("unknown loader source '" + std::string(source) +
                                "' (torch-distributed, torch-loader, numpy, numpy-legacy, "
                                "sequential)");
  }
  spec.source = *parsed;
  while (!parameters.empty()) {
    const std::size_t comma = parameters.find(',');
    const std::string_view item = parameters.substr(0, comma);
    parameters =
        comma == std::string_view::npos ? std::string_view() : parameters.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw std::invalid_argument("loader parameter '" + std::string(item) +
                                  "': expected key=value");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "seed") {
      spec.seed = ParseU64(key, value);
    } else if (key == "shuffle") {
      spec.shuffle = ParseBool(key, value);
    } else if (key == "drop_last") {
      spec.drop_last = ParseBool(key, value);
    } else if (key == "drop_last_batch") {
      spec.drop_last_batch = ParseBool(key, value);
    } else if (key == "persistent_workers") {
      spec.persistent_workers = ParseBool(key, value);
    } else if (key == "reseed_each_epoch") {
      spec.reseed_each_epoch = ParseBool(key, value);
    } else {
      throw std::invalid_argument("unknown loader parameter '" + std::string(key) + "'");
    }
  }
  return spec;
}

void ValidateLoaderSpec(const LoaderSpec& spec, std::uint64_t num_samples,
                        const WorldLayout& layout, std::uint32_t epochs) {
  const std::string name(LoaderSourceName(spec.source));
  if (num_samples == 0) throw std::invalid_argument(name + ": the dataset has no samples");
  if (num_samples > std::numeric_limits<SampleId>::max()) {
    throw std::invalid_argument(name + ": more than 2^32 - 1 samples");
  }
  if (layout.ranks == 0 || layout.ranks_per_node == 0 || layout.batch_size == 0) {
    throw std::invalid_argument(name + ": ranks, ranks per node and batch size must be >= 1");
  }
  if (spec.drop_last && num_samples < layout.ranks) {
    throw std::invalid_argument(name + ": drop_last with fewer samples than ranks leaves none");
  }
  switch (spec.source) {
    case LoaderSource::kTorchLoader:
      if (layout.ranks != 1) {
        throw std::invalid_argument(
            "torch-loader describes one DataLoader on one rank; use torch-distributed for "
            "several ranks");
      }
      if (spec.drop_last) {
        throw std::invalid_argument(
            "torch-loader has no sampler-level drop_last; DataLoader(drop_last=True) is "
            "--drop-last-batch");
      }
      break;
    case LoaderSource::kNumpyLegacy:
      if (spec.seed > 0xffffffffULL) {
        throw std::invalid_argument("numpy-legacy: the seed must be in [0, 2^32 - 1]");
      }
      if (spec.reseed_each_epoch && epochs > 0 && spec.seed + (epochs - 1) > 0xffffffffULL) {
        throw std::invalid_argument("numpy-legacy: seed + epoch must stay below 2^32");
      }
      break;
    default:
      break;
  }
  // DistributedSampler draws nothing from a generator, so persistent workers
  // do not change its order; accepted to mirror the user's DataLoader.
  if (spec.persistent_workers && spec.source != LoaderSource::kTorchLoader &&
      spec.source != LoaderSource::kTorchDistributed) {
    throw std::invalid_argument(name + ": persistent_workers is a torch DataLoader option");
  }
  if (spec.persistent_workers && layout.workers == 0) {
    throw std::invalid_argument(name +
                                ": persistent_workers needs workers > 0 (PyTorch refuses it)");
  }
  if (spec.reseed_each_epoch && spec.source != LoaderSource::kNumpy &&
      spec.source != LoaderSource::kNumpyLegacy) {
    throw std::invalid_argument(name + ": reseed_each_epoch is for the numpy sources");
  }
  if (!spec.shuffle && spec.source != LoaderSource::kTorchDistributed &&
      spec.source != LoaderSource::kSequential) {
    throw std::invalid_argument(name +
                                ": shuffle=0 only exists for torch-distributed "
                                "(use the sequential source)");
  }
}

}  // namespace prescient::scheduler
