# Spack recipe for Prescient, kept in Prescient's repository (spack/README.md says how to use it).

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class Prescient(CMakePackage):
    """An HDF5 VOL connector for deep-learning data loading: a node-shared cache in shared
    memory, prefetch and eviction driven by the job's access schedule, coalesced reads.

    Unmodified h5py/HDF5 jobs use it through two environment variables. `spack load prescient`
    sets HDF5_PLUGIN_PATH (and PYTHONPATH for prescient_sampler); a job then opts in with

        export HDF5_VOL_CONNECTOR=prescient

    The job's h5py must use this package's HDF5 (py-h5py from the same Spack environment).
    """

    # No release archive yet: build from a checkout with `spack develop` (spack/README.md).
    version("main")

    variant("mpi", default=False, description="Build against parallel HDF5 (h5py's driver='mpio')")
    variant("libdeflate", default=True, description="Inflate gzip chunks with libdeflate (zlib otherwise)")
    variant("codecs", default=True,
            description="Decode LZ4, Zstandard, Blosc, Blosc2 and bzip2 chunks without HDF5 (else HDF5 does)")
    variant("python", default=True, description="Install prescient_sampler and a matching h5py")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.25:", type="build")

    # HDF5 1.14 and 2.x implement the VOL API the connector is written against; the plugin is
    # loaded by HDF5, so it needs the shared library.
    depends_on("hdf5@1.14:2 +shared")
    depends_on("hdf5 +mpi", when="+mpi")
    depends_on("hdf5 ~mpi", when="~mpi")
    depends_on("mpi", when="+mpi")
    depends_on("boost@1.74:")  # header-only Boost.Interprocess
    depends_on("zlib-api")
    depends_on("libdeflate", when="+libdeflate")
    depends_on("pkgconfig", type="build", when="+codecs")
    depends_on("lz4", when="+codecs")
    depends_on("zstd", when="+codecs")
    depends_on("c-blosc", when="+codecs")
    depends_on("c-blosc2", when="+codecs")
    depends_on("bzip2", when="+codecs")
    depends_on("googletest", type="test")

    # h5py linked against the same HDF5 (one HDF5 library per process).
    depends_on("python@3.9:", when="+python", type=("build", "run"))
    depends_on("py-h5py", when="+python", type="run")
    depends_on("py-h5py +mpi", when="+python +mpi", type="run")
    depends_on("py-h5py ~mpi", when="+python ~mpi", type="run")
    depends_on("py-numpy", when="+python", type="run")

    python_dir = join_path("lib", "prescient", "python")

    def cmake_args(self):
        return [
            self.define("HDF5_ROOT", self.spec["hdf5"].prefix),
            self.define("PRESCIENT_BUILD_TESTS", self.run_tests),
            self.define_from_variant("PRESCIENT_USE_LIBDEFLATE", "libdeflate"),
            *(self.define_from_variant(f"PRESCIENT_USE_{name}", "codecs")
              for name in ("LZ4", "ZSTD", "BLOSC", "BLOSC2", "BZIP2")),
            self.define("PRESCIENT_INSTALL_PYTHONDIR", self.python_dir),
        ]

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        # The plugin directory, not HDF5_VOL_CONNECTOR: every HDF5 program would otherwise run
        # through the connector as soon as the package is loaded.
        env.prepend_path("HDF5_PLUGIN_PATH", join_path(self.prefix, "lib", "prescient", "plugins"))
        if self.spec.satisfies("+python"):
            env.prepend_path("PYTHONPATH", join_path(self.prefix, self.python_dir))

    def check(self):
        ctest = Executable(join_path(self.spec["cmake"].prefix.bin, "ctest"))
        with working_dir(self.build_directory):
            ctest("--output-on-failure")
