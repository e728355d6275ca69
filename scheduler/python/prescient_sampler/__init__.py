"""prescient_sampler: follow a Prescient schedule file from a PyTorch script.

Pure Python + NumPy (no compiled extension, torch optional). Add
scheduler/python to sys.path (or PYTHONPATH) and:

    from prescient_sampler import ScheduleSampler, ScheduleBatchSampler

See scheduler/README.md ("Python sampler").
"""

from ._format import (DatasetFingerprint, DatasetMismatchError, Header, Layout, ScheduleFile,
                      ScheduleFileError, fingerprint_dataset, fingerprint_h5py)
from ._sample_map import FieldFile, FieldPlace, MapField, MapFile, SampleLocation, SampleMap
from .samplers import ScheduleBatchSampler, ScheduleSampler

__all__ = [
    "DatasetFingerprint",
    "DatasetMismatchError",
    "FieldFile",
    "FieldPlace",
    "Header",
    "Layout",
    "MapField",
    "MapFile",
    "SampleLocation",
    "SampleMap",
    "ScheduleBatchSampler",
    "ScheduleFile",
    "ScheduleFileError",
    "ScheduleSampler",
    "fingerprint_dataset",
    "fingerprint_h5py",
]
