#include "vol/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

namespace prescient::vol {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<bool> ParseBool(std::string_view v) {
  const std::string s = Lower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

std::optional<LogLevel> ParseLogLevel(std::string_view v) {
  const std::string s = Lower(v);
  if (s == "error") return LogLevel::kError;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "info") return LogLevel::kInfo;
  if (s == "debug") return LogLevel::kDebug;
  return std::nullopt;
}

std::optional<std::string> ParsePath(std::string_view v) {
  if (v.empty()) return std::nullopt;
  return std::string(v);
}

// The table. Each row: how to read one setting into Options.
struct OptionRow {
  OptionDoc doc;
  // Returns false when the value is not accepted.
  bool (*apply)(std::string_view value, Options& options);
};

const std::vector<OptionRow>& Rows() {
  static const std::vector<OptionRow> rows = {
      {{"PRESCIENT_ENABLE", "enable", "1|0 (also true/false, yes/no, on/off)", "1",
        "0 makes Prescient a pure pass-through: every call forwarded, nothing decoded or cached"},
       [](std::string_view v, Options& o) {
         auto b = ParseBool(v);
         if (b) o.enable = *b;
         return b.has_value();
       }},
      {{"PRESCIENT_LOG", "log", "error|warn|info|debug", "warn",
        "what Prescient prints on stderr (prefixed 'prescient:')"},
       [](std::string_view v, Options& o) {
         auto l = ParseLogLevel(v);
         if (l) o.log_level = *l;
         return l.has_value();
       }},
      {{"PRESCIENT_STATS", "stats", "a file path; %p is replaced by the pid", "(none)",
        "write per-process counters as JSON at every file close and at exit; forked workers "
        "write <path>.<pid>.json"},
       [](std::string_view v, Options& o) {
         auto p = ParsePath(v);
         if (p) o.stats_path = *p;
         return p.has_value();
       }},
  };
  return rows;
}

// Splits "a=1;b=2" into ordered pairs; an item without '=' maps to "".
std::vector<std::pair<std::string, std::string>> SplitSettings(std::string_view settings) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!settings.empty()) {
    const std::size_t semi = settings.find(';');
    std::string_view item = settings.substr(0, semi);
    settings = semi == std::string_view::npos ? std::string_view{} : settings.substr(semi + 1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) {
      item.remove_prefix(1);
    }
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) {
      item.remove_suffix(1);
    }
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    out.emplace_back(Lower(item.substr(0, eq)),
                     eq == std::string_view::npos ? "" : std::string(item.substr(eq + 1)));
  }
  return out;
}

std::string Rejection(std::string_view where, std::string_view value, const OptionDoc& doc) {
  return std::string(where) + "='" + std::string(value) +
         "' is not valid (accepted: " + std::string(doc.accepted) + ")";
}

}  // namespace

ParsedOptions ParseOptions(const EnvLookup& env, std::string_view settings) {
  ParsedOptions parsed;
  std::map<std::string, std::string> from_info;
  for (auto& [key, value] : SplitSettings(settings)) {
    const bool known = std::any_of(Rows().begin(), Rows().end(),
                                   [&](const OptionRow& r) { return r.doc.info_key == key; });
    if (!known) {
      std::string keys;
      for (const OptionRow& r : Rows())
        keys += (keys.empty() ? "" : ", ") + std::string(r.doc.info_key);
      parsed.warnings.push_back("connector info setting '" + key + "' is unknown (known: " + keys +
                                ", under_vol, under_info)");
      continue;
    }
    from_info[key] = value;
  }
  for (const OptionRow& row : Rows()) {
    const auto info_it = from_info.find(std::string(row.doc.info_key));
    if (info_it != from_info.end()) {
      if (!row.apply(info_it->second, parsed.options)) {
        parsed.warnings.push_back(Rejection(
            "connector info setting " + std::string(row.doc.info_key), info_it->second, row.doc));
      }
      continue;
    }
    const std::optional<std::string> value = env(row.doc.variable);
    if (!value) continue;
    if (!row.apply(*value, parsed.options)) {
      parsed.warnings.push_back(Rejection(row.doc.variable, *value, row.doc));
    }
  }
  if (!parsed.warnings.empty()) parsed.options.enable = false;
  return parsed;
}

std::optional<std::string> ProcessEnv(std::string_view name) {
  // The only place that reads the environment; called once per process.
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

const std::vector<OptionDoc>& OptionDocs() {
  static const std::vector<OptionDoc> docs = [] {
    std::vector<OptionDoc> d;
    for (const OptionRow& r : Rows()) d.push_back(r.doc);
    return d;
  }();
  return docs;
}

}  // namespace prescient::vol
