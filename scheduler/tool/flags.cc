#include "scheduler/tool/flags.h"

#include <charconv>
#include <limits>

namespace prescient::scheduler::tool {

std::uint64_t ParseUnsigned(const std::string& text, const std::string& what) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    throw UsageError(what + ": expected an unsigned integer, got '" + text + "'");
  }
  return value;
}

Flags::Flags(const std::vector<std::string>& args, const std::set<std::string>& valued,
             const std::set<std::string>& booleans, const std::set<std::string>& repeated) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const std::size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (repeated.count(name) != 0) {
      if (!value) {
        if (i + 1 >= args.size()) throw UsageError("--" + name + " needs a value");
        value = args[++i];
      }
      values_[name] = *value;  // Has() and Get() see the last one
      repeated_values_[name].push_back(*value);
    } else if (valued.count(name) != 0) {
      if (!value) {
        if (i + 1 >= args.size()) throw UsageError("--" + name + " needs a value");
        value = args[++i];
      }
      values_[name] = *value;
    } else if (booleans.count(name) != 0) {
      if (value) throw UsageError("--" + name + " takes no value");
      values_[name] = "1";
    } else {
      throw UsageError("unknown option --" + name);
    }
  }
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Flags::GetAll(const std::string& name) const {
  auto it = repeated_values_.find(name);
  return it == repeated_values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Flags::Required(const std::string& name) const {
  std::optional<std::string> v = Get(name);
  if (!v) throw UsageError("--" + name + " is required");
  return *v;
}

std::uint64_t Flags::U64(const std::string& name, std::uint64_t fallback) const {
  std::optional<std::string> v = Get(name);
  return v ? ParseUnsigned(*v, "--" + name) : fallback;
}

std::uint32_t Flags::U32(const std::string& name, std::uint32_t fallback) const {
  const std::uint64_t v = U64(name, fallback);
  if (v > std::numeric_limits<std::uint32_t>::max()) {
    throw UsageError("--" + name + ": " + std::to_string(v) + " is too large");
  }
  return static_cast<std::uint32_t>(v);
}

std::uint64_t Flags::Seed(const std::string& name, bool allow_negative) const {
  std::optional<std::string> v = Get(name);
  if (!v) return 0;
  if (!v->empty() && (*v)[0] == '-') {
    if (!allow_negative) throw UsageError("--" + name + " must not be negative for this source");
    const std::uint64_t magnitude = ParseUnsigned(v->substr(1), "--" + name);
    return ~magnitude + 1;  // two's complement, as torch.manual_seed does
  }
  return ParseUnsigned(*v, "--" + name);
}

}  // namespace prescient::scheduler::tool
