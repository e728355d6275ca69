"""Start-up hook for running from the repository: with this directory on
PYTHONPATH and PRESCIENT_FOLLOW=1, Python enables the follower at start-up
(an installed package does the same through its prescient-follow.pth). The
sitecustomize this one shadows (Debian's, a virtual environment's) still runs.
"""

import importlib.util as _util
import os as _os
import sys as _sys


def _run_shadowed_sitecustomize():
    here = _os.path.dirname(_os.path.abspath(__file__))
    for entry in _sys.path:
        if _os.path.abspath(entry or ".") == here:
            continue
        candidate = _os.path.join(entry or ".", "sitecustomize.py")
        if _os.path.isfile(candidate):
            spec = _util.spec_from_file_location("_prescient_shadowed_sitecustomize", candidate)
            module = _util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    _run_shadowed_sitecustomize()
except Exception as _e:  # noqa: BLE001
    print(f"prescient: the shadowed sitecustomize failed: {_e!r}", file=_sys.stderr)

if _os.environ.get("PRESCIENT_FOLLOW"):
    from prescient import _startup

    _startup.run()
