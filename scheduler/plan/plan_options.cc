// Parsing and printing of the plan specification string (planner.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

#include "scheduler/plan/planner.h"

namespace prescient::scheduler::plan {
namespace {

[[noreturn]] void Bad(std::string_view key, std::string_view value, std::string_view accepted) {
  throw std::invalid_argument("plan option '" + std::string(key) + "': bad value '" +
                              std::string(value) + "' (accepted: " + std::string(accepted) + ")");
}

bool ParseSwitch(std::string_view key, std::string_view value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  Bad(key, value, "on | off");
}

// Parses all of `text` as a finite double; false on any leftover character.
bool ParseDouble(std::string_view text, double& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(out);
}

bool ParseUint(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

void ParseOrder(std::string_view value, PlanOptions& options) {
  constexpr std::string_view kAccepted =
      "global | local | partial:Q (0 <= Q <= 1) | groups:B (B >= 1)";
  if (value == "global") {
    options.order = Order::kGlobal;
  } else if (value == "local") {
    options.order = Order::kLocal;
  } else if (value.starts_with("partial:")) {
    double q = 0;
    if (!ParseDouble(value.substr(8), q) || q < 0 || q > 1) Bad("order", value, kAccepted);
    options.order = Order::kPartial;
    options.partial_q = q;
  } else if (value.starts_with("groups:")) {
    std::uint64_t b = 0;
    if (!ParseUint(value.substr(7), b) || b == 0) Bad("order", value, kAccepted);
    options.order = Order::kGroups;
    options.group_size = b;
  } else {
    Bad("order", value, kAccepted);
  }
}

void ParseCache(std::string_view value, PlanOptions& options) {
  constexpr std::string_view kAccepted = "N (samples per node) | P% (0 <= P <= 100)";
  if (value.ends_with('%')) {
    double percent = 0;
    if (!ParseDouble(value.substr(0, value.size() - 1), percent) || percent < 0 || percent > 100) {
      Bad("cache", value, kAccepted);
    }
    options.cache = {.is_percent = true, .value = percent};
  } else {
    std::uint64_t samples = 0;
    if (!ParseUint(value, samples)) Bad("cache", value, kAccepted);
    options.cache = {.is_percent = false, .value = static_cast<double>(samples)};
  }
}

std::string FormatDouble(double value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, ec == std::errc() ? end : buffer);
}

}  // namespace

std::uint64_t CacheCapacity::SamplesFor(std::uint64_t num_samples) const {
  if (!is_percent) return std::min<std::uint64_t>(static_cast<std::uint64_t>(value), num_samples);
  const long double samples = static_cast<long double>(num_samples) * value / 100.0L;
  return std::min<std::uint64_t>(static_cast<std::uint64_t>(samples), num_samples);
}

PlanOptions ParsePlanOptions(std::string_view spec) {
  PlanOptions options;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw std::invalid_argument("plan option '" + std::string(item) +
                                  "': expected key=value (keys: order, cache, epoch-order, remap, "
                                  "balance, balance-cap, sort, drop-last, solar)");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "order") {
      ParseOrder(value, options);
    } else if (key == "cache") {
      ParseCache(value, options);
    } else if (key == "epoch-order") {
      options.epoch_order = ParseSwitch(key, value);
    } else if (key == "remap") {
      options.remap = ParseSwitch(key, value);
    } else if (key == "balance") {
      options.balance = ParseSwitch(key, value);
    } else if (key == "sort") {
      options.sort = ParseSwitch(key, value);
    } else if (key == "drop-last") {
      options.drop_last = ParseSwitch(key, value);
    } else if (key == "solar") {
      const bool on = ParseSwitch(key, value);
      options.epoch_order = options.remap = options.balance = options.sort = on;
    } else if (key == "balance-cap") {
      double cap = 0;
      if (!ParseDouble(value, cap) || cap < 1) Bad(key, value, "a number >= 1");
      options.balance_cap = cap;
    } else {
      throw std::invalid_argument("plan option '" + std::string(key) +
                                  "': unknown key (accepted: order, cache, epoch-order, remap, "
                                  "balance, balance-cap, sort, drop-last, solar)");
    }
  }
  return options;
}

std::string CanonicalPlanOptions(const PlanOptions& options) {
  std::string out = "order=";
  switch (options.order) {
    case Order::kGlobal:
      out += "global";
      break;
    case Order::kLocal:
      out += "local";
      break;
    case Order::kPartial:
      out += "partial:" + FormatDouble(options.partial_q);
      break;
    case Order::kGroups:
      out += "groups:" + std::to_string(options.group_size);
      break;
  }
  out += ",cache=";
  out += options.cache.is_percent ? FormatDouble(options.cache.value) + "%"
                                  : std::to_string(static_cast<std::uint64_t>(options.cache.value));
  const auto on_off = [](bool on) { return on ? "on" : "off"; };
  out += std::string(",epoch-order=") + on_off(options.epoch_order);
  out += std::string(",remap=") + on_off(options.remap);
  out += std::string(",balance=") + on_off(options.balance);
  out += ",balance-cap=" + FormatDouble(options.balance_cap);
  out += std::string(",sort=") + on_off(options.sort);
  out += std::string(",drop-last=") + on_off(options.drop_last);
  return out;
}

}  // namespace prescient::scheduler::plan
