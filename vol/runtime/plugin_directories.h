// HDF5's own plugin directories, kept searched when HDF5_PLUGIN_PATH names
// the connector's.
//
// HDF5_PLUGIN_PATH, which a job sets to load the connector, replaces the
// directory HDF5 was built to search (H5_DEFAULT_PLUGINDIR, e.g. Debian's
// /usr/lib/x86_64-linux-gnu/hdf5/serial/plugins) rather than adding to it.
// The filter plugins installed there (LZ4, Blosc, bzip2, ...) then vanish
// from the job, and a dataset that reads natively fails once Prescient is
// turned on. This appends that directory to the search path again, as the
// last one, so that filters are found as they are without the connector.
//
// Only when the running libhdf5 is the one the connector was built against:
// its file must lie in the directory tree the default plugin directory is in
// (a pip wheel's libhdf5, loaded through vol/loaded_hdf5, has a default of
// its own, and the system's plugins link the system's libhdf5).
#ifndef PRESCIENT_VOL_RUNTIME_PLUGIN_DIRECTORIES_H_
#define PRESCIENT_VOL_RUNTIME_PLUGIN_DIRECTORIES_H_

namespace prescient::vol {

// Once per process, at the first file the connector opens or creates (HDF5
// is initialised by then). Caller's thread, inside an HDF5 callback.
void KeepHdf5DefaultPluginDirectories();

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_PLUGIN_DIRECTORIES_H_
