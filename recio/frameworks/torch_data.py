"""recio's iterators as PyTorch sees them: tensor batches, an IterableDataset, a stateful loader.

:class:`TorchBatches` wraps an :class:`~recio.pipeline.iterator.ImageRecordIter` (or the DALI stage)
so that the training frameworks take it as it is:

* ``torch.utils.data.DataLoader(TorchBatches(it), batch_size=None)`` and torchdata's
  ``StatefulDataLoader``: one batch per item, already decoded, augmented and sharded;
  the dataset's ``state_dict()`` / ``load_state_dict()`` carry the iterator's position
  through the loader's own state (no fast-forwarding).
* PyTorch Lightning: returned from ``train_dataloader()`` it is not a ``DataLoader``, so
  Lightning injects no ``DistributedSampler``; it has ``len()`` (the whole epoch's batch
  count, also in a resumed epoch: Lightning counts the batches it restored), and being
  stateful it is saved in Lightning's checkpoints and restored from them mid-epoch.
* Hugging Face Accelerate: ``accelerator.prepare`` hands it back unchanged (it prepares
  only DataLoaders); ``device=accelerator.device`` moves the batches. A ``DataLoader``
  around it must not be prepared: Accelerate would shard it a second time (NOTE
  [sharded once]).

The iterator shards by rank itself (:mod:`recio.dist`: an initialised torch.distributed
process group is used when the user passes no ``part_index``/``num_parts``), so every
rank reads a disjoint part of each epoch and all ranks take the same number of steps.
Needs PyTorch (the ``train`` extra).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from .._install import install_hint

try:
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError as exc:  # pragma: no cover - the train extra is missing
    raise ImportError(
        f"recio.frameworks.torch_data needs PyTorch ({exc}); {install_hint('train')}"
    ) from exc

__all__ = ["EpochPass", "TorchBatch", "TorchBatches", "to_torch"]


class TorchBatch(NamedTuple):
    """One batch as tensors: what :class:`TorchBatches` yields.

    A named tuple, so ``images, labels, *_ = batch`` works, and Lightning, Accelerate and
    torch's collate functions move or convert it field by field.

    Attributes:
        data: the images, N×C×H×W or N×H×W×C as the iterator's ``layout`` says.
        label: float32 N or N×label_width (or ``label_dtype``).
        index: int64 record ids from the headers.
        pad: how many trailing samples repeat records to fill the batch.
        epoch: the epoch the batch belongs to.
        step: the batch's step in its epoch.
    """

    data: torch.Tensor
    label: torch.Tensor
    index: torch.Tensor
    pad: int
    epoch: int
    step: int


def as_tensor(array: Any) -> torch.Tensor:
    """A CPU numpy array as a tensor on the same memory; a tensor as it is; else DLPack."""
    if isinstance(array, torch.Tensor):
        return array
    if isinstance(array, np.ndarray):
        return torch.from_numpy(array)
    return torch.from_dlpack(array)


def to_torch(
    batch: Any,
    device: torch.device | str | None = None,
    label_dtype: torch.dtype | None = None,
) -> TorchBatch:
    """A recio :class:`~recio.pipeline.positioned.Batch` as a :class:`TorchBatch`, without copying.

    The tensors share the batch's numpy memory (``torch.from_numpy``); each keeps the
    iterator's batch buffer leased until it is dropped, so the pipeline never writes into
    a batch still in use. Only a ``device`` other than the data's, or a ``label_dtype``,
    copies.

    Args:
        batch: a batch from ``ImageRecordIter`` or ``DALIImageRecordIter``.
        device: where to put the tensors (None: where they are).
        label_dtype: e.g. ``torch.long`` for ``cross_entropy`` (None: float32 as read).
    """
    data, label = as_tensor(batch.data), as_tensor(batch.label)
    index = as_tensor(np.asarray(batch.index, dtype=np.int64))
    if label_dtype is not None:
        label = label.to(label_dtype)
    if device is not None:
        data = data.to(device, non_blocking=True)
        label = label.to(device, non_blocking=True)
        index = index.to(device, non_blocking=True)
    return TorchBatch(data, label, index, int(batch.pad), int(batch.epoch), int(batch.step))


class TorchBatches(IterableDataset):
    """An ImageRecordIter as a torch IterableDataset of whole batches, with its state.

    Iterating yields the rest of the iterator's current epoch as :class:`TorchBatch` batches;
    iterating again starts the next epoch (reshuffled), like the iterator itself.
    ``len()`` is the epoch's number of batches on this rank (the same on every rank): the
    whole epoch's, also after a mid-epoch resume, when a pass yields only the batches
    after the saved step (``len(iterator)``, MXNet's count, is those left). Frameworks
    restore their own count of the batches taken and stop at ``len()``, so both agree
    (NOTE [whole-epoch len]). ``state_dict()`` / ``load_state_dict()`` are the
    iterator's: a loaded state continues with exactly the record ids (and augmentation
    draws) that came next. The state holds no rank of its own to keep apart: every rank
    is at the same step, so the one state a framework saves (rank 0's) restores every
    rank.

    Use it directly (Lightning's ``train_dataloader()``, Accelerate, a plain loop), or in
    ``DataLoader(..., batch_size=None)`` / ``StatefulDataLoader(..., batch_size=None)``
    with ``num_workers=0``: the iterator decodes in its own threads, and a worker process
    would read a copy of this rank's whole shard, so DataLoader workers are refused.

    Args:
        iterator: an ``ImageRecordIter`` (or ``DALIImageRecordIter``), built where the
            process group is up (a LightningDataModule's ``setup()``), or given
            ``part_index``/``num_parts``.
        device: where :func:`to_torch` puts the batches (None: where they are).
        label_dtype: passed to :func:`to_torch`.
        check_world: refuse to iterate when torch.distributed is initialised with another
            rank or world size than the iterator's shard (an iterator built before the
            process group reads the whole dataset on every rank). Set False where ranks
            share data on purpose (e.g. tensor-parallel groups given ``num_parts``).

    Raises:
        RuntimeError: on iteration, from a DataLoader worker, under a DataLoader that
            ``accelerator.prepare`` re-shards, or (``check_world``) with a shard that is
            not torch.distributed's rank.
    """

    def __init__(
        self,
        iterator: Any,
        *,
        device: torch.device | str | None = None,
        label_dtype: torch.dtype | None = None,
        check_world: bool = True,
    ) -> None:
        super().__init__()
        self.iterator = iterator
        self.device = device
        self.label_dtype = label_dtype
        self.check_world = check_world

    def __len__(self) -> int:
        """The whole epoch's batch count on this rank, also in an epoch resumed midway.

        It is the step number that ends the epoch being iterated (or, between epochs, the
        next one): a framework that counts the batches it took, restores that count from
        its checkpoint and stops at ``len()`` (Lightning) takes exactly the rest of the
        epoch. ``len(self.iterator)`` is the batches left (NOTE [whole-epoch len]).
        """
        it = self.iterator
        sampler = getattr(it, "sampler", None)
        if sampler is None:  # not a positioned iterator: its own count
            return len(it)
        # the state's epoch: the one the next batch comes from (after an ended epoch, the next)
        return sampler.steps_in_epoch(int(it.state_dict()["epoch"]))

    def __iter__(self) -> EpochPass:
        # Checked here, not in the generator: every rank of an Accelerate dispatcher
        # creates the iterator, only rank 0 would ever run a generator's body.
        self._check_worker()
        _check_not_resharded()
        if self.check_world:
            self._check_world()
        iter(self.iterator)  # the next epoch, if the last one ended
        return EpochPass(self)

    def state_dict(self) -> dict[str, Any]:
        """The iterator's position: the next batch to yield (an opaque dict)."""
        return self.iterator.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (the iterator refuses one that does not fit)."""
        self.iterator.load_state_dict(state)

    def close(self) -> None:
        """Stop the iterator's threads and close its records."""
        self.iterator.close()

    def __enter__(self) -> TorchBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_worker(self) -> None:
        worker = get_worker_info()
        if worker is not None:
            raise RuntimeError(
                f"TorchBatches is being iterated in DataLoader worker {worker.id} of "
                f"{worker.num_workers}: the iterator decodes in its own threads and is "
                "already this rank's shard, so each worker would read all of it; use "
                "num_workers=0 (raise preprocess_threads for more decode threads)"
            )

    def _check_world(self) -> None:
        dist = sys.modules.get("torch.distributed")
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return
        rank, size = dist.get_rank(), dist.get_world_size()
        mine = (
            getattr(self.iterator, "part_index", rank),
            getattr(self.iterator, "num_parts", size),
        )
        if mine != (rank, size):
            raise RuntimeError(
                f"the iterator reads part {mine[0]} of {mine[1]}, but torch.distributed is "
                f"rank {rank} of {size}: build it after the process group is initialised "
                "(in a LightningDataModule's setup() or train_dataloader(), after "
                "Accelerator()), or pass part_index/num_parts; check_world=False if the "
                "ranks share data on purpose"
            )


class EpochPass(Iterator[TorchBatch]):
    """One pass over a :class:`TorchBatches`: the rest of its iterator's current epoch.

    Stateful, for torchdata's ``StatefulDataLoader``, which saves the state of
    ``iter(dataset)`` along with the dataset's: a state taken after the epoch's last batch,
    before the pass has ended, resumes with that pass, empty, as torchdata does for a
    map-style dataset; its next pass is the next epoch (NOTE [whole-epoch len]).
    """

    def __init__(self, owner: TorchBatches) -> None:
        self.owner = owner
        self.ended = False  # the epoch's last batch has been yielded

    def __iter__(self) -> EpochPass:
        return self

    def __next__(self) -> TorchBatch:
        if self.ended:
            raise StopIteration
        it = self.owner.iterator
        batch = next(it)  # its StopIteration ends the pass
        if batch.step + 1 >= _end_step(it, batch.epoch):
            # The epoch's last batch. Frameworks that know len() (Lightning) stop asking
            # here and call iter() for the next epoch; end this epoch now, so that iter()
            # starts the next one and a state saved now says so.
            _end_epoch(it)
            self.ended = True
        return to_torch(batch, self.owner.device, self.owner.label_dtype)

    def state_dict(self) -> dict[str, Any]:
        """Whether the pass has yielded its epoch's last batch."""
        return {"ended": self.ended}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue a pass from :meth:`state_dict` (the position is the dataset's state)."""
        self.ended = bool(state.get("ended", False))


def _end_step(it: Any, epoch: int) -> int:
    """The step number that ends ``epoch`` (a resumed epoch's steps do not start at 0)."""
    sampler = getattr(it, "sampler", None)
    return sampler.steps_in_epoch(epoch) if sampler is not None else len(it)


def _end_epoch(it: Any) -> None:
    """Take the end of the epoch whose last batch was just yielded."""
    try:
        next(it)
    except StopIteration:
        return
    raise RuntimeError(f"{type(it).__name__} yielded more batches than its len() ({len(it)})")


# NOTE [whole-epoch len]
# What len() means after a resume. The frameworks keep their own count of the batches
# taken, save it in their checkpoints with ours, and compare it with len():
# * Lightning restores batch_idx (its batch progress) to k and the fetcher's count with it,
#   and ends the epoch when the count reaches num_training_batches, read from len() when
#   the loader is set up (before or after our state is loaded: estimated_stepping_batches
#   sets it up before). With len() = the batches left it stopped after left - k batches,
#   dropping k whenever k < left.
# * torchdata's StatefulDataLoader restores _num_yielded = k and warns once it passes the
#   len() it saved; a user's progress bar or `epoch = step // len(loader)` (Accelerate's
#   usual loop) counts from k too.
# So TorchBatches.len() is the step number that ends the epoch, sampler.steps_in_epoch(e):
# the whole epoch's batch count, with the steps of a resumed epoch numbered as in an
# uninterrupted one (first_step .. end), and the framework's k equals the iterator's
# first step. ImageRecordIter's own len() (MXNet's: what this pass yields) stays the
# batches left. Resuming mid-epoch on another world size or batch size renumbers the
# steps (first_step = consumed // the new global batch) while the framework keeps its
# old k: there, resume from an epoch boundary.
# The epoch boundary: a pass ends its iterator's epoch as it yields the last batch (so
# Lightning, which stops asking at len(), gets the next epoch from iter()), and a state
# taken then says (epoch + 1, 0). Lightning, restored there, starts the next epoch: right.
# torchdata restores the pass it was in, which for a map-style dataset yields nothing
# more; EpochPass keeps that "ended" in the state torchdata saves for iter(dataset), so a
# StatefulDataLoader's first pass after such a state is empty here too, and a loop
# `for epoch in range(saved_epoch, epochs)` trains each epoch once.

# NOTE [sharded once]
# The iterator is already this rank's shard. accelerator.prepare(DataLoader(TorchBatches))
# shards an IterableDataset a second time: by default rank 0 alone iterates it and splits
# each of its batches among the ranks (DataLoaderDispatcher), so the other ranks' shards
# are never read; with dispatch_batches=False each rank keeps every n-th item of its own
# shard (IterableDatasetShard, which also needs a batch_size, which batch_size=None lacks).
# Both are wrapped around the dataset without telling it, so the only trace is the caller:
# when iteration starts, the few frames above it are looked at for those two classes.
_RESHARDERS = {"DataLoaderDispatcher", "IterableDatasetShard"}


def _check_not_resharded(depth: int = 12) -> None:
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return
        owner = frame.f_locals.get("self")
        kind = type(owner)
        if kind.__name__ in _RESHARDERS and kind.__module__.startswith("accelerate"):
            raise RuntimeError(
                f"TorchBatches is being iterated through Accelerate's {kind.__name__}: "
                "accelerator.prepare() was given a DataLoader around it and would shard "
                "it again (recio already gives each rank its own part); pass the "
                "TorchBatches itself (prepare hands it back unchanged) or the DataLoader "
                "unprepared, with device=accelerator.device"
            )
        frame = frame.f_back
