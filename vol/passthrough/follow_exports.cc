// The plugin's entry points for the Python follower (python/prescient), next to
// HDF5's two in plugin_entry.cc. The follower finds the plugin among the
// process's mapped libraries and calls these through ctypes around each
// `dataset[index]` a DataLoader worker runs (vol/follow/read_recorder.h).
#include "vol/follow/read_recorder.h"

extern "C" {

// Starts recording this thread's dataset reads. Returns the interface version
// (1), so the follower can refuse a plugin it does not understand.
__attribute__((visibility("default"))) int prescient_follow_begin(void) {
  prescient::vol::ReadRecorder::Begin();
  return 1;
}

// Stops recording and returns the reads since prescient_follow_begin(), one
// line each (read_recorder.h); valid until this thread's next begin.
__attribute__((visibility("default"))) const char* prescient_follow_end(void) {
  // End() returns a view of a NUL-terminated std::string or a literal.
  return prescient::vol::ReadRecorder::End().data();
}

}  // extern "C"
