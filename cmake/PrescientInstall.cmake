# `cmake --install` for Prescient: the plugins, prescient-schedule, the Python packages, the
# demo's read check, and a CMake package (find_package(prescient)) that says where they are.
#
#   <prefix>/lib/prescient/plugins/libprescient_vol.so         HDF5_PLUGIN_PATH for jobs whose
#                                                               h5py links the same libhdf5
#   <prefix>/lib/prescient/plugins-wheel/...                   HDF5_PLUGIN_PATH for jobs whose
#                                                               h5py is a pip wheel (serial HDF5)
#   <prefix>/bin/prescient-schedule
#   <prefix>/lib/pythonX.Y/site-packages/prescient_sampler/    PYTHONPATH (one install rule per
#                                                               Python package directory)
#   <prefix>/share/prescient/examples/demo.py                  the demo's read check
#   <prefix>/lib/cmake/prescient/                              find_package(prescient)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PRESCIENT_INSTALL_PLUGINDIR "${CMAKE_INSTALL_LIBDIR}/prescient/plugins" CACHE STRING
    "Where the plugin goes (relative to the prefix): the jobs' HDF5_PLUGIN_PATH")
set(PRESCIENT_INSTALL_WHEEL_PLUGINDIR "${CMAKE_INSTALL_LIBDIR}/prescient/plugins-wheel" CACHE STRING
    "Where the plugin for pip-wheel h5py processes goes (relative to the prefix)")
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_FOUND)
  set(_prescient_pythondir
      "${CMAKE_INSTALL_LIBDIR}/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/site-packages")
else()
  set(_prescient_pythondir "${CMAKE_INSTALL_LIBDIR}/prescient/python")
endif()
set(PRESCIENT_INSTALL_PYTHONDIR "${_prescient_pythondir}" CACHE STRING
    "Where the Python packages go (relative to the prefix): add it to PYTHONPATH")
set(PRESCIENT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/prescient")

# One rule per Python package directory; the python/ package joins this list when it exists.
function(prescient_install_python_package directory)
  install(DIRECTORY "${directory}" DESTINATION "${PRESCIENT_INSTALL_PYTHONDIR}" COMPONENT python
          PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
endfunction()
prescient_install_python_package("${PROJECT_SOURCE_DIR}/scheduler/python/prescient_sampler")
if(EXISTS "${PROJECT_SOURCE_DIR}/python/prescient/__init__.py")
  prescient_install_python_package("${PROJECT_SOURCE_DIR}/python/prescient")
endif()

set(PRESCIENT_HAVE_PLUGIN OFF)
set(PRESCIENT_HAVE_WHEEL_PLUGIN OFF)
if(TARGET prescient_vol)
  set(PRESCIENT_HAVE_PLUGIN ON)
  # The installed plugin finds a libhdf5 outside the system's directories (Spack, HDF5_ROOT).
  set_target_properties(prescient_vol PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS prescient_vol EXPORT prescientTargets
          LIBRARY DESTINATION "${PRESCIENT_INSTALL_PLUGINDIR}" COMPONENT plugin)
  # The segment keeper the plugin starts (cache/core/segment_keeper.h) sits beside it.
  install(TARGETS prescient-cache-keeper RUNTIME DESTINATION "${PRESCIENT_INSTALL_PLUGINDIR}"
          COMPONENT plugin)
endif()
if(TARGET prescient_vol_wheel)
  set(PRESCIENT_HAVE_WHEEL_PLUGIN ON)
  install(TARGETS prescient_vol_wheel
          LIBRARY DESTINATION "${PRESCIENT_INSTALL_WHEEL_PLUGINDIR}" COMPONENT plugin)
  install(TARGETS prescient_vol_unbound
          LIBRARY DESTINATION "${PRESCIENT_INSTALL_WHEEL_PLUGINDIR}/unbound" COMPONENT plugin)
  install(PROGRAMS "$<TARGET_FILE:prescient-cache-keeper>"
          DESTINATION "${PRESCIENT_INSTALL_WHEEL_PLUGINDIR}" COMPONENT plugin)
endif()
if(TARGET prescient-schedule)
  install(TARGETS prescient-schedule EXPORT prescientTargets
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT tools)
endif()
install(FILES "${PROJECT_SOURCE_DIR}/examples/demo.py"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/prescient/examples" COMPONENT examples)

install(EXPORT prescientTargets NAMESPACE prescient:: DESTINATION "${PRESCIENT_INSTALL_CMAKEDIR}"
        COMPONENT cmake)
configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/prescientConfig.cmake.in" "${PROJECT_BINARY_DIR}/prescientConfig.cmake"
  INSTALL_DESTINATION "${PRESCIENT_INSTALL_CMAKEDIR}"
  PATH_VARS PRESCIENT_INSTALL_PLUGINDIR PRESCIENT_INSTALL_WHEEL_PLUGINDIR PRESCIENT_INSTALL_PYTHONDIR
            CMAKE_INSTALL_DATADIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/prescientConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/prescientConfig.cmake"
              "${PROJECT_BINARY_DIR}/prescientConfigVersion.cmake"
        DESTINATION "${PRESCIENT_INSTALL_CMAKEDIR}" COMPONENT cmake)
