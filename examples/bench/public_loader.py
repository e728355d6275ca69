"""A public loader, unmodified, natively and through Prescient, side by side, every epoch cold.

    python3 examples/bench/public_loader.py deepcam --src DIR [--files 160] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py fourcastnet --src DIR [--years 4] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py pdebench --src DIR [--seeds 300] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py unet3d --src DIR [--volumes 8] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py fastmri --src DIR [--files 24] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py thewell --src DIR [--files 4] [--open-by-path] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py credit --src DIR [--years 2] [--compressed] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py mace --src DIR [--files 4] [--configs 500] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py h5torch --src DIR [--cells 60000] [--genes 20000] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py robomimic --src DIR [--demos 100] [--steps 120] [--rounds 2] [--out DIR]
    python3 examples/bench/public_loader.py salt --src DIR [--jets 250000] [--compression lz4] [--rounds 2] [--out DIR]

`deepcam`: MLPerf HPC's DeepCAM climate-segmentation loader (github.com/mlcommons/hpc,
deepcam/src/deepCam/data/cam_hdf5_dataset.py, class CamDataset), which the user fetches: --src
names the directory that holds `cam_hdf5_dataset.py` (inside the repository when run through
env/run, which shows the process nothing else: `git clone --depth 1
https://github.com/mlcommons/hpc build/public/hpc`, then --src
build/public/hpc/deepcam/src/deepCam/data). Nothing of it is copied here; this script
only writes files of its layout and drives it the way DeepCAM's `get_dataloaders` does: one
sample per file (`climate/data` (H, W, 16) float32 read as `data[..., channels]`, `climate/labels_0`
(H, W) int32), the file opened and closed per sample, DistributedSampler(shuffle=True,
drop_last=True) with set_epoch, DataLoader(batch 4, 2 workers, pin_memory=True), one loader for
the whole run. `--src stand-in` runs a loader of the same shape written here instead (the
harness's own test uses it; its numbers are not DeepCAM's).

`fourcastnet`: NVIDIA's FourCastNet weather model loader (github.com/NVlabs/FourCastNet,
utils/data_loader_multifiles.py, `get_data_loader`), --src the repository's root (`git clone
--depth 1 https://github.com/NVlabs/FourCastNet build/public/FourCastNet`). Files of its layout:
one per year, `fields` (steps, 21, H, W) float32, one time step a row; each sample reads
`fields[i:i+1, in_channels]` and `fields[i+1, out_channels]` with 20 of the 21 channels, the file
opened once per worker. Its configuration's defaults (AFNO: dt 1, no history, no crop, no roll,
z-score normalisation), DistributedSampler(shuffle=True) over one rank (a one-process gloo group),
batch 2, 2 workers. Its `img_utils` imports matplotlib and torchvision for plotting helpers the
loader never calls; where they are not installed, empty modules stand in for them.

`pdebench`: PDEBench's FNO loader for data of many initial conditions (github.com/pdebench/PDEBench,
pdebench/models/fno/utils.py, class FNODatasetMult), --src the repository's root (`git clone
--depth 1 https://github.com/pdebench/PDEBench build/public/PDEBench`). A file of its 2D
diffusion-reaction layout (`2D_diff-react_NA_NA.h5`): one group per seed, `data` (steps, side,
side, 2) float32 and `grid/x`, `grid/y`, `grid/t`; each sample opens the file, reads its seed's
`data` whole and its grid, and closes the file again. Its configuration for that data
(`config_diff-react.yaml`: batch 5, 2 workers, initial_step 10), `DataLoader(shuffle=True)` as its
`train.py` makes it. The published data is 1,000 seeds of 101 x 128 x 128 x 2 (13 MB a seed);
the default here is 300 seeds of 101 x 64 x 64 x 2 (3.3 MB, 1 GB in all).

`unet3d`: pytorch-3dunet's lazy patch loader (github.com/wolny/pytorch-3dunet,
pytorch3dunet/datasets/hdf5.py, class LazyHDF5Dataset), --src the repository's root (`git clone
--depth 1 https://github.com/wolny/pytorch-3dunet build/public/pytorch-3dunet`), built by its own
`get_train_loaders` (a ConcatDataset of a dataset per file, `DataLoader(shuffle=True)`, batch 1,
2 workers). Files of its layout: a volume each, `raw` (Z, Y, X) float32 and `label` (Z, Y, X)
uint16 (default 8 volumes of 96 x 384 x 384, 680 MB), plus one in DIR/val. Each sample opens its
file twice and reads a 3-D patch `raw[z:z+32, y:y+128, x:x+128]` and the same of `label`; patches
start every 16 / 64 / 64 voxels (the configuration of its tests, with half-patch strides as its
published ones), so every voxel is read about eight times an epoch. Its transforms import
scikit-image and imageio for steps this configuration (Standardize, ToTensor) does not take;
where they are not installed, stand-ins take their place.

`fastmri`: the fastMRI reconstruction benchmark's slice loader
(github.com/facebookresearch/fastMRI, fastmri/data/mri_data.py, class SliceDataset, with
fastmri/data/transforms.py's UnetDataTransform), --src the repository's root (`git clone --depth 1
https://github.com/facebookresearch/fastMRI build/public/fastMRI`). Files of its single-coil knee
layout, a volume each (in DIR/train, its singlecoil_train): `kspace` (slices, 640, 368) complex64
(1.9 MB a slice), `reconstruction_esc` (slices, 320, 320) float32, the ISMRMRD header (XML) it
parses for the sizes, and its attributes; each sample opens its file, reads one slice of `kspace`
and of `reconstruction_esc` and the attributes, and closes the file. The training loader as its
FastMriDataModule builds it for the U-Net example (batch 1, `shuffle=True`, its worker_init_fn's
seeding of the mask function, done here the same way since that module needs PyTorch Lightning; 2
workers where the example has 4, for this 2-core machine), with the example's transform (a random 4x mask
with 8% of the centre, inverse FFT, crop, normalisation). The default is 24 volumes of 35 slices
(1.9 GB). Its `mri_data` imports pandas for annotated datasets this loader does not use; where it
is not installed, a stand-in takes its place.

`thewell`: the Well's loader of physics simulations (github.com/PolymathicAI/the_well,
the_well/data/datamodule.py, class WellDataModule, and the_well/data/datasets.py, class
WellDataset), --src the repository's root (`git clone --depth 1
https://github.com/PolymathicAI/the_well build/public/the_well`). Files of the layout of its
`turbulent_radiative_layer_2D` (in DIR/turbulent_radiative_layer_2D/data/{train,valid,test}, and
its stats.yaml): trajectories of 101 steps of a 128 x 384 grid, `t0_fields/density` and
`t0_fields/pressure` (trajectories, steps, 128, 384) float32, `t1_fields/velocity` (..., 2), a
constant scalar, the grid and boundary masks (default 4 files of 2 trajectories, 640 MB). A
sample is a window of 5 steps of one trajectory (its benchmark's 4 input steps and 1 output
step), read as `field[trajectory, t:t+5]` from each field, so each step is read by five
windows an epoch. Every sample opens its file through fsspec (a block-cached Python file
object: h5py's `fileobj` driver, not HDF5's POSIX one) and closes it again. The training loader
as the module builds it (`shuffle=True`, `drop_last=True`, z-score normalisation from
stats.yaml), batch 16 where its configuration has 64, and 2 workers, for this machine. Its
package imports einops for augmentations this loader does not use; where it is not installed, a
stand-in takes its place. With --open-by-path, the same loader opens each file by its path
instead (h5py's File() in its datasets module is given the path of the file object fsspec
opened): what a loader of local files does, and what the connector can serve.

`credit`: NCAR's CREDIT platform for AI weather models (github.com/NCAR/miles-credit,
credit/datasets/gen_1/era5_singlestep.py, class ERA5_and_Forcing_SingleStep over
credit/data.py's ERA5_and_Forcing_Dataset), --src the repository's root. Yearly netCDF-4 files
of ERA5's layout, as xarray writes them (DIR/train/era5_YYYY.nc: U, V, T, Q over (time, level,
latitude, longitude) and SP, t2m over (time, latitude, longitude), float32, 6-hourly
datetime64 times; default 2 years of 96 steps, 8 levels, 181 x 360, 1.7 GB) and a static file
(DIR/static.nc). The dataset opens the files with `xr.open_dataset` (the netCDF4 engine: the
netCDF C library calls HDF5 itself, not through h5py) in the training process, and the forked
workers read through the inherited handles: a sample is one time step of every variable and
the next as its target (`history_len=1`, `forecast_len=0`), so each step is read twice an
epoch. Its example's DataLoader (batch 2, `shuffle=True`, `drop_last=True`), with 2 workers
where it has 4, and the harness's transform to tensors (CREDIT's own also normalises with
statistics files). With --compressed, each variable is stored as ERA5's netCDF-4 downloads
are: a chunk per time step, shuffled and deflated (the values kept to two decimals).

`mace`: MACE's HDF5 loader of atomistic configurations (github.com/ACEsuit/mace,
mace/data/hdf5_dataset.py, class HDF5Dataset, and its dataset_from_sharded_hdf5), --src the
repository's root (`git clone --depth 1 https://github.com/ACEsuit/mace build/public/mace`).
Files of the layout its `mace_prepare_data` writes (save_configurations_as_HDF5: DIR/train/
train_K.h5, one per preprocessing process): a group `config_batch_0` of groups `config_J`, one
per configuration, each holding some twenty small datasets: `atomic_numbers` (N,) and
`positions` (N, 3), `properties/energy` and `properties/forces` (N, 3), `properties/stress`
(6,), `cell` (3, 3), `pbc` (3,) bool, the scalars `weight` and `property_weights/*`, and the
variable-length strings `config_type` and "None" for each property the data lacks (virials,
dipole, charges), N from 8 to 64 atoms (default 4 files of 500 configurations, about 3 KB
of values each). A sample reads every one of them whole (`[()]`) through the file its worker
opened once. The training loader as its run_train builds it for sharded HDF5 (a ConcatDataset
of the files' datasets, DataLoader(batch 10, shuffle=True, drop_last=True) with its seeded
generator), 2 workers, and a collate that keeps the samples as a list where its own builds a
torch_geometric batch. The dataset's imports of the rest of MACE (AtomicData, which needs e3nn
and matscipy to build graphs, and Configuration, from a module that needs ASE) are given
stand-ins: a Configuration that keeps what it is given, and a from_config that turns it into
tensors, since building neighbour graphs is model work, not I/O.

`h5torch`: h5torch's dataset of a sparse matrix (github.com/gdewael/h5torch, h5torch/dataset.py,
class Dataset, and h5torch/file.py, class File), --src the repository's root (`git clone --depth 1
https://github.com/gdewael/h5torch build/public/h5torch`). A file of its layout for single-cell
counts (DIR/train/cells.h5), as its File.register writes a `csr` central object and an array
aligned to its rows: `central/indptr` (cells + 1) int64, `central/indices` int32 and
`central/data` float32 (a cell's nonzero genes and their counts, 50 to 4,000 a cell, a mean of
about 1,000), `0/celltype` (cells) int64, and the attributes its reader checks (shape, mode,
dtypes, filled_to, load_sparse). Default 60,000 cells of 20,000 genes (480 MB of nonzeros). A
sample reads `indptr[i:i+2]`, then the runs `indices[a:b]` and `data[a:b]`, and `celltype[i]`,
opening each dataset by name and reading the objects' attributes on the way, and fills a dense
row of 20,000 float32. The DataLoader of its README (`shuffle=True`), batch 32 and 2 workers,
which inherit the file the dataset opened in the training process; their start method is fork
(the dataset holds an h5py File, which a forkserver or spawn, Python 3.14's default, could not
pickle). Its modules import scipy for writing sparse matrices, which reading never calls; where
scipy is not installed, a stand-in takes its place.

`robomimic`: robomimic's `SequenceDataset` (github.com/ARISE-Initiative/robomimic,
robomimic/utils/dataset.py), the loader of robot-learning demonstrations that LIBERO, MimicGen and
RoboCasa train with too; --src the repository's root (`git clone --depth 1
https://github.com/ARISE-Initiative/robomimic build/public/robomimic`). A file of its layout
(DIR/train/demos.hdf5, as robosuite's image datasets keep it): a group per demonstration,
`data/demo_<k>` with its `num_samples` attribute, `actions` (T, 7), `rewards`, `dones`, `states`
(T, 32), and in `obs` and `next_obs` two camera images (T, 84, 84, 3) uint8 and three low-dimensional
observations. Default 100 demonstrations of 120 steps (1 GB). The dataset as its `dataset_factory`
builds it for an image agent (bc-rnn): sequences of 10 steps (`seq_length=10`, one sequence per
step, padded at a demonstration's end), the images read from the file and the low-dimensional keys
held in memory (`hdf5_cache_mode="low_dim"`, what its image configs use), no `next_obs`, and the
file opened with `swmr=True`, its default (`hdf5_use_swmr`). A sample reads `obs/<camera>[t:t+10]`
of both cameras, opening each by its path. Its `train.py`'s DataLoader: batch 100, `shuffle=True`,
`drop_last=True`, 2 workers; the action statistics taken in the training process first, as
`train.py` does. Its logging imports termcolor, which gets a stand-in where it is not installed.

`salt`: ATLAS's flavour-tagging trainer salt (github.com/umami-hep/salt, salt/data/datasets.py,
class SaltDataset, and salt/data/samplers.py, class RandomBatchSampler), --src the repository's
root (`git clone --depth 1 https://github.com/umami-hep/salt build/public/salt`). A file of the
layout it trains on (umami-preprocessing's output, DIR/train/pp_output_train.h5, written as
atlas-ftag-tools' H5Writer writes it): `jets` (jets,) and `tracks` (jets, 40) of compound rows
(the jet and track variables of salt's own test files, float32 and small integers, a `valid` flag
on the tracks; about 12 real tracks a jet, the rest zero), chunks of 100 jets, LZ4 (filter 32004,
the writer's default; `--compression`). Default 250,000 jets (about 870 MiB of rows). The dataset
as GN2's configuration (salt/configs/GN2/GN2.yaml) takes it: two jet variables and 19 track
variables, the flavour label and two track labels, so every read is of some of the stored
members: `read_direct` of a batch of rows into a structured array of those fields. Its data
module's training loader: `DataLoader(batch_size=None, sampler=RandomBatchSampler(batch 4000,
shuffle=True, drop_last=True))` (batches of contiguous jets in a `torch.randperm` order, each a
slice `np.s_[start:stop]` the dataset reads whole), persistent workers, 2 of them. Its modules
import atlas-ftag-tools for cuts, a labeller and virtual files, and PyTorch Lightning for its
data module; where they are not installed, stand-ins take their place (this configuration
calls none of them).

Variants: native (no connector variables at all), `lru` (the connector, no schedule),
`lru-inline` (the same with PRESCIENT_ADMIT_BEHIND=0: each reader places its own misses in the
cache), `lru-always` (with PRESCIENT_ADMIT_BEHIND_WHEN=always: misses handed to the admission
thread even when no CPU is spare for it), `lru-copy` (with PRESCIENT_ADMIT_READ_AGAIN=0: the admission thread takes a copy of a
miss's rows from the reader instead of reading them again) and `follow` (PRESCIENT_FOLLOW=1: the
sampler followed at run time), and `hdf5-pass-through` (not Prescient: HDF5's own pass-through
connector over the native one, the floor of what any stacked connector costs); any of them but
native and `hdf5-pass-through` followed by `:PRESCIENT_X=V[,PRESCIENT_Y=W]`
runs it with those settings too (`lru:PRESCIENT_BUSY_UNKEPT_RUN=256KiB`), side by side with the rest. `--workers N` sets the
DataLoader's workers (2, the loaders' own choice above; 0 reads in the training process). Each round runs them in turn, each a
fresh process with a fresh node cache (a new PRESCIENT_NODE_ID); before every epoch every file
is written back and dropped from the page cache (POSIX_FADV_DONTNEED), so "cold" means read from
the device. Every epoch's batches are digested (a CRC-32 of every byte in delivery order) and
must equal native's. Reported: each epoch's seconds per variant and round, and the median over rounds
of native / variant, the suites' measure (>= 1.0 is as fast as native or faster).
"""

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHANNELS = list(range(16))
VARIANTS = ("native", "lru", "lru-inline", "lru-always", "lru-copy", "follow", "hdf5-pass-through")


def fresh_train_dir(directory, layout):
    """DIR/train emptied for new files, or None when DIR/layout.json says it holds `layout`
    already (written last, after the files)."""
    done = os.path.join(directory, "layout.json")
    if os.path.exists(done):
        with open(done) as f:
            if json.load(f) == layout:
                return None
        os.unlink(done)
    train = os.path.join(directory, "train")
    os.makedirs(train, exist_ok=True)
    for name in os.listdir(train):
        os.unlink(os.path.join(train, name))
    return train


def files_of_layout(directory, layout, write, log=print):
    """DIR/train holding the files of `layout`, written by `write(train, rng)` (which returns
    what it wrote, for the log), unless DIR/layout.json says they are there already."""
    import numpy as np

    train = fresh_train_dir(directory, layout)
    if train is None:
        return os.path.join(directory, "train")
    t = time.monotonic()
    what = write(train, np.random.default_rng(0))
    with open(os.path.join(directory, "layout.json"), "w") as f:
        json.dump(layout, f)
    log(f"public-loader: {what} in {time.monotonic() - t:.0f} s")
    return train


def make_files(directory, files, height, width, log=print):
    """DeepCAM's layout: DIR/train/*.h5 and DIR/stats.h5 (reused when present)."""
    import h5py
    import numpy as np

    def write(train, rng):
        for i in range(files):
            with h5py.File(os.path.join(train, f"data-{i:05d}.h5"), "w") as f:
                group = f.create_group("climate")
                group["data"] = rng.standard_normal((height, width, len(CHANNELS)), dtype=np.float32)
                group["labels_0"] = rng.integers(0, 3, (height, width), dtype=np.int32)
        with h5py.File(os.path.join(directory, "stats.h5"), "w") as f:
            group = f.create_group("climate")
            group["minval"] = np.full(len(CHANNELS), -5, np.float32)
            group["maxval"] = np.full(len(CHANNELS), 5, np.float32)
        return f"{files} files of {height}x{width}x16 float32"

    return files_of_layout(directory, {"files": files, "height": height, "width": width}, write,
                           log)


class StandInDataset:
    """DeepCAM's shape (per-sample open, `data[..., channels]`, labels, normalisation,
    transpose to CHW), written here: for the harness's tests, where DeepCAM is not fetched."""

    def __init__(self, source, statsfile, channels, **_):
        import h5py
        import numpy as np

        self.files = sorted(os.path.join(source, x) for x in os.listdir(source) if x.endswith(".h5"))
        self.channels = channels
        with h5py.File(statsfile, "r") as f:
            shift = f["climate"]["minval"][channels]
            scale = 1.0 / (f["climate"]["maxval"][channels] - shift)
        self.shift = np.reshape(shift, (1, 1, -1)).astype(np.float32)
        self.scale = np.reshape(scale, (1, 1, -1)).astype(np.float32)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        import h5py
        import numpy as np

        with h5py.File(self.files[idx], "r") as f:
            data = f["climate/data"][..., self.channels]
            label = f["climate/labels_0"][...].astype(np.int64)
        data = np.transpose(self.scale * (data - self.shift), (2, 0, 1))
        return data, label, self.files[idx]


def _public_source(src, module_file, repository):
    """Puts a fetched repository's root on sys.path, as its own scripts run from it; exits
    with what --src should be when it lacks the loader's module."""
    if not os.path.isfile(os.path.join(src, module_file)):
        raise SystemExit(f"public-loader: no {module_file} in {src} (--src: the root of "
                         f"github.com/{repository})")
    sys.path.insert(0, src)


def dataset_class(src):
    if src == "stand-in":
        return StandInDataset
    path = os.path.join(src, "cam_hdf5_dataset.py")
    if not os.path.isfile(path):
        raise SystemExit(f"public-loader: no cam_hdf5_dataset.py in {src} (--src: DeepCAM's "
                         "deepcam/src/deepCam/data directory of github.com/mlcommons/hpc)")
    # As DeepCAM's train.py does (`from data import ...`, its source directory on sys.path): a
    # class of a module loaded from a file path cannot be pickled to workers started by a
    # forkserver or spawn (Python 3.14's default), which import it by name.
    parent = os.path.dirname(os.path.abspath(src))
    if parent not in sys.path:
        sys.path.insert(0, parent)
    module = importlib.import_module(os.path.basename(os.path.abspath(src)) + ".cam_hdf5_dataset")
    return module.CamDataset


FCN_CHANNELS = 21


def make_fourcastnet_files(directory, years, steps, height, width, log=print):
    """FourCastNet's layout: DIR/train/<year>.h5 with `fields`, and the normalisation files."""
    import h5py
    import numpy as np

    def write(train, rng):
        for year in range(years):
            with h5py.File(os.path.join(train, f"{2000 + year}.h5"), "w") as f:
                f["fields"] = rng.standard_normal((steps, FCN_CHANNELS, height, width),
                                                  dtype=np.float32)
        shape = (1, FCN_CHANNELS, 1, 1)
        np.save(os.path.join(directory, "global_means.npy"), np.full(shape, 0.1, np.float32))
        np.save(os.path.join(directory, "global_stds.npy"), np.full(shape, 1.5, np.float32))
        return f"{years} files of {steps} x {FCN_CHANNELS} x {height} x {width} float32"

    layout = {"years": years, "steps": steps, "height": height, "width": width}
    return files_of_layout(directory, layout, write, log)


class _Params(dict):
    """FourCastNet's YParams as its loader uses it: attributes, and `in`."""

    __getattr__ = dict.__getitem__


def _stand_in_modules(names):
    """Empty modules for imports a loader's package makes and its data path never calls;
    `names` maps a module to the functions it must seem to have (which raise if called)."""
    import types

    def absent(*_, **__):
        raise RuntimeError("public-loader: a stand-in for a module that is not installed")

    for name, functions in names.items():
        try:
            importlib.import_module(name)
            continue
        except ImportError:
            pass
        module = sys.modules.setdefault(name, types.ModuleType(name))
        for function in functions:
            setattr(module, function, absent)
        parent, _, child = name.rpartition(".")
        if parent:
            if parent not in sys.modules:
                _stand_in_modules({parent: []})
            setattr(sys.modules[parent], child, module)


def fourcastnet_loader(src, directory, workers):
    import torch.distributed as dist

    _stand_in_modules({name: [] for name in (
        "matplotlib", "matplotlib.pyplot", "torchvision", "torchvision.transforms",
        "torchvision.transforms.functional")})
    _public_source(src, "utils/data_loader_multifiles.py", "NVlabs/FourCastNet")
    from utils.data_loader_multifiles import get_data_loader

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="file://" + os.path.join(
            directory, f"group-{os.getpid()}"), rank=0, world_size=1)
    channels = list(range(20))
    params = _Params(dt=1, n_history=0, in_channels=channels, out_channels=channels,
                     crop_size_x=None, crop_size_y=None, roll=False, two_step_training=False,
                     orography=False, add_noise=False, normalize=True, normalization="zscore",
                     add_grid=False, batch_size=2, num_data_workers=workers,
                     global_means_path=os.path.join(directory, "global_means.npy"),
                     global_stds_path=os.path.join(directory, "global_stds.npy"))
    train = os.path.join(directory, "train")
    loader, _, sampler = get_data_loader(params, train, True, train=True)
    return loader, sampler, train


PDE_NAME = "2D_diff-react_NA_NA"


def make_pdebench_files(directory, seeds, steps, side, log=print):
    """PDEBench's layout for data of many seeds: DIR/train/2D_diff-react_NA_NA.h5."""
    import h5py
    import numpy as np

    def write(train, rng):
        with h5py.File(os.path.join(train, PDE_NAME + ".h5"), "w") as f:
            axis = np.linspace(-1, 1, side, dtype=np.float32)
            for seed in range(seeds):
                group = f.create_group(f"{seed:04d}")
                group["data"] = rng.standard_normal((steps, side, side, 2), dtype=np.float32)
                grid = group.create_group("grid")
                grid["x"], grid["y"] = axis, axis
                grid["t"] = np.linspace(0, 5, steps, dtype=np.float32)
        return f"{seeds} seeds of {steps} x {side} x {side} x 2 float32"

    return files_of_layout(directory, {"seeds": seeds, "steps": steps, "side": side}, write, log)


class _NoEpochs:
    """The sampler handle of a loader whose DataLoader shuffles by itself (RandomSampler)."""

    def set_epoch(self, epoch):
        pass


def pdebench_loader(src, directory, workers):
    from torch.utils.data import DataLoader

    _public_source(src, "pdebench/models/fno/utils.py", "pdebench/PDEBench")
    from pdebench.models.fno.utils import FNODatasetMult

    train = os.path.join(directory, "train")
    # As its train.py builds the training loader (FNODatasetMult's own 90% of the seeds).
    dataset = FNODatasetMult(PDE_NAME, initial_step=10, saved_folder=train + os.sep)
    loader = DataLoader(dataset, batch_size=5, num_workers=workers, shuffle=True)
    return loader, _NoEpochs(), train


def deepcam_loader(src, directory, workers):
    from torch.utils.data import DataLoader, DistributedSampler

    train = os.path.join(directory, "train")
    dataset = dataset_class(src)(train, os.path.join(directory, "stats.h5"), CHANNELS,
                                 allow_uneven_distribution=False, shuffle=True, preprocess=True,
                                 comm_size=1, comm_rank=0)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, drop_last=True)
    loader = DataLoader(dataset, 4, num_workers=workers, sampler=sampler, pin_memory=True,
                        drop_last=True)
    return loader, sampler, train


def make_unet3d_files(directory, volumes, depth, side, log=print):
    """pytorch-3dunet's layout: DIR/train/volume-*.h5 of `raw` (Z, Y, X) float32 and `label`
    (Z, Y, X) uint16, and one more volume in DIR/val (its loaders insist on validation files)."""
    import h5py
    import numpy as np

    def write(train, rng):
        val = os.path.join(directory, "val")
        os.makedirs(val, exist_ok=True)
        for i in range(volumes + 1):
            where = train if i < volumes else val
            with h5py.File(os.path.join(where, f"volume-{i:03d}.h5"), "w") as f:
                f["raw"] = rng.standard_normal((depth, side, side), dtype=np.float32)
                f["label"] = rng.integers(0, 8, (depth, side, side), dtype=np.uint16)
        return f"{volumes} volumes of {depth} x {side} x {side} float32 and uint16"

    return files_of_layout(directory, {"volumes": volumes, "depth": depth, "side": side}, write,
                           log)


def unet3d_loader(src, directory, workers):
    _public_source(src, "pytorch3dunet/datasets/hdf5.py", "wolny/pytorch-3dunet")
    # Imported by its transforms and utilities for augmentations and plots this configuration
    # does not use.
    _stand_in_modules({"skimage": [], "skimage.color": ["label2rgb"], "skimage.exposure": [],
                       "skimage.measure": [], "skimage.filters": ["gaussian"],
                       "skimage.segmentation": ["find_boundaries"], "imageio": ["imread"]})
    from pytorch3dunet.datasets.utils import get_train_loaders

    train = os.path.join(directory, "train")
    slices = {"name": "SliceBuilder", "patch_shape": [32, 128, 128], "stride_shape": [16, 64, 64]}
    transformer = {"raw": [{"name": "Standardize"}, {"name": "ToTensor", "expand_dims": True}],
                   "label": [{"name": "ToTensor", "expand_dims": False, "dtype": "int64"}]}
    config = {"device": "cpu", "loaders": {
        "dataset": "LazyHDF5Dataset", "batch_size": 1, "num_workers": workers,
        "raw_internal_path": "raw", "label_internal_path": "label",
        "train": {"file_paths": [train], "slice_builder": slices, "transformer": transformer},
        "val": {"file_paths": [os.path.join(directory, "val")], "slice_builder": slices,
                "transformer": transformer}}}
    return get_train_loaders(config)["train"], _NoEpochs(), train


FASTMRI_HEADER = """<?xml version="1.0" encoding="utf-8"?>
<ismrmrdHeader xmlns="http://www.ismrm.org/ISMRMRD">
 <encoding>
  <encodedSpace><matrixSize><x>{height}</x><y>{width}</y><z>1</z></matrixSize></encodedSpace>
  <reconSpace><matrixSize><x>{recon}</x><y>{recon}</y><z>1</z></matrixSize></reconSpace>
  <encodingLimits>
   <kspace_encoding_step_1><minimum>0</minimum><maximum>{last}</maximum><center>{center}</center>
   </kspace_encoding_step_1>
  </encodingLimits>
 </encoding>
</ismrmrdHeader>
"""


def make_fastmri_files(directory, files, slices, height, width, log=print):
    """fastMRI's single-coil knee layout: DIR/train/file*.h5, a volume each (fastMRI's
    singlecoil_train directory)."""
    import h5py
    import numpy as np

    recon = 320

    def write(train, rng):
        header = FASTMRI_HEADER.format(height=height, width=width, recon=recon, last=width - 1,
                                       center=width // 2).encode()
        for i in range(files):
            with h5py.File(os.path.join(train, f"file{1000000 + i}.h5"), "w") as f:
                shape = (slices, height, width)
                kspace = rng.standard_normal(shape, dtype=np.float32) \
                    + 1j * rng.standard_normal(shape, dtype=np.float32)
                f["kspace"] = kspace.astype(np.complex64)
                target = rng.random((slices, recon, recon), dtype=np.float32)
                f["reconstruction_esc"] = target
                f["ismrmrd_header"] = header
                f.attrs.update({"acquisition": "CORPD_FBK", "max": float(target.max()),
                                "norm": float(np.linalg.norm(target)),
                                "patient_id": f"{i:064x}"})
        return f"{files} volumes of {slices} slices of {height} x {width} complex64"

    return files_of_layout(directory, {"files": files, "slices": slices, "height": height,
                                       "width": width}, write, log)


def _fastmri_worker_init(worker_id):
    """fastMRI's worker_init_fn (fastmri/pl_modules/data_module.py) for one process: the mask
    function's generator seeded with the worker's seed."""
    import torch

    info = torch.utils.data.get_worker_info()
    if info.dataset.transform.mask_func is not None:
        info.dataset.transform.mask_func.rng.seed(info.seed % (2**32 - 1))


def fastmri_loader(src, directory, workers):
    from torch.utils.data import DataLoader

    _public_source(src, "fastmri/data/mri_data.py", "facebookresearch/fastMRI")
    _stand_in_modules({"pandas": ["read_csv", "Series"]})
    from fastmri.data import SliceDataset
    from fastmri.data.subsample import create_mask_for_mask_type
    from fastmri.data.transforms import UnetDataTransform

    # As fastmri_examples/unet/train_unet_demo.py makes them: its default mask, training
    # transform and data module (without the module's dataset cache file, which it would write
    # into the working directory).
    mask = create_mask_for_mask_type("random", [0.08], [4])
    train = os.path.join(directory, "train")
    dataset = SliceDataset(root=train, challenge="singlecoil",
                           transform=UnetDataTransform("singlecoil", mask_func=mask,
                                                       use_seed=False),
                           use_dataset_cache=False)
    loader = DataLoader(dataset=dataset, batch_size=1, num_workers=workers,
                        worker_init_fn=_fastmri_worker_init, shuffle=True)
    return loader, _NoEpochs(), train


WELL_NAME = "turbulent_radiative_layer_2D"


def _write_well_file(path, trajectories, steps, height, width, rng):
    """One file of the Well's layout (its the_well/utils/dummy_data.py, at the sizes and with
    the fields of turbulent_radiative_layer_2D)."""
    import h5py
    import numpy as np

    with h5py.File(path, "w") as f:
        f.attrs.update({"dataset_name": WELL_NAME, "grid_type": "cartesian",
                        "n_spatial_dims": 2, "n_trajectories": trajectories,
                        "simulation_parameters": ["tcool"], "tcool": 0.1})
        bcs = f.create_group("boundary_conditions")
        for name, dim, kind, size in (("x_open", "x", "OPEN", height),
                                      ("y_periodic", "y", "PERIODIC", width)):
            bc = bcs.create_group(name)
            bc.attrs.update({"associated_dims": [dim], "associated_fields": [], "bc_type": kind,
                             "sample_varying": False, "time_varying": False})
            mask = np.zeros(size, bool)
            mask[0] = mask[-1] = True
            bc["mask"] = mask
        dims = f.create_group("dimensions")
        dims.attrs["spatial_dims"] = ["x", "y"]
        for name, size in (("time", steps), ("x", height), ("y", width)):
            dims[name] = np.linspace(0, 1, size, dtype=np.float32)
            dims[name].attrs["sample_varying"] = False
        scalars = f.create_group("scalars")
        scalars.attrs["field_names"] = ["tcool"]
        scalars["tcool"] = np.float32(0.1)
        scalars["tcool"].attrs.update({"sample_varying": False, "time_varying": False})
        for order, names, tail in ((0, ["density", "pressure"], ()), (1, ["velocity"], (2,)),
                                   (2, [], ())):
            group = f.create_group(f"t{order}_fields")
            group.attrs["field_names"] = names
            for name in names:
                group[name] = rng.standard_normal((trajectories, steps, height, width) + tail,
                                                  dtype=np.float32)
                group[name].attrs.update({"dim_varying": [True, True], "sample_varying": True,
                                          "time_varying": True})


def make_well_files(directory, files, trajectories, steps, height, width, log=print):
    """The Well's layout: DIR/<name>/data/train/*.hdf5, one file in valid and test each (its
    data module opens all three splits) and DIR/<name>/stats.yaml. The harness's DIR/train
    (the files made cold) is a link to the training split."""
    root = os.path.join(directory, WELL_NAME)

    def write(train, rng):
        os.makedirs(os.path.join(root, "data"), exist_ok=True)
        split = os.path.join(root, "data", "train")
        if os.path.lexists(split):
            os.unlink(split)
        os.symlink(os.path.relpath(train, os.path.dirname(split)), split)
        for i in range(files):
            _write_well_file(os.path.join(train, f"{WELL_NAME}_tcool_{i:04d}.hdf5"),
                             trajectories, steps, height, width, rng)
        for other in ("valid", "test"):
            os.makedirs(os.path.join(root, "data", other), exist_ok=True)
            _write_well_file(os.path.join(root, "data", other, f"{WELL_NAME}_{other}.hdf5"),
                             1, steps, height, width, rng)
        stats = {key: {"density": 0.5, "pressure": 0.5, "velocity": [0.0, 0.0]}
                 for key in ("mean", "mean_delta", "rms", "rms_delta")}
        stats["std"] = stats["std_delta"] = {"density": 1.0, "pressure": 1.0,
                                             "velocity": [1.0, 1.0]}
        with open(os.path.join(root, "stats.yaml"), "w") as f:
            json.dump(stats, f)  # JSON is YAML
        return (f"{files} files of {trajectories} trajectories of {steps} x {height} x {width} "
                "(3 fields, 4 channels) float32")

    return files_of_layout(directory, {"files": files, "trajectories": trajectories,
                                       "steps": steps, "height": height, "width": width},
                           write, log)


class _ByPath:
    """h5py as the Well's datasets module sees it, but for File(): a file object fsspec opened
    on a local file is closed again and its path opened instead (HDF5's default driver)."""

    def __init__(self, h5py):
        self._h5py = h5py

    def __getattr__(self, name):
        return getattr(self._h5py, name)

    def File(self, name, mode="r", **settings):
        path = getattr(name, "path", None)
        if path is None or not os.path.isfile(path):
            return self._h5py.File(name, mode, **settings)
        name.close()
        # Its driver_kwds (page buffer, chunk cache) are for the file object's driver, which in
        # h5py 3.13 ignores them: the POSIX driver takes none.
        settings.pop("driver_kwds", None)
        return self._h5py.File(path, mode, **settings)


def well_loader(src, directory, workers, by_path=False):
    _public_source(src, "the_well/data/datamodule.py", "PolymathicAI/the_well")
    _stand_in_modules({"einops": ["rearrange", "repeat", "reduce"]})
    from the_well.data import WellDataModule
    from the_well.data.normalization import ZScoreNormalization

    if by_path:
        import h5py
        import the_well.data.datasets as datasets

        datasets.h5 = _ByPath(h5py)

    # Its benchmark's configuration (the_well/benchmark/configs/config.yaml and the data
    # configuration of this dataset), but for the batch size.
    module = WellDataModule(well_base_path=directory, well_dataset_name=WELL_NAME, batch_size=16,
                            use_normalization=True, normalization_type=ZScoreNormalization,
                            n_steps_input=4, n_steps_output=1, min_dt_stride=1, max_dt_stride=1,
                            data_workers=workers)
    return module.train_dataloader(), _NoEpochs(), os.path.join(directory, "train")


CREDIT_UPPER = ["U", "V", "T", "Q"]
CREDIT_SURFACE = ["SP", "t2m"]
CREDIT_STATIC = ["Z_GDS4_SFC", "LSM"]


def make_credit_files(directory, years, steps, levels, height, width, compressed=False,
                      log=print):
    """CREDIT's layout: a netCDF-4 file a year (DIR/train/era5_YYYY.nc) holding the upper-air
    variables (time, level, latitude, longitude) and the surface ones (time, latitude,
    longitude) at 6-hourly datetime64 times, written by xarray as its to_netcdf writes them by
    default (contiguous), and DIR/static.nc. `compressed`: as ERA5's netCDF-4 downloads come,
    a chunk per time step, shuffled and deflated, the values kept to two decimals (which is
    what makes them compress)."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    def write(train, rng):
        lat = np.linspace(90, -90, height, dtype=np.float32)
        lon = np.linspace(0, 360, width, endpoint=False, dtype=np.float32)
        for year in range(2018, 2018 + years):
            time_axis = pd.date_range(f"{year}-01-01", periods=steps, freq="6h")
            coords = {"time": time_axis, "level": np.arange(levels, dtype=np.int64),
                      "latitude": lat, "longitude": lon}
            upper = {name: (("time", "level", "latitude", "longitude"),
                            rng.standard_normal((steps, levels, height, width), dtype=np.float32))
                     for name in CREDIT_UPPER}
            surface = {name: (("time", "latitude", "longitude"),
                              rng.standard_normal((steps, height, width), dtype=np.float32))
                       for name in CREDIT_SURFACE}
            encoding = {}
            if compressed:
                for name, (dims, values) in {**upper, **surface}.items():
                    np.round(values, 2, out=values)
                    encoding[name] = {"zlib": True, "complevel": 1, "shuffle": True,
                                      "chunksizes": (1,) + values.shape[1:]}
            xr.Dataset({**upper, **surface}, coords=coords).to_netcdf(
                os.path.join(train, f"era5_{year}.nc"), engine="netcdf4", encoding=encoding)
        static = {name: (("latitude", "longitude"), rng.random((height, width), dtype=np.float32))
                  for name in CREDIT_STATIC}
        xr.Dataset(static, coords={"latitude": lat, "longitude": lon}).to_netcdf(
            os.path.join(directory, "static.nc"), engine="netcdf4")
        return (f"{years} yearly files of {steps} steps x {levels} levels x {height} x {width} "
                f"({len(CREDIT_UPPER)} upper-air, {len(CREDIT_SURFACE)} surface variables) float32"
                + (", a deflated chunk per step" if compressed else ""))

    return files_of_layout(directory, {"years": years, "steps": steps, "levels": levels,
                                       "height": height, "width": width, "compressed": compressed},
                           write, log)


def _credit_to_tensors(sample):
    """The harness's transform of CREDIT's xarray samples (its own ToTensor also normalises
    with statistics files): each of the input and target states as the upper-air variables
    stacked along the levels, and the surface (and, for the input, static) variables."""
    import numpy as np
    import torch

    out = {}
    for key, name in (("historical_ERA5_images", "x"), ("target_ERA5_images", "y")):
        state = sample[key]
        out[name] = torch.from_numpy(np.concatenate([state[v].values for v in CREDIT_UPPER], 1))
        surface = [v for v in CREDIT_SURFACE + CREDIT_STATIC if v in state]
        out[f"{name}_surf"] = torch.from_numpy(np.stack([state[v].values for v in surface], 1))
    return out


def credit_loader(src, directory, workers):
    import glob

    import torch

    _public_source(src, "credit/datasets/gen_1/era5_singlestep.py", "NCAR/miles-credit")
    from credit.datasets.gen_1.era5_singlestep import ERA5_and_Forcing_SingleStep

    train = os.path.join(directory, "train")
    files = sorted(glob.glob(os.path.join(train, "era5_*.nc")))
    # As its training scripts build it for a single-step model: upper-air and surface
    # variables from the same yearly files, statics from their own file, one input state
    # and the next as the target.
    dataset = ERA5_and_Forcing_SingleStep(
        varname_upper_air=CREDIT_UPPER, varname_surface=CREDIT_SURFACE, varname_dyn_forcing=[],
        varname_forcing=[], varname_static=CREDIT_STATIC, varname_diagnostic=[],
        filenames=files, filename_surface=files,
        filename_static=os.path.join(directory, "static.nc"), history_len=1, forecast_len=0,
        skip_periods=1, one_shot=False, max_forecast_len=None, transform=_credit_to_tensors)
    # Its example's DataLoader (batch 2, shuffle, drop_last), with 2 workers where it has 4.
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, shuffle=True, drop_last=True,
                                         num_workers=workers)
    return loader, _NoEpochs(), train



def make_mace_files(directory, files, configs, log=print):
    """MACE's sharded HDF5 layout (save_configurations_as_HDF5): DIR/train/train_K.h5."""
    import h5py
    import numpy as np

    def write(train, rng):
        atoms = 0
        for k in range(files):
            with h5py.File(os.path.join(train, f"train_{k}.h5"), "w") as f:
                f.attrs["drop_last"] = False
                batch = f.create_group("config_batch_0")
                for j in range(configs):
                    n = int(rng.integers(8, 65))
                    atoms += n
                    g = batch.create_group(f"config_{j}")
                    g["atomic_numbers"] = rng.integers(1, 84, n)
                    g["positions"] = rng.standard_normal((n, 3)) * 5
                    properties = g.create_group("properties")
                    properties["energy"] = float(rng.standard_normal() * 100)
                    properties["forces"] = rng.standard_normal((n, 3))
                    properties["stress"] = rng.standard_normal(6)
                    for absent in ("virials", "dipole", "charges"):
                        properties[absent] = "None"  # write_value(None)
                    g["cell"] = np.diag(rng.uniform(8, 12, 3))
                    g["pbc"] = np.array([True, True, bool(j % 2)])
                    g["weight"] = 1.0
                    weights = g.create_group("property_weights")
                    for name, w in (("energy", 1.0), ("forces", 1.0), ("stress", 1.0),
                                    ("virials", 0.0), ("dipole", 0.0), ("charges", 0.0)):
                        weights[name] = w
                    g["config_type"] = "Default"
        return f"{files} files of {configs} configurations, {atoms} atoms in all"

    return files_of_layout(directory, {"files": files, "configs": configs}, write, log)


class _MaceConfiguration:
    """Stands in for mace.data.utils.Configuration (a dataclass): keeps what it is given."""

    def __init__(self, **fields):
        self.head = None
        self.__dict__.update(fields)


class _MaceTensors:
    """Stands in for MACE's AtomicData: from_config gives the configuration's values as
    tensors (AtomicData builds the neighbour graph from them, model work this harness leaves
    out), strings as they are."""

    @classmethod
    def from_config(cls, config, **_):
        import numpy as np
        import torch

        def tensor(value):
            return value if isinstance(value, str) else torch.as_tensor(np.asarray(value))

        return {"atomic_numbers": tensor(config.atomic_numbers),
                "positions": tensor(config.positions), "cell": tensor(config.cell),
                "pbc": tensor(config.pbc), "weight": tensor(config.weight),
                "config_type": config.config_type, "head": str(config.head),
                "properties": {k: tensor(v) if v is not None else "None"
                               for k, v in config.properties.items()},
                "property_weights": {k: tensor(v) for k, v in config.property_weights.items()}}


def _keep_as_list(samples):
    return samples


def mace_loader(src, directory, workers):
    import types

    import torch
    from torch.utils.data import ConcatDataset, DataLoader

    _public_source(src, "mace/data/hdf5_dataset.py", "ACEsuit/mace")
    # The module's imports of the rest of MACE, given stand-ins before it is loaded (the
    # packages' own __init__ files import e3nn and ASE).
    for name in ("mace", "mace.data", "mace.tools"):
        module = sys.modules.setdefault(name, types.ModuleType(name))
        module.__path__ = [os.path.join(src, *name.split("."))]
    stand_ins = {"mace.data.atomic_data": {"AtomicData": _MaceTensors},
                 "mace.data.utils": {"Configuration": _MaceConfiguration},
                 "mace.tools.utils": {"AtomicNumberTable": object}}
    for name, attributes in stand_ins.items():
        module = sys.modules.setdefault(name, types.ModuleType(name))
        module.__dict__.update(attributes)
    from mace.data.hdf5_dataset import dataset_from_sharded_hdf5

    train = os.path.join(directory, "train")
    # As run_train builds it for sharded HDF5 with one head: the shards' ConcatDataset in a
    # ConcatDataset of heads, shuffled with its seeded generator, drop_last.
    dataset = ConcatDataset([dataset_from_sharded_hdf5(train, z_table=None, r_max=5.0)])
    loader = DataLoader(dataset, batch_size=10, shuffle=True, drop_last=True,
                        num_workers=workers, collate_fn=_keep_as_list,
                        generator=torch.Generator().manual_seed(123))
    return loader, _NoEpochs(), train


H5TORCH_FILE = "cells.h5"


def make_h5torch_files(directory, cells, genes, log=print):
    """h5torch's layout of a csr central object with an aligned label (File.register's):
    DIR/train/cells.h5."""
    import h5py
    import numpy as np

    def write(train, rng):
        # Nonzeros a cell: log-normal around 1,000, as single-cell counts are, within 50-4,000.
        per_cell = np.clip(rng.lognormal(np.log(900), 0.5, cells), 50, min(4000, genes))
        indptr = np.zeros(cells + 1, np.int64)
        indptr[1:] = np.cumsum(per_cell.astype(np.int64))
        with h5py.File(os.path.join(train, H5TORCH_FILE), "w") as f:
            central = f.create_group("central")
            central["indptr"] = indptr
            indices = central.create_dataset("indices", (indptr[-1],), np.int32)
            data = central.create_dataset("data", (indptr[-1],), np.float32)
            block = 2000
            for first in range(0, cells, block):
                last = min(cells, first + block)
                runs_indices, runs_data = [], []
                for n in per_cell[first:last].astype(np.int64):
                    # n distinct genes in increasing order, as a csr row holds them
                    drawn = np.unique(rng.integers(0, genes, 2 * n))
                    if len(drawn) < n:  # a row of most genes (small test layouts)
                        drawn = np.arange(genes)
                    runs_indices.append(np.sort(rng.choice(drawn, n, replace=False)))
                    runs_data.append(rng.poisson(2.0, n).astype(np.float32) + 1)
                a, b = indptr[first], indptr[last]
                indices[a:b] = np.concatenate(runs_indices).astype(np.int32)
                data[a:b] = np.concatenate(runs_data)
            central.attrs["shape"] = [cells, genes]
            central.attrs["mode"] = "csr"
            central.attrs["dtypes"] = ["float32", "float32"]
            central.attrs["filled_to"] = cells
            central.attrs["load_sparse"] = False
            label = f.create_dataset("0/celltype", data=rng.integers(0, 40, cells))
            label.attrs["shape"] = [cells]
            label.attrs["mode"] = "N-D"
            label.attrs["dtypes"] = ["int64", "int64"]
            label.attrs["filled_to"] = cells
        return (f"{cells} cells of {genes} genes, {indptr[-1]:,} nonzeros "
                f"({indptr[-1] * 8 / 2**20:.0f} MiB of indices and counts)")

    return files_of_layout(directory, {"cells": cells, "genes": genes}, write, log)


ROBOMIMIC_FILE = "demos.hdf5"
ROBOMIMIC_CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")
ROBOMIMIC_LOW_DIM = {"robot0_eef_pos": 3, "robot0_eef_quat": 4, "robot0_gripper_qpos": 2}


def make_robomimic_files(directory, demos, steps, log=print):
    """robomimic's layout of a robosuite image dataset: DIR/train/demos.hdf5, a group per
    demonstration (data/demo_<k>), its obs and next_obs of two cameras and three low-dimensional
    keys, its actions, rewards, dones and states."""
    import h5py
    import numpy as np

    def write(train, rng):
        with h5py.File(os.path.join(train, ROBOMIMIC_FILE), "w") as f:
            data = f.create_group("data")
            data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1, "env_kwargs": {}})
            for k in range(demos):
                demo = data.create_group(f"demo_{k}")
                demo.attrs["num_samples"] = steps
                demo["actions"] = rng.uniform(-1, 1, (steps, 7))
                demo["rewards"] = (np.arange(steps) == steps - 1).astype(np.float64)
                demo["dones"] = (np.arange(steps) == steps - 1).astype(np.int64)
                demo["states"] = rng.standard_normal((steps, 32))
                for prefix in ("obs", "next_obs"):
                    for camera in ROBOMIMIC_CAMERAS:
                        demo[f"{prefix}/{camera}"] = rng.integers(0, 256, (steps, 84, 84, 3),
                                                                  dtype=np.uint8)
                    for key, width in ROBOMIMIC_LOW_DIM.items():
                        demo[f"{prefix}/{key}"] = rng.standard_normal((steps, width))
            data.attrs["total"] = demos * steps
            f["mask/train"] = np.array([f"demo_{k}".encode() for k in range(demos)])
        return (f"{demos} demonstrations of {steps} steps "
                f"({demos * steps * 4 * 84 * 84 * 3 / 2**20:.0f} MiB of images)")

    return files_of_layout(directory, {"demos": demos, "steps": steps}, write, log)


def robomimic_loader(src, directory, workers):
    import types

    from torch.utils.data import DataLoader

    _public_source(src, "robomimic/utils/dataset.py", "ARISE-Initiative/robomimic")
    try:
        import termcolor  # noqa: F401
    except ImportError:  # its log_utils colours warnings; the text is what matters
        sys.modules["termcolor"] = types.ModuleType("termcolor")
        sys.modules["termcolor"].colored = lambda text, *_, **__: text
    import robomimic.utils.obs_utils as obs_utils
    from robomimic.utils.dataset import SequenceDataset

    obs_utils.initialize_obs_utils_with_obs_specs(
        {"obs": {"low_dim": list(ROBOMIMIC_LOW_DIM), "rgb": list(ROBOMIMIC_CAMERAS)}})
    train = os.path.join(directory, "train")
    dataset = SequenceDataset(
        hdf5_path=os.path.join(train, ROBOMIMIC_FILE),
        obs_keys=list(ROBOMIMIC_LOW_DIM) + list(ROBOMIMIC_CAMERAS),
        action_keys=["actions"], dataset_keys=["actions", "rewards", "dones"],
        action_config={"actions": {"normalization": None}},
        seq_length=10, hdf5_cache_mode="low_dim", load_next_obs=False)
    dataset.get_action_normalization_stats()
    loader = DataLoader(dataset, batch_size=100, shuffle=True, num_workers=workers,
                        drop_last=True)
    return loader, _NoEpochs(), train


SALT_FILE = "pp_output_train.h5"
SALT_TRACKS = 40
# The jet and track variables of salt's own test files (salt/utils/inputs.py), those GN2
# trains on (salt/configs/GN2/GN2.yaml) and the labels of its tasks.
SALT_JET_FLOATS = ("pt", "eta", "mass", "pt_btagJes", "eta_btagJes") + tuple(
    f"softMuon_{v}" for v in ("pt", "dR", "eta", "phi", "qOverPratio", "pTrel", "ip3dD0",
                              "ip3dZ0", "ip3dD0Significance", "ip3dZ0Significance")) + tuple(
    f"GN2Xv00_p{c}" for c in ("hbb", "hcc", "top", "qcd"))
SALT_TRACK_FLOATS = ("d0", "z0SinTheta", "dphi", "deta", "qOverP", "IP3D_signed_d0_significance",
                     "IP3D_signed_z0_significance", "lifetimeSignedD0Significance",
                     "lifetimeSignedZ0SinThetaSignificance", "phiUncertainty",
                     "thetaUncertainty", "qOverPUncertainty", "pt", "eta", "phi",
                     "muon_qOverPratio", "muon_momentumBalanceSignificance",
                     "muon_scatteringNeighbourSignificance")
SALT_TRACK_HITS = ("numberOfPixelHits", "numberOfSCTHits", "numberOfInnermostPixelLayerHits",
                   "numberOfNextToInnermostPixelLayerHits",
                   "numberOfInnermostPixelLayerSharedHits", "numberOfInnermostPixelLayerSplitHits",
                   "numberOfPixelSharedHits", "numberOfPixelSplitHits", "numberOfSCTSharedHits",
                   "numberOfPixelHoles", "numberOfSCTHoles")
# GN2.yaml's 19 track inputs: the impact parameters and angles, their uncertainties, the hits.
SALT_GN2_TRACK_INPUTS = tuple(v for v in SALT_TRACK_FLOATS[:12]
                              if not v.startswith("lifetimeSigned")) + SALT_TRACK_HITS[:9]


def make_salt_files(directory, jets, compression="lz4", log=print):
    """The layout of the training files salt reads (umami-preprocessing's output, written by
    atlas-ftag-tools' H5Writer): DIR/train/pp_output_train.h5 with `jets` (jets,) and `tracks`
    (jets, 40) of compound rows, chunks of 100 jets (the jets' chunks h5py's choice), LZ4 (the
    writer's default; filter 32004) or --compression lzf, gzip or none. Tracks past a jet's
    count are zero with valid False, as the writer pads them."""
    import h5py
    import numpy as np

    jet_type = np.dtype([(n, "<f4") for n in SALT_JET_FLOATS]
                        + [("HadronConeExclTruthLabelID", "<i4"), ("flavour_label", "<i4"),
                           ("eventNumber", "<i8"), ("n_tracks", "u1")])
    track_type = np.dtype([(n, "<f4") for n in SALT_TRACK_FLOATS]
                          + [(n, "u1") for n in SALT_TRACK_HITS]
                          + [("subjetIndex", "i1"), ("leptonID", "i1"), ("muon_quality", "i1"),
                             ("ftagTruthOriginLabel", "i1"), ("ftagTruthVertexIndex", "i1"),
                             ("valid", "?")])
    filters = {"lz4": {"compression": 32004}, "lzf": {"compression": "lzf"},
               "gzip": {"compression": "gzip"}, "none": {}}[compression]

    def write(train, rng):
        with h5py.File(os.path.join(train, SALT_FILE), "w") as f:
            jd = f.create_dataset("jets", (jets,), jet_type, **filters)
            td = f.create_dataset("tracks", (jets, SALT_TRACKS), track_type,
                                  chunks=(100, SALT_TRACKS), **filters)
            block = 10000
            for first in range(0, jets, block):
                n = min(block, jets - first)
                j = np.zeros(n, jet_type)
                for name in SALT_JET_FLOATS:
                    j[name] = rng.standard_normal(n)
                j["HadronConeExclTruthLabelID"] = rng.choice([0, 4, 5, 15], n)
                j["flavour_label"] = rng.integers(0, 4, n)
                j["eventNumber"] = rng.integers(0, 1 << 40, n)
                count = np.clip(rng.poisson(12, n), 1, SALT_TRACKS)
                j["n_tracks"] = count
                t = np.zeros((n, SALT_TRACKS), track_type)
                valid = np.arange(SALT_TRACKS)[None, :] < count[:, None]
                for name in SALT_TRACK_FLOATS:
                    t[name] = np.where(valid, rng.standard_normal((n, SALT_TRACKS)), 0)
                for name in SALT_TRACK_HITS:
                    t[name] = np.where(valid, rng.integers(0, 12, (n, SALT_TRACKS)), 0)
                for name in ("subjetIndex", "leptonID", "muon_quality", "ftagTruthOriginLabel",
                             "ftagTruthVertexIndex"):
                    t[name] = np.where(valid, rng.integers(-1, 7, (n, SALT_TRACKS)), -1)
                t["valid"] = valid
                jd[first:first + n] = j
                td[first:first + n] = t
        size = jets * (jet_type.itemsize + SALT_TRACKS * track_type.itemsize)
        return (f"{jets} jets of {SALT_TRACKS} tracks, {compression} "
                f"({size / 2**20:.0f} MiB of rows before compression)")

    return files_of_layout(directory, {"jets": jets, "compression": compression}, write, log)


def salt_loader(src, directory, workers, batch_size=4000):
    from torch.utils.data import DataLoader

    _public_source(src, "salt/data/datasets.py", "umami-hep/salt")
    # atlas-ftag-tools' cuts, labeller and virtual-file helpers, for options this configuration
    # does not take (selections, a labeller, a wildcard of files).
    _stand_in_modules({"ftag": ["Cuts", "Labeller"], "ftag.track_selector": ["TrackSelector"],
                       "ftag.vds": ["create_virtual_file"], "lightning": []})
    # salt.data imports its Lightning data module too, whose base class is all it needs here.
    lightning = sys.modules["lightning"]
    if not hasattr(lightning, "LightningDataModule"):
        lightning.LightningDataModule = type("LightningDataModule", (), {})
    from salt.data.datasets import SaltDataset
    from salt.data.samplers import RandomBatchSampler

    train = os.path.join(directory, "train")
    dataset = SaltDataset(
        filename=os.path.join(train, SALT_FILE), norm_dict=os.path.join(train, "norm_dict.yaml"),
        variables={"jets": ["pt_btagJes", "eta_btagJes"], "tracks": list(SALT_GN2_TRACK_INPUTS)},
        labels={"jets": ["flavour_label"],
                "tracks": ["ftagTruthOriginLabel", "ftagTruthVertexIndex"]},
        stage="fit")
    # SaltDataModule.get_dataloader for the fit stage: batches of contiguous jets in a shuffled
    # order, the dataset reading a whole batch at a time.
    loader = DataLoader(dataset, batch_size=None, collate_fn=None,
                        sampler=RandomBatchSampler(dataset, batch_size, True, drop_last=True),
                        num_workers=workers, shuffle=False, pin_memory=False,
                        persistent_workers=workers > 0,
                        prefetch_factor=2 if workers > 0 else None)
    return loader, _NoEpochs(), train


def h5torch_loader(src, directory, workers):
    from torch.utils.data import DataLoader

    _public_source(src, "h5torch/dataset.py", "gdewael/h5torch")
    _stand_in_modules({"scipy.sparse": ["csr_matrix", "coo_matrix"]})
    import h5torch

    train = os.path.join(directory, "train")
    dataset = h5torch.Dataset(os.path.join(train, H5TORCH_FILE), sampling=0)
    loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=workers,
                        multiprocessing_context="fork" if workers else None)
    return loader, _NoEpochs(), train


LOADERS = {"deepcam": deepcam_loader, "fourcastnet": fourcastnet_loader,
           "pdebench": pdebench_loader, "unet3d": unet3d_loader, "fastmri": fastmri_loader,
           "thewell": well_loader, "credit": credit_loader, "mace": mace_loader,
           "h5torch": h5torch_loader, "robomimic": robomimic_loader, "salt": salt_loader,
           "thewell-by-path": lambda src, directory, workers: well_loader(src, directory, workers,
                                                                          by_path=True)}


def make_cold(directory):
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _digest(item, crc):
    """CRC-32 of a batch in delivery order: tensors by their bytes, strings by their text,
    dicts (the Well's, CREDIT's and robomimic's samples) key by key in sorted order (robomimic
    builds its keys from a set, whose order changes with each process's string hashing),
    sequences item by item."""
    import torch

    if isinstance(item, torch.Tensor):
        return zlib.crc32(memoryview(item.contiguous().numpy()).cast("B"), crc)
    if isinstance(item, str):
        return zlib.crc32(item.encode(), crc)
    if isinstance(item, dict):
        keys = sorted(item, key=str)
        item = [zlib.crc32(str(key).encode()) for key in keys] + [item[key] for key in keys]
    if isinstance(item, (list, tuple)):
        for part in item:
            crc = _digest(part, crc)
        return crc
    return zlib.crc32(repr(item).encode(), crc)


def run_epochs(kind, src, directory, epochs, workers=2):
    """One variant's process: the loader's training loop for `epochs` cold epochs; each epoch's
    batches digested in delivery order (a CRC-32 of every tensor's bytes, and of any strings: it
    tells a wrong byte, at a few GB/s, where a cryptographic hash at 0.7 GB/s would be most of
    the loop's time)."""
    import random

    import numpy as np
    import torch

    loader, sampler, train = LOADERS[kind](src, directory, workers)
    torch.manual_seed(0)
    out = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        random.seed(epoch), np.random.seed(epoch)  # FourCastNet's augmentation draws (none here)
        make_cold(train)
        crc = 0
        start = time.perf_counter()
        for batch in loader:
            crc = _digest(batch, crc)
        out.append({"seconds": time.perf_counter() - start, "digest": f"{crc:08x}"})
    return out


def variant_env(variant, plugin_dir, stats, cache_size=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HDF5_VOL_CONNECTOR", "HDF5_PLUGIN_PATH", "PRESCIENT_"))}
    variant, _, settings = variant.partition(":")
    if variant == "native":
        return env
    if variant == "hdf5-pass-through":
        env["HDF5_VOL_CONNECTOR"] = "pass_through under_vol=0;under_info={}"
        return env
    env.update({"HDF5_PLUGIN_PATH": plugin_dir, "HDF5_VOL_CONNECTOR": "prescient",
                "PRESCIENT_NODE_ID": f"public-{os.getpid()}-{time.monotonic_ns()}",
                "PRESCIENT_STATS": stats})
    if cache_size:
        env["PRESCIENT_CACHE_SIZE"] = cache_size
    if variant == "lru-inline":
        env["PRESCIENT_ADMIT_BEHIND"] = "0"  # the reader places its own misses in the cache
    if variant == "lru-always":
        env["PRESCIENT_ADMIT_BEHIND_WHEN"] = "always"  # the thread even without a spare CPU
    if variant == "lru-copy":
        env["PRESCIENT_ADMIT_READ_AGAIN"] = "0"  # the reader copies its misses for the thread
    if variant == "follow":
        env["PRESCIENT_FOLLOW"] = "1"
        env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    for setting in filter(None, settings.split(",")):
        name, _, value = setting.partition("=")
        env[name] = value
    return env


def variant_name(text):
    """A --variants entry: one of VARIANTS, or a connector variant with settings of its own,
    VARIANT:PRESCIENT_X=V[,PRESCIENT_Y=W] (compared side by side with the plain one)."""
    variant, _, settings = text.partition(":")
    if variant not in VARIANTS or (settings and variant in ("native", "hdf5-pass-through")):
        raise argparse.ArgumentTypeError(f"{text!r}: not one of {', '.join(VARIANTS)}, or a "
                                         "connector variant followed by :PRESCIENT_X=V,...")
    for setting in filter(None, settings.split(",")):
        if not setting.startswith("PRESCIENT_") or "=" not in setting:
            raise argparse.ArgumentTypeError(f"{setting!r} in {text!r}: not PRESCIENT_X=V")
    return text


def stats_totals(out_dir, stem):
    totals = {}
    for name in os.listdir(out_dir):
        if name.startswith(stem + ".") and name.endswith(".json"):
            with open(os.path.join(out_dir, name)) as f:
                for key, value in json.load(f).items():
                    if isinstance(value, int) and not isinstance(value, bool) and "pid" not in key:
                        totals[key] = totals.get(key, 0) + value
                    elif key == "forwarded":  # why reads were forwarded, reason by reason
                        for reason, count in value.items():
                            if count:
                                name = f"forwarded.{reason}"
                                totals[name] = totals.get(name, 0) + count
    return totals


def ratio_table(runs, epochs):
    """Markdown: per variant, each epoch's median of native / variant over the rounds (each
    round's variant against the same round's native), and the seconds it came from."""
    lines = ["| variant | " + " | ".join(f"epoch {e}" for e in range(epochs)) + " |",
             "|---|" + "---|" * epochs]
    natives = [r["epochs"] for r in runs if r["variant"] == "native"]
    for variant in dict.fromkeys(r["variant"] for r in runs if r["variant"] != "native"):
        mine = [(r["round"], r["epochs"]) for r in runs if r["variant"] == variant]
        if not mine:
            continue
        cells = []
        for e in range(epochs):
            ratios = [natives[rnd][e]["seconds"] / ep[e]["seconds"] for rnd, ep in mine]
            seconds = ", ".join(f"{ep[e]['seconds']:.2f}" for _, ep in mine)
            cells.append(f"{statistics.median(ratios):.2f} ({seconds} s)")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines.append("| native | " + " | ".join(
        ", ".join(f"{n[e]['seconds']:.2f}" for n in natives) + " s" for e in range(epochs)) + " |")
    return "\n".join(lines)


def compare(args):
    # Absolute: DeepCAM joins its source directory with paths that already include it, which
    # only an absolute directory survives (os.path.join keeps the second absolute path).
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    data_dir = os.path.join(args.out, "data")
    if args.loader == "deepcam":
        make_files(data_dir, args.files, args.height, args.width)
    elif args.loader == "pdebench":
        make_pdebench_files(data_dir, args.seeds, args.steps, args.side)
    elif args.loader == "unet3d":
        make_unet3d_files(data_dir, args.volumes, args.depth, args.side)
    elif args.loader == "fastmri":
        make_fastmri_files(data_dir, args.files, args.slices, args.height, args.width)
    elif args.loader == "credit":
        make_credit_files(data_dir, args.years, args.steps, args.levels, args.height, args.width,
                          args.compressed)
    elif args.loader == "thewell":
        make_well_files(data_dir, args.files, args.trajectories, args.steps, args.height,
                        args.width)
    elif args.loader == "mace":
        make_mace_files(data_dir, args.files, args.configs)
    elif args.loader == "h5torch":
        make_h5torch_files(data_dir, args.cells, args.genes)
    elif args.loader == "robomimic":
        make_robomimic_files(data_dir, args.demos, args.steps)
    elif args.loader == "salt":
        make_salt_files(data_dir, args.jets, args.compression)
    else:
        make_fourcastnet_files(data_dir, args.years, args.steps, args.height, args.width)
    plugin_dir = args.plugin_dir or os.path.join(REPO, "build", "bench", "plugins")
    if not os.path.isfile(os.path.join(plugin_dir, "libprescient_vol.so")):
        raise SystemExit(f"public-loader: no libprescient_vol.so in {plugin_dir} (build it: "
                         "examples/bench/run --help builds build/bench; or --plugin-dir)")
    runs = []
    for rnd in range(args.rounds):
        for variant in args.variants:
            stem = f"stats-{variant}-r{rnd}"
            for name in os.listdir(args.out):  # an earlier invocation's, which would be summed
                if name.startswith(stem + "."):
                    os.unlink(os.path.join(args.out, name))
            result = os.path.join(args.out, f"{variant}-r{rnd}.json")
            src = args.src if args.src == "stand-in" else os.path.abspath(args.src)
            kind = "thewell-by-path" if getattr(args, "open_by_path", False) else args.loader
            cmd = [sys.executable, os.path.abspath(__file__), "_run", "--loader", kind, "--src", src,
                   "--data", data_dir, "--epochs", str(args.epochs), "--result", result,
                   "--workers", str(args.workers)]
            proc = subprocess.run(cmd, env=variant_env(variant, plugin_dir,
                                                       os.path.join(args.out, stem + ".json"),
                                                       args.cache_size),
                                  capture_output=True, text=True, timeout=args.timeout)
            if proc.returncode != 0:
                raise SystemExit(f"public-loader: {variant} failed:\n{proc.stderr[-4000:]}")
            with open(result) as f:
                epochs = json.load(f)
            runs.append({"variant": variant, "round": rnd, "epochs": epochs,
                         "stderr": [l for l in proc.stderr.splitlines() if "prescient" in l][:5],
                         "stats": stats_totals(args.out, stem) if variant != "native" else {}})
            print(f"public-loader: round {rnd} {variant}: "
                  + ", ".join(f"{e['seconds']:.2f}" for e in epochs) + " s", flush=True)
    native = {r["round"]: r for r in runs if r["variant"] == "native"}
    wrong = [(r["variant"], r["round"], e) for r in runs for e in range(args.epochs)
             if r["epochs"][e]["digest"] != native[r["round"]]["epochs"][e]["digest"]]
    report = {"loader": args.loader, "src": args.src, "layout": {
        k: getattr(args, k)
        for k in ("files", "years", "seeds", "steps", "side", "height", "width", "volumes", "depth",
                  "slices", "trajectories", "levels", "compressed", "configs", "cells", "genes",
                  "demos", "jets", "compression")
        if hasattr(args, k)},
        "open_by_path": getattr(args, "open_by_path", False), "runs": runs, "wrong": wrong}
    with open(os.path.join(args.out, "public-loader.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(ratio_table([r for r in runs], args.epochs))
    for r in runs:
        if r["stats"]:
            keys = ("reads", "reads_served", "reads_forwarded", "reads_row_parts_narrow",
                    "reads_row_parts_narrow_served", "reads_row_parts_narrow_split",
                    "rows_narrow_through_hdf5", "rows_hit", "rows_loaded",
                    "rows_prefetched", "rows_admitted_behind", "reads_admit_no_spare_cpu",
                    "reads_admit_small",
                    "rows_not_kept_busy",
                    "schedule_matches", "storage_bytes")
            keys += tuple(sorted(k for k in r["stats"] if k.startswith("forwarded.")))
            print(f"{r['variant']} r{r['round']}: " + ", ".join(f"{k} {r['stats'].get(k, 0)}" for k in keys))
        for line in r["stderr"]:
            print(f"{r['variant']} r{r['round']} stderr: {line}")
    print("every batch equal to native's" if not wrong else f"DIFFERENT from native: {wrong}")
    return 1 if wrong else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="loader", required=True)

    def common(p):
        p.add_argument("--epochs", type=int, default=3)
        p.add_argument("--rounds", type=int, default=2)
        p.add_argument("--variants", nargs="+", default=["native", "lru", "follow"], type=variant_name,
                       help=f"of {', '.join(VARIANTS)}; VARIANT:PRESCIENT_X=V,... adds settings")
        p.add_argument("--plugin-dir", help="where libprescient_vol.so is (build/bench/plugins)")
        p.add_argument("--timeout", type=float, default=600, help="seconds per variant process")
        p.add_argument("--cache-size", help="PRESCIENT_CACHE_SIZE of the connector's runs "
                                            "(default: the connector's default)")
        p.add_argument("--out", help="results and data (build/bench-data/public-<loader>)")
        p.add_argument("--workers", type=int, default=2,
                       help="DataLoader workers (2; 0: the training process reads itself)")

    p = sub.add_parser("deepcam", help="MLPerf HPC's DeepCAM loader (CamDataset)")
    p.add_argument("--src", required=True,
                   help="directory of cam_hdf5_dataset.py (or 'stand-in', this script's own)")
    p.add_argument("--files", type=int, default=160, help="samples, one per file (160)")
    p.add_argument("--height", type=int, default=192, help="rows of climate/data (192)")
    p.add_argument("--width", type=int, default=288, help="columns of climate/data (288)")
    common(p)
    p = sub.add_parser("fourcastnet", help="NVIDIA's FourCastNet loader (get_data_loader)")
    p.add_argument("--src", required=True, help="the root of a FourCastNet checkout")
    p.add_argument("--years", type=int, default=4, help="files, one per year (4)")
    p.add_argument("--steps", type=int, default=64, help="time steps per year (64)")
    p.add_argument("--height", type=int, default=181, help="latitudes (181)")
    p.add_argument("--width", type=int, default=360, help="longitudes (360)")
    common(p)
    p = sub.add_parser("pdebench", help="PDEBench's FNO loader of many seeds (FNODatasetMult)")
    p.add_argument("--src", required=True, help="the root of a PDEBench checkout")
    p.add_argument("--seeds", type=int, default=300, help="groups, one per seed (300)")
    p.add_argument("--steps", type=int, default=101, help="time steps per seed (101)")
    p.add_argument("--side", type=int, default=64, help="grid points per side (64; PDEBench's 128)")
    common(p)
    p = sub.add_parser("unet3d", help="pytorch-3dunet's lazy patch loader (LazyHDF5Dataset)")
    p.add_argument("--src", required=True, help="the root of a pytorch-3dunet checkout")
    p.add_argument("--volumes", type=int, default=8, help="training files, a volume each (8)")
    p.add_argument("--depth", type=int, default=96, help="z-slices per volume (96)")
    p.add_argument("--side", type=int, default=384, help="y and x extent of a volume (384)")
    common(p)
    p = sub.add_parser("fastmri", help="fastMRI's slice loader (SliceDataset, UnetDataTransform)")
    p.add_argument("--src", required=True, help="the root of a fastMRI checkout")
    p.add_argument("--files", type=int, default=24, help="volumes, one per file (24)")
    p.add_argument("--slices", type=int, default=35, help="slices per volume (35)")
    p.add_argument("--height", type=int, default=640, help="k-space rows (640)")
    p.add_argument("--width", type=int, default=368, help="k-space columns (368)")
    common(p)
    p = sub.add_parser("thewell", help="the Well's loader (WellDataModule, WellDataset)")
    p.add_argument("--src", required=True, help="the root of a the_well checkout")
    p.add_argument("--files", type=int, default=4, help="training files (4)")
    p.add_argument("--trajectories", type=int, default=2, help="trajectories per file (2)")
    p.add_argument("--steps", type=int, default=101, help="time steps per trajectory (101)")
    p.add_argument("--height", type=int, default=128, help="grid points along x (128)")
    p.add_argument("--width", type=int, default=384, help="grid points along y (384)")
    p.add_argument("--open-by-path", action="store_true",
                   help="open each file by its path (HDF5's POSIX driver), not through fsspec")
    common(p)
    p = sub.add_parser("credit", help="NCAR's CREDIT (ERA5_and_Forcing_SingleStep, xarray)")
    p.add_argument("--src", required=True, help="the root of a miles-credit checkout")
    p.add_argument("--years", type=int, default=2, help="yearly files (2)")
    p.add_argument("--steps", type=int, default=96, help="6-hourly time steps per file (96)")
    p.add_argument("--levels", type=int, default=8, help="vertical levels (8)")
    p.add_argument("--height", type=int, default=181, help="latitudes (181)")
    p.add_argument("--width", type=int, default=360, help="longitudes (360)")
    p.add_argument("--compressed", action="store_true",
                   help="a shuffled, deflated chunk per time step (as ERA5's netCDF downloads)")
    common(p)
    p = sub.add_parser("mace", help="MACE's sharded HDF5 loader (HDF5Dataset)")
    p.add_argument("--src", required=True, help="the root of a mace checkout")
    p.add_argument("--files", type=int, default=4, help="files, one per preprocessing process (4)")
    p.add_argument("--configs", type=int, default=500, help="configurations per file (500)")
    common(p)
    p = sub.add_parser("h5torch", help="h5torch's Dataset of a sparse (csr) matrix")
    p.add_argument("--src", required=True, help="the root of an h5torch checkout")
    p.add_argument("--cells", type=int, default=60000, help="rows of the matrix, the samples (60000)")
    p.add_argument("--genes", type=int, default=20000, help="columns of the matrix (20000)")
    common(p)
    p = sub.add_parser("robomimic", help="robomimic's SequenceDataset of demonstrations")
    p.add_argument("--src", required=True, help="the root of a robomimic checkout")
    p.add_argument("--demos", type=int, default=100, help="demonstrations, a group each (100)")
    p.add_argument("--steps", type=int, default=120, help="steps of each demonstration (120)")
    common(p)
    p = sub.add_parser("salt", help="ATLAS's salt (SaltDataset, RandomBatchSampler)")
    p.add_argument("--src", required=True, help="the root of a salt checkout")
    p.add_argument("--jets", type=int, default=250000, help="rows of jets and tracks (250000)")
    p.add_argument("--compression", choices=("lz4", "lzf", "gzip", "none"), default="lz4",
                   help="the filter of the chunks (lz4, the preprocessing's default)")
    common(p)
    r = sub.add_parser("_run", help=argparse.SUPPRESS)
    r.add_argument("--loader", dest="kind", required=True, choices=sorted(LOADERS))
    r.add_argument("--src", required=True)
    r.add_argument("--data", required=True)
    r.add_argument("--epochs", type=int, required=True)
    r.add_argument("--result", required=True)
    r.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.loader == "_run":
        with open(args.result, "w") as f:
            json.dump(run_epochs(args.kind, args.src, args.data, args.epochs, args.workers), f)
        return 0
    args.out = args.out or os.path.join(REPO, "build", "bench-data", f"public-{args.loader}")
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
