"""The connector's entry points for the follower (vol/passthrough/follow_exports.cc).

HDF5 loads the connector from HDF5_PLUGIN_PATH when h5py initialises the
library; the follower does not load it a second time: it finds the plugin among
the libraries already mapped into the process and binds to that copy (ctypes
with RTLD_NOLOAD), so it talks to the very connector that serves the reads.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional

_INTERFACE_VERSION = 1


class Recorder:
    """Brackets a `dataset[index]` call: the connector records the reads the
    calling thread makes in between (ReadRecorder)."""

    def __init__(self, library: ctypes.CDLL):
        self._begin = library.prescient_follow_begin
        self._begin.restype = ctypes.c_int
        self._begin.argtypes = []
        self._end = library.prescient_follow_end
        self._end.restype = ctypes.c_char_p
        self._end.argtypes = []

    def begin(self) -> bool:
        return self._begin() == _INTERFACE_VERSION

    def end(self) -> bytes:
        """The bracket's lines, as recorded (ReadRecorder::End); kept in bytes:
        the worker appends them to its learn file as they are."""
        return self._end() or b""


def _mapped_plugins():
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if "libprescient_vol" in os.path.basename(path) and path.startswith("/"):
                    yield path
    except OSError:
        return


def find_recorder() -> Optional[Recorder]:
    """The loaded connector's recorder, or None when no connector that has one
    is loaded in this process (yet)."""
    seen = set()
    for path in _mapped_plugins():
        if path in seen:
            continue
        seen.add(path)
        try:
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            if hasattr(library, "prescient_follow_begin"):
                return Recorder(library)
        except OSError:
            continue
    return None
