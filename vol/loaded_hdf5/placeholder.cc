// An empty library whose long name the unbound connector records as its libhdf5 dependency
// (DT_NEEDED); bind.cc replaces that name with the path of the process's libhdf5 at load time.
namespace prescient_placeholder {}
