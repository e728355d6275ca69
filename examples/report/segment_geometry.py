"""How many rows a cache segment of a given size holds (for the simulator).

PRESCIENT_CACHE_SIZE is the size of the whole shared segment; its metadata
(dataset and process tables, one 48-byte descriptor per block plus 1/16,
hash buckets, heap, block chains) takes about 1.8% of it with 4 KiB blocks,
so the data area holds a little less than SIZE / row_bytes rows. The
simulator must be given that smaller number. This mirrors PlanLayout() in
cache/core/segment_layout.cc for the default options (4 KiB blocks, 4,096
datasets, descriptors never the limit); the segment header's exact size is
not visible from here and is taken as 512 bytes (it moves the result by at
most one block).
"""

_PAGE = 4096
_HEADER = 512
_DATASET_RECORD = 40
_ATTACH_RECORD = 272
_MAX_ATTACH = 1024
_ENTRY = 48


def _align(value, alignment):
    return (value + alignment - 1) // alignment * alignment


def _next_power_of_two(value):
    p = 1
    while p < value:
        p <<= 1
    return p


def _segment_bytes(num_blocks, block_bytes, max_datasets):
    entries = num_blocks + num_blocks // 16 + 16
    at = _align(_HEADER, 64)
    at = _align(at + max_datasets * _DATASET_RECORD, 64)
    at = _align(at + _MAX_ATTACH * _ATTACH_RECORD, 64)
    at = _align(at + entries * _ENTRY, 64)
    at = _align(at + _next_power_of_two(entries * 2) * 4, 64)
    at = _align(at + entries * 4, 64)
    at = _align(at + num_blocks * 4, 64)
    at = _align(at + (num_blocks + 63) // 64 * 8, _PAGE)
    return at + num_blocks * block_bytes


def data_blocks(segment_bytes, block_bytes=4096, max_datasets=4096):
    budget = segment_bytes // _PAGE * _PAGE
    lo, hi = 0, budget // block_bytes + 1
    while lo < hi:
        mid = lo + (hi - lo + 1) // 2
        if _segment_bytes(mid, block_bytes, max_datasets) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def rows_held(segment_bytes, row_bytes, block_bytes=4096):
    """Rows of row_bytes each that a segment of segment_bytes holds."""
    per_row = -(-row_bytes // block_bytes)
    return data_blocks(segment_bytes, block_bytes) // per_row


def segment_bytes_for_rows(rows, row_bytes, block_bytes=4096):
    """The smallest segment size (a multiple of 1 MiB) that holds `rows` rows."""
    per_row = -(-row_bytes // block_bytes)
    size = _segment_bytes(rows * per_row, block_bytes, 4096)
    return _align(size, 1 << 20)


_UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
          "g": 1 << 30, "gib": 1 << 30, "gb": 10**9, "t": 1 << 40, "tib": 1 << 40, "tb": 10**12}


def parse_size(text):
    """'8GiB', '512 MiB', '1.5G', '4096' -> bytes (the connector's ParseByteSize forms)."""
    s = str(text).strip().lower()
    i = len(s)
    while i > 0 and s[i - 1].isalpha():
        i -= 1
    number, unit = s[:i].strip(), s[i:]
    if unit not in _UNITS or not number:
        raise ValueError(f"cannot read the size '{text}' (e.g. 8GiB, 512MiB, 1.5G, 4096)")
    return int(float(number) * _UNITS[unit])
