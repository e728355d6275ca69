"""Reads netCDF-4 files through the clients climate loaders use, for the netCDF differential test.

    python3 voltest_netcdf.py write DIR
    python3 voltest_netcdf.py read CLIENT DIR OUT.pkl      CLIENT: netcdf4 | h5netcdf | xarray | forked

netCDF-4 files are HDF5 files, and three clients read them: netCDF4-python through the netCDF C
library (libnetcdf, which calls the HDF5 C API itself, not through h5py), h5netcdf (through
h5py), and xarray over either, as ERA5/WeatherBench-style loaders do (a sample is a time step
of several variables). DIR gets the files of a small reanalysis: per file, variables over
(time, latitude, longitude) stored the ways netCDF writers store them (compressed chunks of a
time step, contiguous, packed int16 with a scale, a fill value and missing values, shuffled
doubles in chunks across time steps, big-endian, an unlimited time axis), a string variable
and a variable in a group. OUT records, per read, a digest of the values the client returned
with their dtype and shape; the test compares the native and connector runs. `forked` reads
as a DataLoader's forked workers do, through handles the parent opened.
"""

import os
import sys

import numpy as np

from voltest_records import in_forked_workers, script_main

STEPS, LAT, LON = 24, 19, 36
FILES = 2


def write(directory):
    import netCDF4

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(11)
    for index in range(FILES):
        with netCDF4.Dataset(os.path.join(directory, f"era_{index}.nc"), "w") as ds:
            ds.createDimension("time", STEPS)
            ds.createDimension("latitude", LAT)
            ds.createDimension("longitude", LON)
            ds.createDimension("record", None)
            ds.createVariable("time", "i8", ("time",))[:] = np.arange(STEPS) * 6 + index * 1000
            ds.createVariable("latitude", "f4", ("latitude",))[:] = np.linspace(90, -90, LAT)
            ds.createVariable("longitude", "f4", ("longitude",))[:] = np.linspace(0, 350, LON)
            grid = ("time", "latitude", "longitude")
            shape = (STEPS, LAT, LON)
            t2m = ds.createVariable("t2m", "f4", grid, zlib=True, complevel=1,
                                    chunksizes=(1, LAT, LON))
            t2m[:] = rng.standard_normal(shape, dtype=np.float32) * 10 + 280
            ds.createVariable("u10", "f4", grid, contiguous=True)[:] = rng.standard_normal(
                shape, dtype=np.float32)
            z = ds.createVariable("z", "i2", grid, chunksizes=(4, LAT, LON), fill_value=-32767)
            z.scale_factor, z.add_offset = 0.5, 100.0
            z.set_auto_maskandscale(False)
            packed = rng.integers(-30000, 30000, shape, dtype=np.int16)
            packed[:, 3, 5] = -32767  # missing values, masked when read with auto-masking
            z[:] = packed
            ds.createVariable("v10", "f8", grid, chunksizes=(8, 10, 18), shuffle=True,
                              zlib=True)[:] = rng.standard_normal(shape)
            ds.createVariable("sp", ">f4", grid, endian="big", chunksizes=(2, LAT, LON))[:] = (
                rng.standard_normal(shape, dtype=np.float32))
            ds.createVariable("obs", "f4", ("record", "longitude"))[:] = rng.standard_normal(
                (STEPS, LON), dtype=np.float32)
            station = ds.createVariable("station", str, ("latitude",))
            for row in range(LAT):
                station[row] = f"station-{index}-{row}" * (1 + row % 3)
            land = ds.createGroup("land")
            land.createDimension("time", STEPS)
            land.createVariable("swvl1", "f4", ("time", "latitude", "longitude"),
                                chunksizes=(1, LAT, LON))[:] = rng.random(shape, dtype=np.float32)


def samples(rng, epochs=2, per_epoch=20):
    """(file, time step) pairs in a new random order each epoch, like a shuffled sampler."""
    for _ in range(epochs):
        order = rng.permutation(FILES * STEPS)[:per_epoch]
        yield [(int(i) // STEPS, int(i) % STEPS) for i in order]


def read_netcdf4(directory, rec):
    import netCDF4

    rng = np.random.default_rng(3)
    for epoch in samples(rng):
        files = [netCDF4.Dataset(os.path.join(directory, f"era_{i}.nc")) for i in range(FILES)]
        for k, (f, t) in enumerate(epoch):
            ds = files[f]
            for name in ("t2m", "u10", "v10", "sp"):
                rec.add(f"{name}[{t}]", ds[name][t])
            rec.add(f"z[{t}] scaled and masked", ds["z"][t])
            ds["z"].set_auto_maskandscale(False)
            rec.add(f"z[{t}] packed", ds["z"][t])
            ds["z"].set_auto_maskandscale(True)
            rec.add(f"land/swvl1[{t}]", ds["land"]["swvl1"][t])
            if k % 5 == 0:  # batch and window reads
                rec.add("t2m window", ds["t2m"][t:t + 3, 2:15, ::3])
                rec.add("u10 rows", ds["u10"][[t, (t + 5) % STEPS, (t + 9) % STEPS]])
                rec.add("v10 column", ds["v10"][t, :, 7])
                rec.add("obs", ds["obs"][t:t + 4])
                rec.add("station", ds["station"][:])
                rec.add("axes", np.concatenate([ds["latitude"][:], ds["longitude"][:]]))
        for ds in files:
            ds.close()


def read_h5netcdf(directory, rec):
    import h5netcdf

    rng = np.random.default_rng(4)
    for epoch in samples(rng):
        files = [h5netcdf.File(os.path.join(directory, f"era_{i}.nc"), "r") for i in range(FILES)]
        for k, (f, t) in enumerate(epoch):
            ds = files[f]
            for name in ("t2m", "u10", "v10", "sp", "z"):
                rec.add(f"{name}[{t}]", ds[name][t])
            rec.add(f"land/swvl1[{t}]", ds["land"]["swvl1"][t])
            if k % 5 == 0:
                rec.add("t2m window", ds["t2m"][t:t + 3, 2:15, ::3])
                rec.add("obs", ds["obs"][t:t + 4])
                rec.add("station", ds["station"][:])
        for ds in files:
            ds.close()


def read_xarray(directory, rec):
    import xarray

    rng = np.random.default_rng(5)
    for engine in ("netcdf4", "h5netcdf"):
        for epoch in samples(rng):
            files = [xarray.open_dataset(os.path.join(directory, f"era_{i}.nc"), engine=engine,
                                         cache=False) for i in range(FILES)]
            for k, (f, t) in enumerate(epoch):
                step = files[f].isel(time=t)
                for name in ("t2m", "u10", "v10", "sp", "z"):
                    rec.add(f"{engine} {name}[{t}]", step[name].values)
                if k % 5 == 0:
                    rec.add(f"{engine} window", files[f]["t2m"].isel(
                        time=slice(t, t + 4), latitude=slice(3, 12)).values)
                    rec.add(f"{engine} z rows", files[f]["z"].isel(time=[t, (t + 7) % STEPS]).values)
            for ds in files:
                ds.close()


def read_forked(directory, rec):
    """As CREDIT's ERA5 dataset under a DataLoader: xarray opens the files (netCDF4 engine) in
    the training process, which reads a little; forked workers read the samples through the
    inherited handles and leave with os._exit. Each worker's records come back in a file."""
    import xarray

    files = [xarray.open_dataset(os.path.join(directory, f"era_{i}.nc"), engine="netcdf4",
                                 cache=False) for i in range(FILES)]
    rec.add("parent t2m[0]", files[0]["t2m"].isel(time=0).values)
    order = [pair for epoch in samples(np.random.default_rng(6)) for pair in epoch]

    def read_step(mine, pair):
        f, t = pair
        step = files[f].isel(time=t)
        for name in ("t2m", "u10", "v10", "sp", "z"):
            mine.add(f"worker {name}[{t}]", step[name].values)

    in_forked_workers(rec, directory, order, read_step)
    rec.add("parent after the workers", files[1]["z"].isel(time=slice(0, 3)).values)
    for ds in files:
        ds.close()


READERS = {"netcdf4": read_netcdf4, "h5netcdf": read_h5netcdf, "xarray": read_xarray,
           "forked": read_forked}


if __name__ == "__main__":
    sys.exit(script_main(sys.argv, write, READERS))
