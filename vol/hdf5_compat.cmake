# Finds the HDF5 the connector is built against (>= 1.14: 1.14.x and 2.x, serial or
# parallel) and sets what vol/CMakeLists.txt uses, whatever the route:
#   HDF5_VERSION, HDF5_IS_PARALLEL,
#   HDF5_C_INCLUDE_DIRS, HDF5_C_LIBRARIES, HDF5_C_DEFINITIONS (MPI included for a parallel HDF5).
# The build-side twin of hdf5_compat.h: version differences of HDF5's CMake side live here.
#
# HDF5 2.x installs a CMake package (hdf5-config.cmake), and CMake 4's FindHDF5 cannot make its
# hdf5::hdf5 target when the compiler wrapper links a renamed library (Debian's -lhdf5_serial):
# a package file is taken first (its version file admits no "at least" request, so the version
# is checked after). Without one (Debian's 1.14 has none), FindHDF5 asks the h5cc/h5pcc
# wrapper. HDF5_ROOT points either route at a given installation.

find_package(HDF5 CONFIG QUIET NAMES hdf5)
if(HDF5_FOUND)
  if(TARGET hdf5::hdf5-shared)
    set(_prescient_hdf5_target hdf5::hdf5-shared)
  elseif(TARGET hdf5-shared)
    set(_prescient_hdf5_target hdf5-shared)
  else()
    message(FATAL_ERROR "HDF5 ${HDF5_VERSION} at ${HDF5_DIR} has no shared library target "
                        "(the connector is a plugin and needs the shared libhdf5)")
  endif()
  set(HDF5_IS_PARALLEL "${HDF5_PROVIDES_PARALLEL}")
  set(HDF5_C_LIBRARIES ${_prescient_hdf5_target})
  get_target_property(HDF5_C_INCLUDE_DIRS ${_prescient_hdf5_target} INTERFACE_INCLUDE_DIRECTORIES)
  set(HDF5_C_DEFINITIONS "")
  message(STATUS "Found HDF5 ${HDF5_VERSION} (CMake package ${HDF5_DIR}, parallel: ${HDF5_IS_PARALLEL})")
else()
  find_package(HDF5 1.14 REQUIRED COMPONENTS C)
endif()

if(HDF5_VERSION VERSION_LESS 1.14)
  message(FATAL_ERROR "Prescient needs HDF5 >= 1.14 (found ${HDF5_VERSION})")
endif()

# A parallel HDF5's public headers include mpi.h, and its wrapper (h5pcc) does not say where
# that is: the connector compiles against MPI too (it never calls MPI itself).
if(HDF5_IS_PARALLEL)
  find_package(MPI REQUIRED COMPONENTS C)
  list(APPEND HDF5_C_INCLUDE_DIRS ${MPI_C_INCLUDE_DIRS})
  list(APPEND HDF5_C_LIBRARIES MPI::MPI_C)
endif()

# What the connector's libraries link for HDF5. A target that sets PRESCIENT_HDF5_UNBOUND
# (the connector for pip wheels' processes, loaded_hdf5/) links no libhdf5: it binds to the
# one already loaded in the process.
add_library(prescient_hdf5_link INTERFACE)
target_link_libraries(prescient_hdf5_link INTERFACE
  "$<$<NOT:$<BOOL:$<TARGET_PROPERTY:PRESCIENT_HDF5_UNBOUND>>>:${HDF5_C_LIBRARIES}>")

# For the install tree's package file (cmake/PrescientInstall.cmake): the HDF5 the plugin needs.
set(PRESCIENT_HDF5_VERSION "${HDF5_VERSION}" CACHE INTERNAL "HDF5 version the connector is built against")
set(PRESCIENT_HDF5_IS_PARALLEL "${HDF5_IS_PARALLEL}" CACHE INTERNAL "whether that HDF5 is parallel")
