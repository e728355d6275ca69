"""Extract a dataset's raw layout with h5py's low-level API, in the text form
prescient-rawread reads (cache/io/raw_layout_text.h). This mirrors what the VOL
connector does in C on the caller's thread (H5Dget_offset, H5Dget_chunk_info,
H5Pget_filter2). Used by tests/python/cache_io and cache/io/bench."""
import h5py
import numpy as np


def raw_layout_text(path: str, dset: h5py.Dataset) -> str:
    dcpl = dset.id.get_create_plist()
    layout = dcpl.get_layout()
    itemsize = dset.dtype.itemsize
    lines = ["prescient-raw-layout 1"]
    if layout == h5py.h5d.CONTIGUOUS:
        offset = dset.id.get_offset()
        assert offset is not None, "contiguous dataset has no storage yet"
        row_bytes = itemsize * int(np.prod(dset.shape[1:], dtype=np.int64))
        lines += [
            "kind contiguous",
            f"path {path}",
            f"data_offset {offset}",
            f"row_bytes {row_bytes}",
            f"num_rows {dset.shape[0]}",
        ]
        return "\n".join(lines) + "\n"
    assert layout == h5py.h5d.CHUNKED, f"layout {layout} is not contiguous or chunked"
    lines += [
        "kind chunked",
        f"path {path}",
        "shape " + " ".join(str(d) for d in dset.shape),
        "chunk_shape " + " ".join(str(c) for c in dset.chunks),
        f"element_size {itemsize}",
    ]
    fill = dset.fillvalue
    if fill is not None:
        fill_bytes = np.asarray(fill, dtype=dset.dtype).tobytes()
        if any(fill_bytes):
            lines.append("fill " + fill_bytes.hex())
    for i in range(dcpl.get_nfilters()):
        code, _flags, client_data, _name = dcpl.get_filter(i)
        lines.append("filter " + " ".join(str(v) for v in (code, *client_data)))
    for i in range(dset.id.get_num_chunks()):
        info = dset.id.get_chunk_info(i)
        lines.append(
            "chunk "
            + " ".join(str(v) for v in info.chunk_offset)
            + f" {info.byte_offset} {info.size} {info.filter_mask}"
        )
    return "\n".join(lines) + "\n"
