"""What the benchmarks do to and read from the machine around a loop: cold files, device
counters, the machine's state as a run starts, and the CPU time the hypervisor took from the
machine (steal), which explains slow epochs on a VM.

"Cold" means: every file of the workload is written back (fdatasync) and dropped from the page
cache (POSIX_FADV_DONTNEED) before an epoch; the node cache in /dev/shm is what survives. On a VM
the host may still cache the disk image (examples/bench/RESULTS.md, "The machine").
"""

import os
import shutil
import time


def drop_from_page_cache(paths):
    """Makes every file in `paths` cold."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def device_of(path):
    """The /proc/diskstats name of the block device holding `path`, or None."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                fields = line.split()
                if int(fields[0]) == major and int(fields[1]) == minor:
                    return fields[2]
    except OSError:
        pass
    return None


def device_reads(device):
    """(read requests completed, bytes read) of `device`, machine-wide; (0, 0) when unknown."""
    if device is None:
        return (0, 0)
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                fields = line.split()
                if fields[2] == device:
                    return (int(fields[3]), int(fields[5]) * 512)
    except OSError:
        pass
    return (0, 0)


def cpu_steal_s():
    """CPU seconds stolen from this machine by its hypervisor so far, summed over its CPUs (the
    8th value of /proc/stat's "cpu" line): time the loop's processes were runnable but the
    virtual CPU was not running. 0.0 when unknown (no /proc, or a kernel that does not count it)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" else 0.0
    except (OSError, IndexError, ValueError):
        return 0.0


def machine_state():
    """The machine as a run starts: load averages, CPUs, available memory, free /dev/shm, UTC."""
    load = os.getloadavg()
    mem = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            mem[key] = int(value.split()[0]) * 1024
    shm = shutil.disk_usage("/dev/shm")
    return {"load_1m": load[0], "load_5m": load[1], "load_15m": load[2], "cpus": os.cpu_count(),
            "mem_available_gib": mem.get("MemAvailable", 0) / 2**30, "shm_free_gib": shm.free / 2**30,
            "utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
