#include "vol/runtime/trace.h"

#include <unistd.h>

#include <cstdio>

namespace prescient::vol {

std::atomic<bool> g_trace_callbacks{false};

void TraceSlow(std::string_view callback) {
  std::fprintf(stderr, "prescient: debug: [%ld] %.*s\n", static_cast<long>(::getpid()),
               static_cast<int>(callback.size()), callback.data());
}

}  // namespace prescient::vol
