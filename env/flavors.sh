# The project environment's flavors: which Debian root a command runs in.
# Sourced by env/setup and env/run (not executable on its own).
#
#   PRESCIENT_ENV_FLAVOR   unset or "default": HDF5 1.14 (serial, thread-safe) + h5py, Debian trixie
#                          "parallel": HDF5 1.14 built with MPI (OpenMPI) + h5py with MPI, Debian trixie
#                          "hdf5-2":   HDF5 2.x (serial) + h5py linked to it, Debian sid
#   PRESCIENT_ENV_DIR      directory that holds the roots (default /var/lib/prescient)
#   PRESCIENT_ENV_ROOT     the root itself, overriding PRESCIENT_ENV_DIR (for the chosen flavor)
#
# A flavor is data, not a second script: a root directory, a suite, a package list and what
# the finished root must report (HDF5 major.minor and whether h5py has MPI). env/setup builds
# every flavor with the same steps.
#
# Sets: env_flavor env_root env_suite env_packages_file env_ignore_valid_until env_expect_hdf5
#       env_expect_mpi env_h5py_module
env_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
env_flavor="${PRESCIENT_ENV_FLAVOR:-default}"
env_dir="${PRESCIENT_ENV_DIR:-/var/lib/prescient}"
env_ignore_valid_until=0
case "$env_flavor" in
  default)
    env_root_name=trixie-root
    env_suite=trixie
    env_packages_file="$env_here/packages.txt"
    env_expect_hdf5="1.14"
    env_expect_mpi=0
    env_h5py_module=h5py._debian_h5py_serial
    ;;
  parallel)
    env_root_name=parallel-root
    env_suite=trixie
    env_packages_file="$env_here/packages-parallel.txt"
    env_expect_hdf5="1.14"
    env_expect_mpi=1
    env_h5py_module=h5py._debian_h5py_mpi
    ;;
  hdf5-2)
    env_root_name=hdf5-2-root
    env_suite=sid
    env_packages_file="$env_here/packages-hdf5-2.txt"
    env_expect_hdf5="2"
    env_expect_mpi=0
    env_h5py_module=h5py._debian_h5py_serial
    # The archive serves sid's Release file past its Valid-Until date here.
    env_ignore_valid_until=1
    ;;
  *)
    echo "env: PRESCIENT_ENV_FLAVOR='$env_flavor' is not one of default, parallel, hdf5-2" >&2
    exit 2
    ;;
esac
env_root="${PRESCIENT_ENV_ROOT:-$env_dir/$env_root_name}"

# env_package_names FILE: the package names of a package list. A line 'include OTHER' takes
# OTHER's packages (a file beside FILE); '-NAME' drops a package an included file brought.
env_package_names() {
  local file="$1" line
  local -a included=() own=() drop=()
  while IFS= read -r line; do
    line="${line%%#*}"
    line="$(echo "$line" | xargs)"
    [[ -z "$line" ]] && continue
    case "$line" in
      include\ *) included+=($(env_package_names "$(dirname "$file")/${line#include }")) ;;
      -*) drop+=("${line#-}") ;;
      *) own+=("$line") ;;
    esac
  done <"$file"
  # The file's own packages first: apt then satisfies an included package's alternatives
  # with them (python3-h5py's "serial | mpi" with python3-h5py-mpi).
  local name d keep
  for name in "${own[@]}"; do echo "$name"; done
  for name in "${included[@]}"; do
    keep=1
    for d in "${drop[@]}"; do [[ "$name" == "$d" ]] && keep=0; done
    [[ $keep == 1 ]] && echo "$name"
  done
  return 0
}

# env_package_files FILE: FILE and every file it includes (they all decide the stamp).
env_package_files() {
  local file="$1" line
  echo "$file"
  while IFS= read -r line; do
    line="${line%%#*}"
    line="$(echo "$line" | xargs)"
    [[ "$line" == include\ * ]] && env_package_files "$(dirname "$file")/${line#include }"
  done <"$file"
}
