// A small command-line flag parser for the prescient-schedule subcommands:
// "--name value", "--name=value" and boolean "--name"; anything else is a
// positional argument. Unknown or malformed flags are errors (UsageError).
#ifndef PRESCIENT_SCHEDULER_TOOL_FLAGS_H_
#define PRESCIENT_SCHEDULER_TOOL_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace prescient::scheduler::tool {

// A mistake in how the tool was called; main prints it with the usage hint.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Flags {
 public:
  // `valued` flags take a value; `booleans` do not; `repeated` flags take a
  // value and may be given several times (GetAll). Throws UsageError.
  Flags(const std::vector<std::string>& args, const std::set<std::string>& valued,
        const std::set<std::string>& booleans, const std::set<std::string>& repeated = {});

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> Get(const std::string& name) const;
  // Every value of a repeated flag, in the order given.
  std::vector<std::string> GetAll(const std::string& name) const;
  std::string Required(const std::string& name) const;
  std::uint64_t U64(const std::string& name, std::uint64_t fallback) const;
  std::uint32_t U32(const std::string& name, std::uint32_t fallback) const;
  // Accepts negative values (two's complement), as torch seeds do.
  std::uint64_t Seed(const std::string& name, bool allow_negative) const;
  bool Bool(const std::string& name) const { return Has(name); }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> repeated_values_;
  std::vector<std::string> positional_;
};

// Parses an unsigned decimal integer; UsageError naming `what` otherwise.
std::uint64_t ParseUnsigned(const std::string& text, const std::string& what);

}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_FLAGS_H_
