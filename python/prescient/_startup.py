"""PRESCIENT_FOLLOW=1: following without a code change.

Python runs this at start-up (the installed package's `prescient-follow.pth`,
or `python/sitecustomize.py` when the repository's python/ directory is on
PYTHONPATH). It must be cheap and must never fail the interpreter: it exports
where the followed schedule goes (before h5py loads the connector) and
arranges for torch.utils.data to be wrapped when, and only if, the program
imports it.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import os
import sys

_TARGETS = ("torch.utils.data.dataloader", "torch.utils.data._utils.fetch")
_TRUE = ("1", "true", "yes", "on")


def _patch(name: str, module) -> None:
    from . import _follower

    if name == "torch.utils.data.dataloader":
        _follower.patch_dataloader(module)
    else:
        _follower.patch_fetch(module)


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Wraps the loader of the two torch modules so they are patched as soon as
    they have executed (torch itself is not imported early: a job that does not
    use it pays nothing)."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Chained(spec.loader, fullname)
                return spec
        return None


class _Chained(importlib.abc.Loader):
    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            _patch(self._name, module)
        except Exception as e:  # noqa: BLE001 - the import itself succeeded
            print(f"prescient: PRESCIENT_FOLLOW: cannot follow {self._name} ({e!r})",
                  file=sys.stderr)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def enable(explicit: bool = False):
    """Starts following in this process (idempotent); returns the follower."""
    from . import _context, _follower

    if _follower.get() is not None:
        return _follower.get()
    context = _context.resolve()
    _context.export(context)
    follower = _follower.start(context)
    # At this process's exit the last member of the job on the node removes
    # its directory (started from the start-up hook, this runs after
    # multiprocessing has ended the DataLoader workers).
    mark = _context.join(context)
    if mark is not None:
        atexit.register(_context.leave, mark)
    for name in _TARGETS:
        module = sys.modules.get(name)
        if module is not None:
            _patch(name, module)
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
    return follower


def run() -> None:
    """The start-up hook's entry point."""
    if os.environ.get("PRESCIENT_FOLLOW", "").strip().lower() not in _TRUE:
        return
    if os.environ.get("PRESCIENT_SCHEDULE") and not os.environ.get("PRESCIENT_FOLLOW_JOB"):
        print("prescient: PRESCIENT_FOLLOW is ignored: PRESCIENT_SCHEDULE names a schedule "
              "file, which is followed instead", file=sys.stderr)
        os.environ["PRESCIENT_FOLLOW"] = "0"
        return
    try:
        enable()
    except Exception as e:  # noqa: BLE001 - never fail the interpreter's start
        print(f"prescient: PRESCIENT_FOLLOW: following is off ({e})", file=sys.stderr)
        os.environ["PRESCIENT_FOLLOW"] = "0"
