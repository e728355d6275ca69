"""Cache sizes in the suites' terms: a share of a workload, and what a segment holds of it.

PRESCIENT_CACHE_SIZE is the whole shared segment; its data area (examples/report/segment_geometry.py
mirrors the layout) is cut into 4 KiB blocks. A row of a large field takes whole blocks
(ceil(row_bytes / 4096)); rows of small fields (labels, parameters) are kept a block's worth to an
entry, so a sample's small fields take their bytes' share of a block. "A cache of P% of the
dataset" is the smallest segment (a multiple of 1 MiB) whose data area holds the blocks of
ceil(P% x N) samples, every field counted.
"""

import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
import segment_geometry  # noqa: E402

BLOCK = 4096


def blocks_per_sample(fields, rows_per_file=None):
    """Blocks one sample takes in the cache, every field counted. A row of at least half a block
    takes whole blocks; smaller rows of a file's dataset are kept `4096 // row_bytes` rows to a
    one-block entry (so with one row per file, a small row still takes a whole block)."""
    total = 0.0
    for f in fields:
        if 2 * f.row_bytes > BLOCK:
            total += math.ceil(f.row_bytes / BLOCK)
        else:
            rows = rows_per_file or 1 << 30
            per_entry = min(rows, BLOCK // max(1, f.row_bytes))
            total += math.ceil(rows / per_entry) / rows
    return total


def _rows_per_file(workload):
    return workload.recipe.rows_per_file


def segment_for_share(workload, share):
    """PRESCIENT_CACHE_SIZE for a cache holding `share` (0 < share <= 1) of the workload's samples."""
    samples = math.ceil(share * workload.samples)
    blocks = math.ceil(samples * blocks_per_sample(workload.fields, _rows_per_file(workload)))
    # A segment sized for `blocks` rows of one block each has exactly that many data blocks.
    return segment_geometry.segment_bytes_for_rows(blocks, BLOCK)


def capacity(segment_bytes, workload):
    """What a segment of `segment_bytes` holds: {'data_blocks', 'data_bytes', 'samples'} (samples with
    every field counted, the figure the simulator is given when it cannot count blocks itself)."""
    blocks = segment_geometry.data_blocks(segment_bytes, BLOCK)
    samples = int(blocks // blocks_per_sample(workload.fields, _rows_per_file(workload)))
    return {"data_blocks": blocks, "data_bytes": blocks * BLOCK, "samples": samples}


def default_segment_bytes():
    """The connector's default PRESCIENT_CACHE_SIZE on this machine: min(50% of free /dev/shm, 25% of RAM)."""
    st = os.statvfs("/dev/shm")
    shm_free = st.f_bavail * st.f_frsize
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(shm_free // 2, ram // 4)
