"""Fixtures for the cache/io cross-checks: locate the prescient-rawread driver."""
import os
import pathlib
import sys

import pytest

# The h5py raw-layout extractor lives beside the rawread tool it feeds.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "cache" / "io" / "tool"))


def _build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("PRESCIENT_BUILD_DIR", "/work/main/build/dev"))


@pytest.fixture(scope="session")
def rawread() -> pathlib.Path:
    """Path of the prescient-rawread executable in PRESCIENT_BUILD_DIR."""
    build = _build_dir()
    for candidate in (build / "cache" / "io" / "prescient-rawread", build / "bin" / "prescient-rawread"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        f"prescient-rawread not found under {build} (set PRESCIENT_BUILD_DIR to a build tree "
        "configured with PRESCIENT_BUILD_TOOLS=ON and built)"
    )
