"""A PyTorch Lightning training of the most ordinary kind, for test_lightning.py.

    lightning_train.py make DATA.h5
    lightning_train.py train DATA.h5 EPOCHS OUT.json

`train` fits a linear classifier on images read one sample at a time from DATA.h5 by an h5py
Dataset through `DataLoader(shuffle=True, num_workers=2)`, returned by the module's
`train_dataloader`, with `seed_everything(workers=True)`, on the CPU. Nothing in it knows about
Prescient. OUT.json gets each epoch's digest of the batches in delivery order, the digests of the
final weights and of every random generator's state.
"""

import json
import random
import sys
import zlib

import h5py
import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

SAMPLES, SIDE = 4096, 64  # 16 KiB images: 64 MiB


def make(path):
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f["images"] = rng.random((SAMPLES, SIDE, SIDE), dtype=np.float32)
        f["labels"] = rng.integers(0, 10, SAMPLES, dtype=np.int64)


class Images(Dataset):
    def __init__(self, path):
        self.path, self.file = path, None
        with h5py.File(path, "r") as f:
            self.length = len(f["labels"])

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.file is None:  # opened in each worker
            self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["images"][i]), int(self.file["labels"][i])


class Classifier(L.LightningModule):
    def __init__(self, path):
        super().__init__()
        self.path = path
        self.linear = torch.nn.Linear(SIDE * SIDE, 10)
        self.digests = []

    def on_train_epoch_start(self):
        self.digests.append(0)

    def training_step(self, batch, _):
        x, y = batch
        self.digests[-1] = zlib.crc32(y.numpy().tobytes(), zlib.crc32(x.numpy().tobytes(), self.digests[-1]))
        return torch.nn.functional.cross_entropy(self.linear(x.flatten(1)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        return DataLoader(Images(self.path), batch_size=32, shuffle=True, num_workers=2)


def train(path, epochs, out):
    L.seed_everything(5, workers=True)
    model = Classifier(path)
    L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False).fit(model)
    weights = zlib.crc32(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
    generators = zlib.crc32(torch.get_rng_state().numpy().tobytes() + repr(np.random.get_state()).encode()
                            + repr(random.getstate()).encode())
    with open(out, "w") as f:
        json.dump({"epochs": model.digests, "weights": weights, "generators": generators}, f)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        train(sys.argv[2], int(sys.argv[3]), sys.argv[4])
