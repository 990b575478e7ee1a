"""recio.records.shards: lists, patterns, globs and STEM read as one dataset, in the iterator, the
map-style dataset, the CLI and over S3."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from recio.cli import main as cli
from recio.errors import IndexMismatchError, IndexWarning, RecordIOError
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.config import IterConfig
from recio.pipeline.iterator import ImageRecordIter
from recio.records.batch import read_batch
from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack, unpack
from recio.records.recordio import MXIndexedRecordIO
from recio.records.samples import INSIGHTFACE, detect_layout
from recio.records.shards import ShardedRecords, expand_shards, open_records
from recio.records.spans import Spans
from tests.faces import write_faces
from tests.images import encode

COUNTS = (10, 7, 13)  # records per shard: 30 in all, ids 1000.. in shard order


def write_records(rec: str, ids, seed: int = 0) -> str:
    """Records with id ``i`` and label ``i % 5``, images of sizes drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for i in ids:
            image = encode(int(rng.integers(36, 80)), int(rng.integers(36, 80)), seed=i)
            w.write_idx(i, pack(IRHeader(0, float(i % 5), 1000 + i, 0), image))
    return rec


def write_shards(folder, counts=COUNTS, stem: str = "train") -> list[str]:
    """``STEM-K-of-N.rec`` shards holding keys 0.. in shard order."""
    urls, first = [], 0
    for k, n in enumerate(counts):
        rec = str(folder / f"{stem}-{k:05d}-of-{len(counts):05d}.rec")
        urls.append(write_records(rec, range(first, first + n), seed=k))
        first += n
    return urls


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[str]:
    return write_shards(tmp_path_factory.mktemp("shards"))


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> str:
    """One file with the shards' records, in the same order (and the same bytes)."""
    folder = tmp_path_factory.mktemp("whole")
    rec = str(folder / "whole.rec")
    rng_ids = [(k, range(sum(COUNTS[:k]), sum(COUNTS[: k + 1]))) for k in range(len(COUNTS))]
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for k, ids in rng_ids:
            rng = np.random.default_rng(k)
            for i in ids:
                image = encode(int(rng.integers(36, 80)), int(rng.integers(36, 80)), seed=i)
                w.write_idx(i, pack(IRHeader(0, float(i % 5), 1000 + i, 0), image))
    return rec


def ids_of(records, positions) -> list[int]:
    return [unpack(p)[0].id for p in records.read_many(positions)]


ALL_IDS = list(range(1000, 1000 + sum(COUNTS)))


# --- naming the shards -------------------------------------------------------------------


def test_list_pattern_glob_and_stem_name_the_same_shards(shards):
    folder = os.path.dirname(shards[0])
    stem = os.path.join(folder, "train")
    forms = [
        shards,
        f"{stem}-{{00000..00002}}-of-00003.rec",
        f"{stem}-*-of-00003.rec",
        os.path.join(folder, "*.rec"),
        stem,
        [shards[0], f"{stem}-0000[12]-of-00003.rec"],  # a list of a URL and a glob
        f"{stem}-{{00000,00001,00002}}-of-00003.rec",
    ]
    for form in forms:
        assert expand_shards(form) == shards, form
        with open_records(form) as records:
            assert isinstance(records, ShardedRecords)
            assert ids_of(records, range(len(records))) == ALL_IDS
    for form in forms[:4]:  # a list, a pattern, globs: RecordFile opens one file only
        with pytest.raises(TypeError, match="open_records opens a set of shards"):
            RecordFile(form)


def test_a_plain_rec_name_is_one_file_and_costs_no_lookup(shards, monkeypatch):
    import recio.storage

    monkeypatch.setattr(recio.storage, "exists", lambda *a: pytest.fail("looked up"))
    assert expand_shards("s3://bucket/no/such.rec") == ["s3://bucket/no/such.rec"]
    monkeypatch.undo()
    with open_records(shards[1]) as records:
        assert type(records) is RecordFile  # the single-file path, unchanged
        assert len(records) == COUNTS[1]


def test_bad_patterns_are_clear_errors(shards, tmp_path):
    folder = os.path.dirname(shards[0])
    with pytest.raises(FileNotFoundError, match="no shards match.*nothing-"):
        expand_shards(os.path.join(folder, "nothing-*.rec"))
    with pytest.raises(FileNotFoundError, match="nor .*nope-\\*-of-\\*.rec shards"):
        expand_shards(os.path.join(folder, "nope"))
    with pytest.raises(ValueError, match="neither a range"):
        expand_shards(os.path.join(folder, "train-{abc}.rec"))
    with pytest.raises(ValueError, match="named twice"):
        expand_shards([shards[0], shards[0]])
    with pytest.raises(ValueError, match="empty list"):
        expand_shards([])
    with pytest.raises(FileNotFoundError, match=r"train-00003-of-00003\.rec"):
        open_records(os.path.join(folder, "train-{00000..00003}-of-00003.rec"))
    with pytest.raises(ValueError, match="3 shards but 2 .idx"):
        open_records(shards, [s[:-4] + ".idx" for s in shards[:2]])


def test_a_missing_shard_of_a_numbered_set_is_named(tmp_path):
    urls = write_shards(tmp_path, (3, 3, 3, 3))
    os.remove(urls[2])
    for spec in (str(tmp_path / "train"), str(tmp_path / "train-*-of-00004.rec")):
        with pytest.raises(FileNotFoundError, match=r"3 of 4 shards.*train-00002-of-00004\.rec"):
            expand_shards(spec)
    assert len(expand_shards(str(tmp_path / "train-*.rec"))) == 3  # a glob of what is there


def test_a_shard_without_its_idx_is_named(tmp_path):
    urls = write_shards(tmp_path)
    os.remove(urls[1][:-4] + ".idx")
    with pytest.raises(FileNotFoundError, match=f"shard {urls[1]} has no .idx.*recio index"):
        open_records(urls)


def test_a_shard_whose_idx_does_not_match_is_named(tmp_path):
    urls = write_shards(tmp_path)
    idx0, idx1 = (u[:-4] + ".idx" for u in urls[:2])
    kept0, kept1 = open(idx0).read(), open(idx1).read()
    open(idx1, "w").write(kept0)  # shard 0's index (10 records) beside shard 1 (7, smaller)
    with pytest.raises(IndexMismatchError, match=rf"{idx1} .*past the end of {urls[1]}"):
        open_records(urls, verify_checksums=False)  # (by default its sidecar refuses it too)
    open(idx1, "w").write(kept1)
    open(idx0, "w").write(kept1)  # shard 1's offsets, all inside shard 0: not its records
    with pytest.warns(IndexWarning, match=rf"{idx0}.*{urls[0]}"):
        open_records(urls, verify_checksums=False).close()


# --- the union ---------------------------------------------------------------------------


def test_records_are_numbered_globally_in_shard_order(shards):
    with open_records(shards) as records:
        assert len(records) == sum(COUNTS)
        assert records.starts.tolist() == [0, 10, 17, 30]
        assert records.keys.tolist() == list(range(30))
        assert records.locate(10) == (1, 0) and records.locate(29) == (2, 12)
        assert unpack(records.read(12))[0].id == 1012
        for k, shard in enumerate(records.shards):
            assert np.shares_memory(shard.offsets, records.offsets)  # one copy of the index
            lo = records.starts[k]
            assert (records.lengths[lo : lo + len(shard)] == shard.lengths).all()
        text = records.describe(12, 1012)
        assert text == (
            f"record id 1012 (record 12: record 2 of shard 1, at byte "
            f"{records.shards[1].offsets[2]} of {shards[1]})"
        )
        with pytest.raises(IndexError, match="record 30 of"):
            records.read(30)


def test_split_gives_per_shard_groups_with_their_slots(shards):
    with open_records(shards) as records:
        positions = np.array([25, 3, 12, 0, 29, 10])
        groups = records.split(positions)
        assert [g.shard for g in groups] == [0, 1, 2]
        assert [g.slots.tolist() for g in groups] == [[1, 3], [2, 5], [0, 4]]
        assert [g.positions.tolist() for g in groups] == [[3, 0], [2, 0], [8, 12]]
        assert all(g.records is records.shards[g.shard] for g in groups)
        (one,) = records.split([11, 12, 16])
        assert one.shard == 1 and one.slots.tolist() == [0, 1, 2]
        with pytest.raises(IndexError):
            records.split([0, -1])


def test_read_batch_over_shards_is_the_per_shard_reads_in_slot_order(shards, whole):
    positions = np.array([25, 3, 12, 0, 29, 10, 5])
    with open_records(shards) as union, RecordFile(whole) as one:
        got, want = read_batch(union, positions, 1), read_batch(one, positions, 1)
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.labels, want.labels)
        assert isinstance(got.images, list)  # spans of three maps
        assert [bytes(a) for a in got.images] == [bytes(b) for b in want.images]
        within = read_batch(union, [11, 13, 12], 1)  # one shard: its own Spans
        assert isinstance(within.images, Spans)
        assert within.ids.tolist() == [1011, 1013, 1012]


def test_pickled_union_reopens(shards):
    with open_records(shards) as records:
        copy = pickle.loads(pickle.dumps(records))
    with copy:
        assert copy.url == records.url and ids_of(copy, [0, 29]) == [1000, 1029]


def test_remote_shards_are_read_concurrently_as_one(shards, memfs):
    urls = []
    for url in shards:
        name = os.path.basename(url)
        memfs.put_file(url, f"/sh/{name}")
        memfs.put_file(url[:-4] + ".idx", f"/sh/{name[:-4]}.idx")
        urls.append(f"memory:///sh/{name}")
    assert expand_shards("memory:///sh/train") == urls
    assert expand_shards("memory:///sh/train-*.rec") == urls
    with open_records("memory:///sh/train-{00000..00002}-of-00003.rec") as records:
        assert not records.is_local
        order = np.random.default_rng(0).permutation(len(records))
        assert ids_of(records, order) == [1000 + int(i) for i in order]
        assert read_batch(records, order[:9], 1).ids.tolist() == (1000 + order[:9]).tolist()
        assert records._pool is not None  # the groups went to their shards at once


# --- what reads a dataset ----------------------------------------------------------------


def make_iter(spec, **kw):
    args = dict(data_shape=(3, 32, 32), batch_size=4, preprocess_threads=2)
    args.update(kw)
    return ImageRecordIter(spec, **args)


def epoch(it):
    return [(b.index.copy(), b.data.copy(), b.pad) for b in it]


@pytest.mark.needs_native
@pytest.mark.parametrize("mode", ["global", "block"])
def test_an_epoch_over_shards_gives_every_record_once(shards, mode):
    with make_iter(os.path.dirname(shards[0]) + "/train", shuffle=True, shuffle_mode=mode) as it:
        batches = epoch(it)
    ids = np.concatenate([i[: len(i) - pad] for i, _, pad in batches])
    assert sorted(ids.tolist()) == ALL_IDS


@pytest.mark.needs_native
def test_shards_iterate_exactly_as_one_file_with_their_records(shards, whole):
    kw = dict(shuffle=True, rand_mirror=True, rand_crop=True, seed=3)
    with make_iter(shards, **kw) as union, make_iter(whole, **kw) as one:
        for _ in range(2):  # two epochs: the same order, windows and pixels
            for (a, x, _), (b, y, _) in zip(epoch(union), epoch(one), strict=True):
                np.testing.assert_array_equal(a, b)
                np.testing.assert_array_equal(x, y)


@pytest.mark.needs_native
@pytest.mark.parametrize("num_parts", [2, 3])
def test_ranks_share_the_shards(shards, num_parts):
    seen, steps = [], set()
    for rank in range(num_parts):
        with make_iter(shards, shuffle=True, part_index=rank, num_parts=num_parts) as it:
            batches = epoch(it)
        steps.add(len(batches))
        seen.append(set(np.concatenate([i[: len(i) - pad] for i, _, pad in batches]).tolist()))
    assert len(steps) == 1  # every rank the same number of batches
    assert sorted(set().union(*seen)) == ALL_IDS
    assert sum(len(s) for s in seen) == len(ALL_IDS)  # disjoint


@pytest.mark.needs_native
def test_resume_mid_epoch_over_shards(shards):
    kw = dict(shuffle=True, rand_crop=True, seed=5)
    with make_iter(shards, **kw) as it:
        full = epoch(it)
    with make_iter(shards, **kw) as it:
        for _ in range(3):
            next(it)
        state = it.state_dict()
    assert state["num_records"] == sum(COUNTS)
    with make_iter(shards, **kw) as it:
        it.load_state_dict(state)
        rest = epoch(it)
    assert len(rest) == len(full) - 3
    for (a, x, _), (b, y, _) in zip(rest, full[3:], strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(x, y)


@pytest.mark.needs_native
def test_record_dataset_over_shards_is_the_one_file_dataset(shards, whole):
    from recio.pipeline.config import Normalize

    kw = dict(normalize=Normalize(dtype="uint8"), label_dtype="int64", rand_mirror=True)
    union = RecordDataset(os.path.dirname(shards[0]) + "/train-*.rec", (3, 32, 32), **kw)
    one = RecordDataset(whole, (3, 32, 32), **kw)
    assert len(union) == len(one) == sum(COUNTS)
    picks = [29, 0, 12, 10, 9, 17]
    got, want = union.__getitems__(picks), one.__getitems__(picks)
    np.testing.assert_array_equal(got.images, want.images)
    np.testing.assert_array_equal(got.labels, want.labels)
    copy = pickle.loads(pickle.dumps(union))  # as a DataLoader worker gets it
    np.testing.assert_array_equal(copy[12][0], want.images[2])
    union.close(), one.close(), copy.close()


def test_config_takes_lists_and_refuses_other_things(shards):
    config = IterConfig(shards, (3, 8, 8), 2)
    assert config.path_imgrec == tuple(shards)
    with pytest.raises(TypeError, match="path_imgrec must be"):
        IterConfig([shards[0], 3], (3, 8, 8), 2)
    with pytest.raises(TypeError, match="path_imgrec must be"):
        IterConfig(None, (3, 8, 8), 2)


def test_insightface_shards_concatenate_their_samples(tmp_path):
    a = write_faces(tmp_path, (2, 3), name="faces-00000-of-00002")
    b = write_faces(tmp_path, (4, 1, 1), name="faces-00001-of-00002")
    with open_records(str(tmp_path / "faces")) as records:
        layout = detect_layout(records)
        with RecordFile(a.rec) as ra, RecordFile(b.rec) as rb:
            la, lb = detect_layout(ra), detect_layout(rb)
        assert layout.kind == INSIGHTFACE and layout.num_samples == 5 + 6
        assert layout.samples.tolist() == la.samples.tolist() + (lb.samples + len(ra)).tolist()
        assert layout.num_classes == 5
        assert layout.identities.tolist() == a.ranges().tolist() + b.ranges().tolist()
        assert "2 shards" in layout.describe()
    write_faces(tmp_path, (2, 2), header=False, name="faces-00001-of-00002")
    records = open_records(str(tmp_path / "faces"))
    with records, pytest.raises(RecordIOError, match="different layouts.*faces-00000"):
        detect_layout(records)


# --- the command line ------------------------------------------------------------------


def test_info_summarises_each_shard_and_the_total(shards, capsys):
    stem = os.path.dirname(shards[0]) + "/train"
    assert cli(["info", stem]) == 0
    out = capsys.readouterr().out
    for k, url in enumerate(shards):
        assert f"== shard {k} of 3: {url}" in out
    blocks = out.split("== ")
    assert "records            7" in blocks[2]  # shard 1's own count
    total = blocks[-1]
    assert total.startswith(f"total: {stem}")
    assert "shards             3" in total and "records            30" in total
    assert "plain (3 shards): 30 images" in total
    assert cli(["info", *shards]) == 0  # a list gives the same
    assert capsys.readouterr().out == out.replace(f"total: {stem}", f"total: {' '.join(shards)}")


def test_info_verify_and_index_over_shards_with_a_bad_one(tmp_path, capsys):
    urls = write_shards(tmp_path)
    os.remove(urls[2][:-4] + ".idx")
    pattern = str(tmp_path / "train-{00000..00002}-of-00003.rec")
    assert cli(["verify", pattern]) == 0
    assert "OK 3 shards: 30 records" in capsys.readouterr().out
    assert cli(["index", pattern]) == 1  # shards 0 and 1 agree: refused, shard 2 written
    captured = capsys.readouterr()
    assert f"wrote {urls[2][:-4]}.idx: 13 records" in captured.out
    assert "2 of 3 shards refused" in captured.err
    with RecordFile(urls[1]) as records:
        second = int(records.offsets[1])
    data = bytearray(open(urls[1], "rb").read())
    data[second : second + 4] = b"\0\0\0\0"  # the magic of its second record
    open(urls[1], "wb").write(bytes(data))
    assert cli(["info", pattern]) == 1
    out = capsys.readouterr().out
    assert f"shards_with_problems  1 (first: {urls[1]})" in out
    assert cli(["verify", pattern]) == 1
    assert f"FAIL 1 of 3 shards damaged (first: {urls[1]})" in capsys.readouterr().out
    assert cli(["info", pattern, "--idx", "x.idx"]) == 2
    assert "--idx names one .idx, but 3 shards" in capsys.readouterr().err


# --- S3 ----------------------------------------------------------------------------------


@pytest.mark.s3
@pytest.mark.needs_native
def test_shards_on_s3_read_as_the_local_ones(shards, s3_server, s3_prefix):
    import fsspec

    fs, root = fsspec.core.url_to_fs(s3_prefix, **s3_server)
    for url in shards:
        name = os.path.basename(url)
        fs.put_file(url, f"{root}/{name}")
        fs.put_file(url[:-4] + ".idx", f"{root}/{name[:-4]}.idx")
    remote = [f"{s3_prefix}/{os.path.basename(u)}" for u in shards]
    for form in (f"{s3_prefix}/train-{{00000..00002}}-of-00003.rec", f"{s3_prefix}/train-*.rec"):
        assert expand_shards(form, s3_server) == remote
    assert expand_shards(f"{s3_prefix}/train", s3_server) == remote
    kw = dict(shuffle=True, rand_crop=True, seed=1)
    pattern = f"{s3_prefix}/train-{{00000..00002}}-of-00003.rec"
    with make_iter(pattern, storage_options=s3_server, **kw) as it, make_iter(shards, **kw) as ref:
        for (a, x, _), (b, y, _) in zip(epoch(it), epoch(ref), strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(x, y)
