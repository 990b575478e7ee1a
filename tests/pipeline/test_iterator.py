"""ImageRecordIter: batches, sharding, shuffle, exact resume, bad data, threads, memory and
the batch buffers."""

import gc
import io
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from PIL import Image

from recio.dali.source import RecioSource
from recio.errors import DecodeError, RecordIOError
from recio.pipeline.iterator import BatchBuffers, ImageRecordIter
from recio.records.format import IRHeader, pack
from recio.records.reader import RecordFile, read_batch
from recio.records.recordio import MXIndexedRecordIO
from recio.records.spans import Spans
from recio.sampling.sampler import Sampler

N_RECORDS = 37


def jpeg(rng, width, height, quality=90) -> bytes:
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx * 255 // width, yy * 255 // height, (xx + yy) % 256], -1)
    noise = rng.integers(0, 20, (height, width, 3))
    img = np.clip(base + noise, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(img).save(out, format="JPEG", quality=quality)
    return out.getvalue()


def make_rec(path, n=N_RECORDS, corrupt=(), seed=0):
    """n records, id = 1000 + key, label = key % 5, images of varying size."""
    rng = np.random.default_rng(seed)
    rec, idx = str(path / "data.rec"), str(path / "data.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(n):
            body = jpeg(rng, int(rng.integers(40, 120)), int(rng.integers(40, 120)))
            if key in corrupt:
                body = body[: len(body) // 3]  # truncated JPEG
            w.write_idx(key, pack(IRHeader(0, float(key % 5), 1000 + key, 0), body))
    return rec


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("iter"))


def make_iter(rec, **kw):
    args = dict(data_shape=(3, 32, 32), batch_size=8, preprocess_threads=2)
    args.update(kw)
    return ImageRecordIter(rec, **args)


_EARLIER: set[threading.Thread] = set()


def recio_threads():
    """recio's threads, but not those still winding down from earlier tests."""
    return [t for t in threading.enumerate() if t.name.startswith("recio-") and t not in _EARLIER]


def test_batches_shapes_labels_ids(rec):
    with make_iter(rec, dtype="uint8", layout="NHWC") as it:
        batches = list(it)
    assert len(batches) == len(it) == 5  # ceil(37 / 8), padded
    for b in batches:
        assert b.data.shape == (8, 32, 32, 3) and b.data.dtype == np.uint8
        assert b.label.shape == (8,) and b.label.dtype == np.float32
    ids = np.concatenate([b.index[: 8 - b.pad] for b in batches])
    assert ids.tolist() == [1000 + k for k in range(N_RECORDS)]
    labels = np.concatenate([b.label[: 8 - b.pad] for b in batches])
    assert labels.tolist() == [k % 5 for k in range(N_RECORDS)]
    assert batches[-1].pad == 3 and sum(b.pad for b in batches) == 3
    assert batches[0].data.std() > 5  # real pixels, not zeros


def test_nchw_float_normalised(rec):
    kw = dict(mean_r=100.0, mean_g=100.0, mean_b=100.0, std_r=50.0, std_g=50.0, std_b=50.0)
    with make_iter(rec, dtype="float32", **kw) as it:
        b = next(iter(it))
    with make_iter(rec, dtype="uint8") as it:
        raw = next(iter(it))
    assert b.data.shape == (8, 3, 32, 32) and b.data.dtype == np.float32
    np.testing.assert_allclose(b.data, (raw.data.astype(np.float32) - 100) / 50, atol=0.05)


def test_epochs_shuffle_and_seed(rec):
    def epoch_ids(it):
        return np.concatenate([b.index[: 8 - b.pad] for b in it]).tolist()

    with make_iter(rec, shuffle=True, seed=5) as a, make_iter(rec, shuffle=True, seed=5) as b:
        a0, a1 = epoch_ids(a), epoch_ids(a)  # iterating again starts the next epoch
        b0 = epoch_ids(b)
        b.reset()  # MXNet style
        b1 = epoch_ids(b)
    assert sorted(a0) == sorted(a1) == list(range(1000, 1000 + N_RECORDS))
    assert a0 != a1 and a0 == b0 and a1 == b1
    with make_iter(rec, shuffle=True, seed=6) as c:
        assert epoch_ids(c) != a0


@pytest.mark.parametrize("last_batch", ["pad", "discard", "rollover"])
def test_sharding_equal_counts_disjoint(rec, last_batch):
    shards = []
    for part in range(3):
        with make_iter(
            rec, part_index=part, num_parts=3, shuffle=True, last_batch=last_batch, batch_size=4
        ) as it:
            batches = list(it)
            shards.append(batches)
    assert len({len(s) for s in shards}) == 1  # equal number of batches on every rank
    ids = [i for s in shards for b in s for i in b.index[: 4 - b.pad].tolist()]
    if last_batch != "rollover":
        assert len(ids) == len(set(ids))
    if last_batch == "pad":
        assert sorted(ids) == list(range(1000, 1000 + N_RECORDS))


class KV:
    rank, num_workers = 1, 2


def test_kv_and_environment_sharding(rec, monkeypatch):
    with make_iter(rec, kv=KV()) as it:
        assert (it.part_index, it.num_parts) == (1, 2)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with make_iter(rec) as it:
        assert (it.part_index, it.num_parts) == (1, 3)


def test_exact_resume_mid_epoch(rec):
    kw = dict(shuffle=True, seed=11, random_resized_crop=True, rand_mirror=True, dtype="uint8")
    with make_iter(rec, **kw) as it:
        full = [(b.index.copy(), b.data.copy()) for _ in range(2) for b in it]
    with make_iter(rec, **kw) as it:
        first = []
        for b in it:
            first.append((b.index.copy(), b.data.copy()))
            if len(first) == 3:
                break
        state = it.state_dict()
    assert state["epoch"] == 0 and state["step"] == 3
    with make_iter(rec, **kw) as resumed:
        resumed.load_state_dict(state)
        rest = [(b.index.copy(), b.data.copy()) for b in resumed]
        rest += [(b.index.copy(), b.data.copy()) for b in resumed]
    got = first + rest
    assert len(got) == len(full)
    for (ids_a, data_a), (ids_b, data_b) in zip(full, got, strict=True):
        np.testing.assert_array_equal(ids_a, ids_b)
        np.testing.assert_array_equal(data_a, data_b)


def test_state_from_another_config_is_refused(rec):
    with make_iter(rec) as it:
        state = it.state_dict()
    with make_iter(rec, seed=1) as it, pytest.raises(ValueError, match="seed=0.*seed=1"):
        it.load_state_dict(state)


@pytest.fixture(scope="module")
def bad_rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("bad"), n=20, corrupt=(3, 9))


def test_on_error_skip_keeps_batches_full(bad_rec):
    with make_iter(bad_rec, on_error="skip") as it:
        batches = list(it)
        stats = it.stats
    assert stats.skipped == 2 and set(stats.bad_records) == {1003, 1009}
    ids = [i for b in batches for i in b.index[: 8 - b.pad].tolist()]
    assert 1003 not in ids and 1009 not in ids and len(ids) == 20
    # replaced by the next valid image of the batch
    assert batches[0].index[3] == 1004 and batches[1].index[1] == 1010
    np.testing.assert_array_equal(batches[0].data[3], batches[0].data[4])


def test_on_error_replace_zero_fills(bad_rec):
    with make_iter(bad_rec, on_error="replace", dtype="uint8") as it:
        b = next(iter(it))
        assert it.stats.replaced == 1
    assert b.index[3] == 1003 and not b.data[3].any() and b.data[4].any()


def test_on_error_raise_names_file_offset_id(bad_rec):
    with make_iter(bad_rec, on_error="raise") as it, pytest.raises(DecodeError) as info:
        list(it)
    message = str(info.value)
    assert "1003" in message and bad_rec in message and "at byte" in message
    assert not recio_threads(), [t.name for t in recio_threads()]


def test_truncated_rec_raises_in_training_loop(tmp_path):
    """A .rec cut inside its last record: under raise the training loop gets the error; under
    skip the record is counted as bad and the epoch delivers the others."""
    rec = make_rec(tmp_path, n=12)
    data = open(rec, "rb").read()
    open(rec, "wb").write(data[:-100])
    with pytest.raises(RecordIOError, match=r"data.crc was taken of a \d+-byte .rec"):
        make_iter(rec)  # by default the checksum sidecar refuses the changed file at open
    with (
        make_iter(rec, verify_checksums=False, on_error="raise") as it,
        pytest.raises(RecordIOError, match="ends inside"),
    ):
        for _ in it:
            pass
    with make_iter(rec, verify_checksums=False, on_error="skip", batch_size=4) as it:
        ids = [i for b in it for i in b.index[: 4 - b.pad].tolist()]
        assert it.stats.skipped == 1 and "ends inside" in it.stats.bad_records[11]  # by its key
    assert 1011 not in ids and len(ids) == 12  # the slot refilled by the next good image


def _rec_with_bad_header(tmp_path, bad: bytes) -> tuple[str, int]:
    """8 records, the 6th (key 5) replaced by ``bad``; returns the .rec and its offset."""
    rec, idx = str(tmp_path / "short.rec"), str(tmp_path / "short.idx")
    rng = np.random.default_rng(1)
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(8):
            body = pack(IRHeader(0, float(key), key, 0), jpeg(rng, 40, 40))
            w.write_idx(key, body if key != 5 else bad)
    return rec, MXIndexedRecordIO(idx, rec, "r").idx[5]


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (b"tiny", "record of 4 bytes has no image header"),  # shorter than an IRHeader
        (struct.pack("<IfQQ", 1000, 0.0, 5, 0) + b"abc", "IRHeader says 1000 labels"),
    ],
)
def test_unreadable_record_header_is_a_bad_record(tmp_path, bad, words):
    """A record whose IRHeader cannot be read is handled by on_error like a bad image:
    raise names the file, offset and record; skip counts it and delivers the others."""
    rec, offset = _rec_with_bad_header(tmp_path, bad)
    with make_iter(rec, on_error="raise") as it, pytest.raises(RecordIOError) as info:
        list(it)
    message = str(info.value)
    assert words in message and rec in message and f"at byte {offset}" in message
    assert "(record 5)" in message
    assert not recio_threads(), [t.name for t in recio_threads()]
    with make_iter(rec, batch_size=8) as it:
        (batch,) = list(it)
        assert 5 not in batch.index.tolist() and sorted(set(batch.index.tolist())) == [
            0, 1, 2, 3, 4, 6, 7
        ]  # fmt: skip
        assert it.stats.skipped == 1 and words in it.stats.bad_records[5]
    # The DALI stage's source (no DALI needed) reads the same batches: the same outcomes.
    raising = RecioSource(RecordFile(rec), Sampler(8, 8, shuffle=False), on_error="raise")
    with pytest.raises(RecordIOError, match=f"{words}.*at byte {offset}"):
        raising.batch(0, 0)
    _, _, meta = RecioSource(RecordFile(rec), Sampler(8, 8, shuffle=False)).batch(0, 0)
    assert 5 not in meta[:, 0].tolist() and meta[5, 4] == 5  # the bad record, by its key


def test_label_width_beyond_the_records_labels_is_an_error(rec):
    with make_iter(rec, label_width=2) as it, pytest.raises(ValueError, match="label_width=2"):
        next(iter(it))


def test_close_from_another_thread_while_the_consumer_waits(tmp_path):
    """The consumer blocked in next() learns that the iterator was closed, not that the
    pipeline 'ended unexpectedly'; a later next() says the same."""
    rec = make_rec(tmp_path, n=400)  # 50 batches: the close lands mid-epoch
    errors: list[BaseException] = []

    def consume():
        try:
            for _ in it:
                time.sleep(0.002)
        except ValueError as exc:
            errors.append(exc)

    for _ in range(3):  # the close lands while the consumer waits, or between batches
        it = make_iter(rec, batch_size=8, prefetch_buffer=1)
        consumer = threading.Thread(target=consume)
        consumer.start()
        time.sleep(0.02)
        it.close()
        consumer.join(10)
        assert not consumer.is_alive()
        with pytest.raises(ValueError, match="was closed"):
            next(it)
    assert errors and all("was closed" in str(e) for e in errors), errors
    assert not recio_threads(), [t.name for t in recio_threads()]


@pytest.mark.parametrize("where", ["local", "remote"])
def test_threads_stop_on_close_and_when_dropped(rec, memfs, where):
    """A remote file's reader and decode threads stop on close() and when the iterator is
    dropped; a local file's batches are queued on the pool by the consumer itself (NOTE
    [queued batches]), which starts no thread at all."""
    url = rec if where == "local" else _upload(rec, "memory://threads/data.rec", {})
    _EARLIER.update(threading.enumerate())
    it = make_iter(url)
    next(iter(it))
    assert bool(recio_threads()) == (where == "remote"), recio_threads()
    it.close()
    assert not recio_threads()
    it = make_iter(url)
    next(iter(it))
    del it
    gc.collect()
    deadline = time.time() + 5
    while recio_threads() and time.time() < deadline:
        time.sleep(0.05)
    assert not recio_threads()


def test_kept_batches_are_never_overwritten(rec):
    with make_iter(rec, dtype="uint8", prefetch_buffer=1) as it:
        kept = list(it)
        copies = [b.data.copy() for b in kept]
        for _ in it:  # another epoch while the first one's batches are held
            pass
    for b, c in zip(kept, copies, strict=True):
        np.testing.assert_array_equal(b.data, c)


def test_buffers_reuse_only_what_nobody_holds():
    buffers = BatchBuffers((2, 3), np.uint8, limit=4)
    a = buffers.take()
    a[...] = 1
    b = buffers.take()  # `a` is held: a new buffer
    assert buffers.allocated == 2 and not np.shares_memory(a, b)
    kept = a[0]  # a slice keeps the view alive
    del a
    gc.collect()
    c = buffers.take()
    assert buffers.allocated == 3 and kept.tolist() == [1, 1, 1]
    del kept, c
    d = buffers.take()
    assert buffers.reused == 1 and buffers.allocated == 3
    assert d.flags.writeable and d.flags.c_contiguous


def test_buffers_forget_what_the_consumer_keeps_beyond_the_limit():
    buffers = BatchBuffers((4,), np.float32, limit=2)
    held = [buffers.take() for _ in range(5)]
    assert buffers.allocated == 5 and len(buffers._slots) == 2
    for i, h in enumerate(held):
        h[...] = i
    assert [float(h[0]) for h in held] == [0, 1, 2, 3, 4]


def test_the_iterator_reuses_batch_arrays_across_epochs(tmp_path):
    rec = make_rec(tmp_path, n=48)
    with ImageRecordIter(rec, (3, 24, 24), 4, dtype="uint8", prefetch_buffer=2) as it:
        for _ in range(4):
            for _batch in it:
                pass
        # 48 batches; in flight at once: two decoding, one queued, one the consumer holds
        assert it.buffers.allocated <= 4
        assert it.buffers.reused >= 44


def test_kept_batches_and_tensors_are_never_overwritten(tmp_path):
    torch = pytest.importorskip("torch")
    rec = make_rec(tmp_path, n=32)
    with ImageRecordIter(
        rec, (3, 24, 24), 4, dtype="uint8", prefetch_buffer=1, shuffle=True, rand_mirror=True
    ) as it:
        first = list(it)
        tensors = [torch.from_numpy(b.data) for b in first[:3]]
        copies = [b.data.copy() for b in first]
        tensor_copies = [t.clone() for t in tensors]
        del first[:3]  # only the tensors hold these three now
        for _ in range(3):  # more epochs while the first one's batches and tensors are held
            for _batch in it:
                pass
        assert it.buffers.reused > 0
    for b, c in zip(first, copies[3:], strict=True):
        np.testing.assert_array_equal(b.data, c)
    for t, c in zip(tensors, tensor_copies, strict=True):
        assert torch.equal(t, c)


@pytest.mark.slow
def test_no_memory_growth_over_50_epochs(tmp_path):
    code = textwrap.dedent(
        f"""
        import resource, sys
        from recio.pipeline.iterator import ImageRecordIter
        it = ImageRecordIter({make_rec(tmp_path, n=16)!r}, (3, 24, 24), 4, shuffle=True,
                             rand_mirror=True, preprocess_threads=2)
        def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for epoch in range(50):
            for b in it: pass
            if epoch == 9: base = rss()
        growth = rss() - base
        print("growth_kb", growth)
        sys.exit(0 if growth < 8000 else 1)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ctrl_c_stops_promptly(tmp_path):
    rec = make_rec(tmp_path, n=64)
    code = textwrap.dedent(
        f"""
        import sys
        from recio.pipeline.iterator import ImageRecordIter
        it = ImageRecordIter({rec!r}, (3, 64, 64), 4, preprocess_threads=2, prefetch_buffer=2)
        print("ready", flush=True)
        try:
            while True:
                for b in it: pass
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("iterator did not stop within 10 s of Ctrl-C")
    assert "interrupted" in out and proc.returncode != 0


def test_argument_checks(rec):
    with pytest.raises(ValueError, match="data_shape"):
        make_iter(rec, data_shape=(32, 32))
    with pytest.raises(ValueError, match="dtype"):
        make_iter(rec, dtype="int32")
    with pytest.raises(ValueError, match="on_error"):
        make_iter(rec, on_error="ignore")
    with pytest.raises(ValueError, match="uint8"):
        make_iter(rec, dtype="uint8", mean_r=1.0)
    with pytest.raises(TypeError, match="unsupported"):
        make_iter(rec, rotate_list="0,90")
    with pytest.raises(FileNotFoundError, match="x.lst"):
        make_iter(rec, path_imglist="x.lst")
    with pytest.raises(FileNotFoundError):
        make_iter(os.path.join(os.path.dirname(rec), "missing.rec"))


def test_torch_zero_copy_and_dataloader(rec):
    torch = pytest.importorskip("torch")
    with make_iter(rec, dtype="float32") as it:
        b = next(iter(it))
        t = torch.from_numpy(b.data)
        assert t.data_ptr() == b.data.ctypes.data
        t2 = torch.from_dlpack(b.data)
        assert t2.data_ptr() == b.data.ctypes.data

    class Batches(torch.utils.data.IterableDataset):
        def __init__(self, it):
            self.it = it

        def __iter__(self):
            for b in self.it:
                yield b.data, b.label

    with make_iter(rec) as it:
        loader = torch.utils.data.DataLoader(Batches(it), batch_size=None, num_workers=0)
        shapes = [tuple(x.shape) for x, _ in loader]
    assert shapes == [(8, 3, 32, 32)] * 5


def _upload(rec: str, url: str, options: dict) -> str:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **options)
    fs.put_file(rec, path)
    fs.put_file(rec[:-4] + ".idx", path[:-4] + ".idx")
    return url


def _ids_and_pixels(it):
    return [(b.index.copy(), b.data.copy()) for b in it]


@pytest.mark.s3
def test_iterator_from_s3_matches_local(rec, s3_server, s3_prefix):
    url = _upload(rec, f"{s3_prefix}/data.rec", s3_server)
    kw = dict(shuffle=True, seed=2, random_resized_crop=True, rand_mirror=True, dtype="uint8")
    with make_iter(rec, **kw) as local, make_iter(url, storage_options=s3_server, **kw) as remote:
        want, got = _ids_and_pixels(local), _ids_and_pixels(remote)
        state_remote = remote.state_dict()
    assert state_remote["epoch"] == 1
    for (ids_a, px_a), (ids_b, px_b) in zip(want, got, strict=True):
        np.testing.assert_array_equal(ids_a, ids_b)
        np.testing.assert_array_equal(px_a, px_b)


@pytest.mark.hdfs
def test_iterator_from_hdfs_matches_local(rec, hdfs_prefix):
    url = _upload(rec, f"{hdfs_prefix}/data.rec", {})
    with make_iter(rec, shuffle=True, seed=1) as local, make_iter(url, shuffle=True, seed=1) as r:
        for a, b in zip(_ids_and_pixels(local), _ids_and_pixels(r), strict=True):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("mode", ["global", "block"])
def test_remote_next_epoch_is_fetched_ahead_and_matches_local(rec, memfs, mode):
    url = _upload(rec, f"memory://look/{mode}.rec", {})
    kw = dict(shuffle=True, seed=4, shuffle_mode=mode, dtype="uint8")
    with make_iter(rec, **kw) as local, make_iter(url, **kw) as remote:
        want = [_ids_and_pixels(local) for _ in range(3)]
        got = [_ids_and_pixels(remote)]
        # epoch 0 done: epoch 1's first fetches were started behind it, and the reader went
        # on with them into epoch 1 (NOTE [epoch overlap]), whose own fetches, all issued,
        # started epoch 2's
        deadline = time.monotonic() + 30
        while remote._lookahead.key != (2, 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert remote._lookahead.key == (2, 0)
        got += [_ids_and_pixels(remote) for _ in range(2)]
        # resuming elsewhere drops the lookahead and still reads the right records
        state = {**remote.state_dict(), "epoch": 1, "consumed": 2 * remote.batch_size}
        remote.load_state_dict(state)
        resumed = _ids_and_pixels(remote)
    for epoch_want, epoch_got in zip(want, got, strict=True):
        for (ids_a, px_a), (ids_b, px_b) in zip(epoch_want, epoch_got, strict=True):
            np.testing.assert_array_equal(ids_a, ids_b)
            np.testing.assert_array_equal(px_a, px_b)
    assert [ids.tolist() for ids, _ in resumed] == [ids.tolist() for ids, _ in want[1][2:]]
    assert remote._lookahead.key is None  # closed with the iterator


@pytest.mark.parametrize("mode", ["global", "block"])
def test_next_epochs_first_fetch_starts_with_this_epochs_last(rec, memfs, mode):
    """Epoch 1's first window is in flight as soon as epoch 0's last fetch is issued:
    here (one fetch job an epoch) while 18 of epoch 0's 19 batches are still to come."""
    url = _upload(rec, f"memory://early/{mode}.rec", {})
    kw = dict(shuffle=True, seed=4, shuffle_mode=mode, batch_size=2)
    with make_iter(url, **kw) as remote:
        epoch = iter(remote)
        next(epoch)
        deadline = time.monotonic() + 10
        while remote._lookahead.key != (1, 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert remote._lookahead.key == (1, 0)
        assert len(list(epoch)) == len(remote) - 1 == 18
        assert len(list(remote)) == 19  # the next epoch, from what was fetched ahead


# --- face-recognition layouts: metadata records are not samples --------------------------


@pytest.mark.parametrize("header", [True, False])
def test_face_layout_epoch_gives_every_image_once(tmp_path, header):
    from tests.faces import write_faces

    face = write_faces(tmp_path, (5, 1, 7, 3, 4), header=header, label_only_at=(3,))
    kw = dict(data_shape=(3, 24, 24), batch_size=4, shuffle=True, last_batch="discard")
    with make_iter(face.rec, **kw) as it:
        assert it.layout.num_samples == face.num_images == 20
        for _ in range(2):
            ids, labels = [], []
            for batch in it:
                ids += batch.index.tolist()
                labels += batch.label.tolist()
            assert sorted(ids) == list(range(1, 21))  # no duplicates, no metadata record
            assert labels == face.classes()[np.array(ids) - 1].tolist()  # label[0]: the class
        assert it.stats.decoded == 40 and it.stats.bad_records == {}
        assert it.stats.skipped == 0 and len(it) == 5
        if header:
            assert it.layout.num_classes == 5
            assert it.layout.identities.tolist() == face.ranges().tolist()


def test_face_layout_ranks_share_the_images(tmp_path):
    from tests.faces import write_faces

    face = write_faces(tmp_path, (6, 1, 5))
    seen = []
    for rank in range(2):
        with make_iter(face.rec, batch_size=3, shuffle=True, part_index=rank, num_parts=2) as it:
            seen += [i for b in it for i in b.index.tolist()]
    assert sorted(seen) == list(range(1, 13))


def _rec_with_comments(path, magic_in: set[int]) -> str:
    """12 JPEG records; those in ``magic_in`` carry the RecordIO magic at a 4-aligned byte
    of their payload (in a JPEG comment), so that the writer splits them into frames."""
    from recio.records.format import MAGIC_BYTES

    rng = np.random.default_rng(4)
    rec, idx = str(path / "c.rec"), str(path / "c.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(12):
            pixels = jpeg(rng, 48, 40)
            img = Image.open(io.BytesIO(pixels))
            probe = io.BytesIO()
            img.save(probe, format="JPEG", quality=90, comment=b"Q" * 8)
            at = probe.getvalue().index(b"Q" * 8) + 24  # in the payload, after the IRHeader
            pad = -at % 4
            text = b"Q" * pad + (MAGIC_BYTES if key in magic_in else b"QQQQ") + b"Q" * (4 - pad)
            body = io.BytesIO()
            img.save(body, format="JPEG", quality=90, comment=text)
            w.write_idx(key, pack(IRHeader(0, float(key), 1000 + key, 0), body.getvalue()))
    return rec


def test_multi_frame_records_decode_as_single_frame_ones(tmp_path):
    """A record the writer split at a magic comes back whole (its batch's images a list,
    not spans of the map): the same pixels, labels and ids as without the split."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    split = _rec_with_comments(tmp_path / "a", {2, 9})
    plain = _rec_with_comments(tmp_path / "b", set())
    with RecordFile(split) as rf:
        for k in range(12):
            lrec = struct.unpack_from("<I", rf.source.buffer, int(rf.offsets[k]) + 4)[0]
            assert (lrec >> 29 == 1) == (k in (2, 9)), k  # cflag 1: a first frame of several
        assert isinstance(read_batch(rf, np.arange(4), 1).images, list)
        assert isinstance(read_batch(rf, np.arange(4, 8), 1).images, Spans)
    with make_iter(split, batch_size=4) as a, make_iter(plain, batch_size=4) as b:
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.data, y.data)
            assert x.index.tolist() == y.index.tolist() and x.label.tolist() == y.label.tolist()
        assert a.stats.decoded == 12 and not a.stats.bad_records


def test_global_shuffle_fetch_jobs_are_half_the_read_ahead(rec, memfs, monkeypatch):
    """NOTE [adaptive fetch]: the larger a global-shuffle job, the denser its records and
    the fuller its requests; half the memory bound, or 32 MB where not adaptive."""
    import recio.pipeline.remote
    from recio.storage import FetchOptions

    made, real = [], recio.pipeline.remote.Prefetcher
    monkeypatch.setattr(
        recio.pipeline.remote,
        "Prefetcher",
        lambda *a, **k: made.append(k["group_bytes"]) or real(*a, **k),
    )
    url = _upload(rec, "memory://jobs/data.rec", {})
    with make_iter(url, shuffle=True, fetch=FetchOptions(read_ahead=40 << 20)) as it:
        assert len(list(it)) == 5
    assert made and set(made) == {20 << 20}
    made.clear()
    with make_iter(url, shuffle=True, fetch=FetchOptions(adaptive=False)) as it:
        assert len(list(it)) == 5
    assert made and set(made) == {32 << 20}


def test_remote_batches_are_one_native_call_and_exact_only_where_needed(
    tmp_path, memfs, monkeypatch
):
    """NOTE [remote batches on the pool]: a remote batch is decoded from its records'
    extents in one native call, as a local one from its map; only a batch holding a record
    of several frames goes the exact way (read_batch), and the pixels are local's."""
    import recio.pipeline.read_decode

    split = _rec_with_comments(tmp_path, {2, 9})
    url = _upload(split, "memory://native/split.rec", {})
    exact, real = [], recio.pipeline.read_decode.read_batch

    def spy(records, positions, *args, **kwargs):
        exact.append((records.url == url, tuple(sorted(int(p) for p in positions))))
        return real(records, positions, *args, **kwargs)

    monkeypatch.setattr(recio.pipeline.read_decode, "read_batch", spy)
    with make_iter(split, batch_size=4) as local, make_iter(url, batch_size=4) as remote:
        for x, y in zip(local, remote, strict=True):
            np.testing.assert_array_equal(x.data, y.data)
            assert x.index.tolist() == y.index.tolist() and x.label.tolist() == y.label.tolist()
        assert remote.stats.decoded == 12 and not remote.stats.bad_records
    # remote: the two batches with a split record whole; local: those records alone (the
    # remote decode threads may have gone on into epoch 1's first batches, read alike:
    # NOTE [epoch overlap])
    assert sorted(set(exact)) == [(False, (2,)), (False, (9,)), (True, (0, 1, 2, 3)),
                             (True, (8, 9, 10, 11))]  # fmt: skip


@pytest.mark.parametrize("where", ["local", "remote"])
def test_batches_come_in_order_with_a_failure_in_its_turn(tmp_path, memfs, where):
    """A remote file's decode threads take batches in turn (NOTE [two decode threads]), a
    local file's are queued on the pool several at a time (NOTE [queued batches]); the
    consumer gets them in step order all the same, and a failure after the batches before
    it."""
    rec = make_rec(tmp_path, n=150, corrupt=(61,))
    if where == "remote":
        rec = _upload(rec, "memory://order/data.rec", {})
    plan = Sampler(150, 2, shuffle=True, seed=3)
    with make_iter(rec, batch_size=2, shuffle=True, seed=3, on_error="skip") as it:
        epoch = iter(it)
        batches = [next(epoch)]
        decoders = {"recio-decoder", "recio-decoder-2"} <= {t.name for t in threading.enumerate()}
        assert decoders == (where == "remote")
        batches += list(epoch)
    assert [b.step for b in batches] == list(range(75))
    for b in batches:
        want = [1000 + int(p) for p in plan.plan(0, b.step).positions]
        if 1061 in want:
            assert b.index.tolist() == [k for k in want if k != 1061] * 2
        else:
            assert b.index.tolist() == want
    bad_step = next(s for s in range(75) if 61 in plan.plan(0, s).positions.tolist())
    with make_iter(rec, batch_size=2, shuffle=True, seed=3, on_error="raise") as it:
        got = []
        with pytest.raises(DecodeError, match="record id 1061"):
            for b in it:
                got.append(b.step)
    assert got == list(range(bad_step))


def test_ctrl_c_with_batches_queued_leaves_the_iterator_closable(tmp_path):
    """A KeyboardInterrupt in the consumer while a local file's batches are queued on the
    pool (NOTE [queued batches]) reaches the training loop; close() then waits for the
    queued batches, stops the pool and returns (no hang, no write after it)."""
    import _thread

    rec = make_rec(tmp_path, n=64)
    it = make_iter(rec, batch_size=2)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt):
        timer.start()
        for _ in range(10_000):
            for _batch in it:
                pass
    timer.join()
    queued = list(it._pipeline._queued) if it._pipeline is not None else []
    outs = [entry.out for entry in queued if entry.out is not None]
    t0 = time.monotonic()
    it.close()
    assert time.monotonic() - t0 < 10
    assert it.pool._closed and it._pipeline is None
    snap = [o.copy() for o in outs]
    time.sleep(0.05)
    assert all(np.array_equal(s, o) for s, o in zip(snap, outs, strict=True))
    with pytest.raises(ValueError, match="was closed"):
        next(it)


@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_mean_and_std_are_of_the_red_green_and_blue_channels(tmp_path, order):
    """mean_r/std_r are the red channel's wherever channel_order puts it (as mean_img's)."""
    img = np.zeros((8, 8, 3), np.uint8)
    img[..., 0], img[..., 2] = 200, 40  # red and blue
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    rec, idx = str(tmp_path / "r.rec"), str(tmp_path / "r.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for k in range(4):
            w.write_idx(k, pack(IRHeader(0, 0.0, k, 0), buf.getvalue()))
    kw = dict(mean_r=100, std_r=2, mean_b=10, channel_order=order)
    with ImageRecordIter(rec, (3, 8, 8), 4, **kw) as it:
        data = next(iter(it)).data
    red, blue = (0, 2) if order == "RGB" else (2, 0)
    assert np.allclose(data[:, red], (200 - 100) / 2)
    assert np.allclose(data[:, blue], 40 - 10)
    assert np.allclose(data[:, 1], 0)


def _epochs_of(rec, epochs=2, **kw):
    """Every batch (pixels, labels, ids, pad, epoch, step) of ``epochs`` epochs, and the stats."""
    with make_iter(rec, **kw) as it:
        got = [
            (b.data.copy(), np.array(b.label), b.index.copy(), b.pad, b.epoch, b.step)
            for _ in range(epochs)
            for b in it
        ]
        return got, it.stats


@pytest.mark.parametrize(
    "kw",
    [
        {"last_batch": "pad", "num_parts": 2, "part_index": 1},
        {"last_batch": "rollover", "batch_size": 5},
        {"last_batch": "discard", "num_parts": 3, "part_index": 0, "batch_size": 4},
        {"bad": True, "on_error": "skip"},
        {"bad": True, "on_error": "replace", "last_batch": "rollover", "batch_size": 6},
    ],
)
def test_lean_batches_are_the_general_paths_batches(rec, bad_rec, monkeypatch, kw):
    """A local file's common batches take the lean path (NOTE [lean batches]: a slice of
    the epoch's order, reused small arrays, no status array to count); every batch, label,
    id and count is the general path's, for shards, last-batch policies and bad images."""
    from recio.pipeline.read_decode import BatchReader
    from recio.sampling.sampler import EpochSlices

    kw = dict(kw)
    data = bad_rec if kw.pop("bad", False) else rec
    kw.update(shuffle=True, seed=4, rand_mirror=True, random_resized_crop=True)
    lean_calls = []
    submit_local = BatchReader.submit_local

    def counted(self, *args):
        lean_calls.append(1)
        return submit_local(self, *args)

    monkeypatch.setattr(BatchReader, "submit_local", counted)
    lean, lean_stats = _epochs_of(data, **kw)
    assert lean_calls  # the lean path ran
    monkeypatch.setattr(EpochSlices, "get", lambda self, step: None)  # every batch general
    lean_calls.clear()
    general, general_stats = _epochs_of(data, **kw)
    assert not lean_calls
    assert len(lean) == len(general)
    for a, b in zip(lean, general, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert lean_stats == general_stats
