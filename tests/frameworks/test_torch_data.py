"""recio.frameworks.torch_data: tensor batches without a copy, DataLoader(batch_size=None),
torchdata's StatefulDataLoader round trip, the epoch end where a consumer stops at len(), and the
refusals (DataLoader workers, a shard that is not torch.distributed's rank)."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from recio.frameworks.torch_data import TorchBatch, TorchBatches, to_torch  # noqa: E402
from recio.pipeline.iterator import ImageRecordIter  # noqa: E402
from tests.test_dist import FakeProcessGroup  # noqa: E402

pytestmark = pytest.mark.needs_native

BATCH = 8  # the small shapes file holds 96 images: 12 batches an epoch


def make_iter(rec: str, **kw) -> ImageRecordIter:
    settings = dict(
        path_imgrec=rec, data_shape=(3, 16, 16), batch_size=BATCH, shuffle=True, seed=5,
        rand_crop=True, rand_mirror=True, resize=20, preprocess_threads=1,
    )  # fmt: skip
    return ImageRecordIter(**{**settings, **kw})


def ids_of(batches) -> list[list[int]]:
    return [b.index.tolist() for b in batches]


def test_to_torch_shares_the_batch_memory(shapes):
    with make_iter(shapes["small"]) as it:
        batch = next(iter(it))
        tb = to_torch(batch)
        assert isinstance(tb, TorchBatch)
        assert tb.data.data_ptr() == batch.data.ctypes.data  # no copy
        assert tb.label.data_ptr() == batch.label.ctypes.data
        assert tb.data.shape == (BATCH, 3, 16, 16) and tb.data.dtype == torch.float32
        assert tb.index.tolist() == batch.index.tolist() and tb.index.dtype == torch.int64
        assert (tb.pad, tb.epoch, tb.step) == (0, 0, 0)
        longs = to_torch(batch, device="cpu", label_dtype=torch.long)
        assert longs.label.dtype == torch.long
        assert longs.label.tolist() == batch.label.astype(np.int64).tolist()


def test_dataloader_batch_size_none_yields_the_iterators_batches(shapes):
    with make_iter(shapes["small"]) as it:
        want = [ids_of(it) for _ in range(2)]
    with make_iter(shapes["small"]) as it:
        batches = TorchBatches(it)
        loader = torch.utils.data.DataLoader(batches, batch_size=None)
        assert len(loader) == len(batches) == 12
        got = [[b.index.tolist() for b in loader] for _ in range(2)]
        first = next(iter(loader))
    assert got == want and want[0] != want[1]  # two epochs, reshuffled
    assert isinstance(first, TorchBatch) and first.epoch == 2  # the third epoch


def test_the_next_iteration_starts_the_next_epoch_after_len_batches(shapes):
    # Lightning's fetcher takes len() batches and never asks for the StopIteration.
    with make_iter(shapes["small"]) as it:
        want = [ids_of(it) for _ in range(2)]
    with make_iter(shapes["small"]) as it:
        batches = TorchBatches(it)
        got = [ids_of(itertools.islice(iter(batches), len(batches))) for _ in range(2)]
        assert next(iter(batches)).epoch == 2
    assert got == want


def test_len_is_the_whole_epoch_also_when_resumed_midway(shapes):
    # Frameworks restore their own count of the batches taken (5) and stop at len().
    with make_iter(shapes["small"]) as it:
        batches = TorchBatches(it)
        head = list(itertools.islice(iter(batches), 5))
        state = batches.state_dict()
    with make_iter(shapes["small"]) as it:
        batches = TorchBatches(it)
        batches.load_state_dict(state)
        assert len(batches) == 12 and len(it) == 7  # the iterator's own: the batches left
        rest = list(batches)
        assert [b.step for b in head + rest] == list(range(12))
        assert len(batches) == 12  # between epochs: the next one's
        assert [b.step for b in batches] == list(range(12))


@pytest.mark.parametrize("taken", [5, 12])  # mid-epoch; after the epoch's last batch
def test_stateful_dataloader_round_trip(shapes, taken):
    from torchdata.stateful_dataloader import StatefulDataLoader

    with make_iter(shapes["small"]) as it:
        loader = StatefulDataLoader(TorchBatches(it), batch_size=None)
        stream = itertools.chain(loader, loader)  # two epochs
        head = [next(stream) for _ in range(taken)]
        state = loader.state_dict()
        rest = [(b.epoch, b.step, b.index.tolist(), b.data.clone()) for b in stream]
    assert len(head) + len(rest) == 24

    with make_iter(shapes["small"]) as it:
        resumed = StatefulDataLoader(TorchBatches(it), batch_size=None)
        resumed.load_state_dict(state)
        assert len(resumed) == 12  # the whole epoch's, as torchdata counts from `taken`
        # the pass the state was taken in, then the next: after the epoch's last batch
        # that pass is empty, as torchdata's own for a map-style dataset
        passes = [[(b.epoch, b.step, b.index.tolist(), b.data.clone()) for b in resumed]]
        passes.append([(b.epoch, b.step, b.index.tolist(), b.data.clone()) for b in resumed])
    got = passes[0] + passes[1]
    assert len(passes[0]) == 12 - taken and len(passes[1]) == 12
    assert [g[:3] for g in got] == [r[:3] for r in rest]
    assert got[0][:2] == ((0, taken) if taken < 12 else (1, 0))
    for g, r in zip(got, rest, strict=True):
        torch.testing.assert_close(g[3], r[3], rtol=0, atol=0)  # the same crops and flips


def test_dataloader_workers_are_refused(shapes):
    with make_iter(shapes["small"]) as it:
        loader = torch.utils.data.DataLoader(TorchBatches(it), batch_size=None, num_workers=1)
        with pytest.raises(RuntimeError, match="DataLoader worker 0 of 1.*num_workers=0"):
            next(iter(loader))


def test_a_shard_that_is_not_the_process_groups_rank_is_refused(shapes, monkeypatch):
    with make_iter(shapes["small"]) as before:  # built before the process group was up
        monkeypatch.setitem(sys.modules, "torch.distributed", FakeProcessGroup(1, 2))
        with pytest.raises(RuntimeError, match="part 0 of 1, but torch.distributed is rank 1 of 2"):
            iter(TorchBatches(before))
        assert len(next(iter(TorchBatches(before, check_world=False))).index) == BATCH
    with make_iter(shapes["small"]) as after:  # no part_index given: the process group's
        assert (after.part_index, after.num_parts) == (1, 2)
        assert len(TorchBatches(after)) == 6
        ids = {i for b in TorchBatches(after) for i in b.index.tolist()}
    with make_iter(shapes["small"], part_index=0, num_parts=2) as other:
        other_ids = {i for b in other for i in b.index.tolist()}
    assert not ids & other_ids and ids | other_ids == set(range(96))


def test_a_hostile_state_is_refused_naming_the_field(shapes):
    from recio.errors import ResumeStateError, ResumeStateTypeError

    with make_iter(shapes["small"]) as it:
        batches = TorchBatches(it)
        with pytest.raises(ResumeStateTypeError, match="cannot resume from a float"):
            batches.load_state_dict(1.5)
        with pytest.raises(ResumeStateTypeError, match="'epoch' is True"):
            batches.load_state_dict({"epoch": True, "consumed": 0})
        with pytest.raises(ResumeStateError, match="no 'epoch' field"):
            batches.load_state_dict({})
        got = ids_of(batches)
    with make_iter(shapes["small"]) as fresh:
        assert got == ids_of(fresh)  # the refusals moved nothing
