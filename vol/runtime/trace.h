// Callback tracing for PRESCIENT_LOG=debug: one line per VOL callback.
#ifndef PRESCIENT_VOL_RUNTIME_TRACE_H_
#define PRESCIENT_VOL_RUNTIME_TRACE_H_

#include <atomic>
#include <string_view>

namespace prescient::vol {

// Set once options are known; read on every callback, so it is a plain flag.
extern std::atomic<bool> g_trace_callbacks;

void TraceSlow(std::string_view callback);

inline void Trace(std::string_view callback) {
  if (g_trace_callbacks.load(std::memory_order_relaxed)) TraceSlow(callback);
}

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_TRACE_H_
