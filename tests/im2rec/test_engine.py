"""im2rec on a real Dask cluster (2 worker processes): byte-identical shards, resuming after
a damaged output or a killed run, progress from the workers, output to S3."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recio import im2rec
from recio.im2rec import engine
from recio.im2rec.optimize import DEFAULT_RESTART
from recio.im2rec.transcode import EncodeOptions
from recio.records.format import ListEntry, format_lst_line

from .conftest import BAD, make_list, run

distributed = pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[2]
SHARDS = 3
NAMES = [f"data-{k:05d}-of-{SHARDS:05d}.{ext}" for k in range(SHARDS) for ext in ("rec", "idx")]


@pytest.fixture(scope="module")
def address():
    """The scheduler of a local cluster of 2 worker processes, one thread each."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def outputs(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in NAMES}


def report_of(folder: Path) -> dict:
    return json.loads((folder / "data.report.json").read_text())


def threaded(tmp_path: Path, root: Path, *options: object) -> Path:
    """The single-machine run with the same list, shards and options (folder 'threads')."""
    folder = tmp_path / "threads"
    folder.mkdir()
    prefix = make_list(folder, root, "data", *options)
    code = run("--shards", SHARDS, "--resize", 32, "--num-thread", 2, prefix, root)
    assert code in (im2rec.EXIT_OK, im2rec.EXIT_SKIPPED)
    return folder


def on_cluster(folder: Path, root: Path, address: str, *extra: object) -> int:
    args = ("--engine", "dask", "--address", address, "--shards", SHARDS, "--resize", 32)
    return run(*args, *extra, folder / "data", root)


def copy_list(src: Path, name: str) -> Path:
    folder = src.parent / name
    folder.mkdir()
    (folder / "data.lst").write_bytes((src / "data.lst").read_bytes())
    return folder


def test_cluster_shards_are_the_threaded_runs_bytes_skips_included(tmp_path, bad_folder, address):
    threads = threaded(tmp_path, bad_folder)
    cluster = copy_list(threads, "cluster")
    assert on_cluster(cluster, bad_folder, address) == im2rec.EXIT_SKIPPED
    assert outputs(cluster) == outputs(threads)
    mine, theirs = report_of(cluster), report_of(threads)
    assert mine["status"] == "complete" and mine["written"] == theirs["written"] > 0
    assert mine["skipped"] == theirs["skipped"]  # the same files, in list order
    assert {Path(s["path"]).name for s in mine["skipped"]} == BAD
    assert mine["bytes"] == theirs["bytes"]
    shards = mine["shards"]
    assert [s["status"] for s in shards] == ["complete"] * SHARDS
    assert sum(s["written"] for s in shards) == mine["written"]
    # converted by the cluster's worker processes, not here
    assert all(int(s["worker"].rsplit(":", 1)[1]) != os.getpid() for s in shards)
    # each shard holds its slice of the list (entries k, k + 3, ...) less the skipped files
    lines = (cluster / "data.lst").read_text().splitlines()
    skipped = {s["index"] for s in mine["skipped"]}
    for k in range(SHARDS):
        keys = [int(line.split("\t")[0]) for line in lines[k::SHARDS]]
        idx = (cluster / f"data-{k:05d}-of-{SHARDS:05d}.idx").read_text().splitlines()
        assert [int(line.split("\t")[0]) for line in idx] == [i for i in keys if i not in skipped]


def test_rerun_reuses_verified_shards_and_redoes_the_rest(tmp_path, images, address):
    threads = threaded(tmp_path, images)
    cluster = copy_list(threads, "cluster")
    assert on_cluster(cluster, images, address) == im2rec.EXIT_OK
    stamps = {n: (cluster / n).stat().st_mtime_ns for n in NAMES}
    rec1 = cluster / NAMES[2]
    rec1.write_bytes(rec1.read_bytes() + b"\0\0\0\0")  # shard 1: a .rec its record disowns
    (cluster / "data-00002-of-00003.shard.json").unlink()  # shard 2: no record
    assert on_cluster(cluster, images, address) == im2rec.EXIT_OK
    shards = report_of(cluster)["shards"]
    assert [s["status"] for s in shards] == ["reused", "complete", "complete"]
    assert (cluster / NAMES[0]).stat().st_mtime_ns == stamps[NAMES[0]]
    assert (cluster / NAMES[1]).stat().st_mtime_ns == stamps[NAMES[1]]
    assert (cluster / NAMES[4]).stat().st_mtime_ns != stamps[NAMES[4]]
    assert outputs(cluster) == outputs(threads)
    # other options make other shards: nothing is reused
    assert run("--engine", "dask", "--address", address, "--shards", SHARDS, "--resize", 30,
               cluster / "data", images) == im2rec.EXIT_OK  # fmt: skip
    assert [s["status"] for s in report_of(cluster)["shards"]] == ["complete"] * SHARDS


@pytest.mark.slow  # a command with its own cluster, killed, then a rerun
def test_killed_run_resumes_without_redoing_finished_shards(tmp_path, images, address):
    root = tmp_path / "images"
    root.mkdir()
    for path in images.rglob("*.jpg"):
        target = root / path.relative_to(images)
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(path.read_bytes())
    threads = threaded(tmp_path, root)
    cluster = copy_list(threads, "cluster")
    # shard 2's first image becomes a pipe no one writes: its task blocks reading it
    stuck = root / (cluster / "data.lst").read_text().splitlines()[2].split("\t")[-1]
    data = stuck.read_bytes()
    stuck.unlink()
    os.mkfifo(stuck)
    command = [sys.executable, "-m", "recio.im2rec", "--engine", "dask", "--num-thread", 2,
               "--shards", SHARDS, "--resize", 32, "--quiet", cluster / "data", root]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(list(map(str, command)), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    done = [cluster / f"data-{k:05d}-of-{SHARDS:05d}.shard.json" for k in (0, 1)]

    def shard_2_writing() -> bool:  # it starts once a worker is free: after shard 0 or 1
        return bool(list(cluster.glob(".data-00002-of-00003.*.partial")))

    try:
        deadline = time.monotonic() + 90
        while not (all(p.exists() for p in done) and shard_2_writing()):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "shards 0 and 1 never finished, or 2 never began"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its scheduler and its workers
        proc.wait()
        proc.stderr.close()
    assert not (cluster / NAMES[4]).exists() and not (cluster / "data.report.json").exists()
    assert shard_2_writing()  # the killed writer's temporaries stay until the next run
    stamps = {n: (cluster / n).stat().st_mtime_ns for n in NAMES[:4]}
    stuck.unlink()
    stuck.write_bytes(data)
    assert on_cluster(cluster, root, address) == im2rec.EXIT_OK
    shards = report_of(cluster)["shards"]
    assert [s["status"] for s in shards] == ["reused", "reused", "complete"]
    assert {n: (cluster / n).stat().st_mtime_ns for n in NAMES[:4]} == stamps
    assert outputs(cluster) == outputs(threads)
    assert not list(cluster.glob(".*partial"))  # the killed writers' temporaries are gone


def test_progress_comes_from_the_workers(tmp_path, images, address, monkeypatch):
    events = []
    event = engine._Bar.event
    monkeypatch.setattr(engine._Bar, "event", lambda self, e: (events.append(e), event(self, e)))
    prefix = make_list(tmp_path, images)
    with engine.connect("dask", address) as client:
        report = engine.pack_on_cluster(
            f"{prefix}.lst", str(images), EncodeOptions(resize=24), client=client, shards=4
        )
    assert report.status == "complete" and report.written == 24
    deadline = time.monotonic() + 5
    while len({e[1]["shard"] for e in events}) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # the last events may trail the results
    assert {e[1]["shard"] for e in events} == {0, 1, 2, 3}
    assert all(e[1]["pid"] != os.getpid() for e in events)
    assert max(e[1]["done"] for e in events if e[1]["shard"] == 0) == 6


def test_bar_counts_each_shard_once_and_never_back():
    class Counter:
        n = 0

        def update(self, k):
            self.n += k

    bar = engine._Bar(Counter(), {0: 5, 1: 3})
    bar.event((0.0, {"shard": 0, "done": 2}))
    bar.event((0.0, {"shard": 0, "done": 1}))  # late and older: ignored
    bar.advance(1, 9)  # past its size: its size
    bar.advance(7, 4)  # not a shard of this run
    assert bar.bar.n == 5
    bar.finish(0)
    bar.finish(0)
    assert bar.bar.n == 8


def test_max_errors_on_a_cluster_publishes_no_shard_over_it(tmp_path, bad_folder, address):
    prefix = make_list(tmp_path, bad_folder)
    code = on_cluster(tmp_path, bad_folder, address, "--max-errors", 1)
    assert code == im2rec.EXIT_FAILED
    report = report_of(tmp_path)
    assert report["status"] == "aborted"
    lines = Path(f"{prefix}.lst").read_text().splitlines()
    statuses = []
    for k, shard in enumerate(report["shards"]):
        bad = sum(Path(line.split("\t")[-1]).name in BAD for line in lines[k::SHARDS])
        published = (tmp_path / NAMES[2 * k]).exists()
        statuses.append(shard["status"])
        if bad > 1:  # over what --max-errors leaves a shard: refused, or not started
            assert not published and shard["status"] in ("failed", "cancelled"), shard
        assert published == (shard["status"] == "complete"), shard
    assert set(statuses) - {"complete"}  # some shard refused, or not started


def test_a_shard_converting_when_another_is_refused_is_finished_and_reported(
    tmp_path, bad_folder, address
):
    # shard 0's first two entries are bad: refused at once under --max-errors 1, while
    # shard 1's 150 images are converting on the other worker; Dask cannot stop that task,
    # so it must be waited for and reported as what it is (NOTE [stopping a run])
    good = sorted(p.name for p in bad_folder.iterdir() if p.name not in BAD)
    lines = []
    for k in range(SHARDS * 150):
        path = good[k % len(good)]
        if k in (0, SHARDS):
            path = "empty.jpg" if k == 0 else "text.jpg"
        lines.append(format_lst_line(ListEntry(k, (0.0,), path)))
    (tmp_path / "data.lst").write_text("".join(lines))
    code = on_cluster(tmp_path, bad_folder, address, "--max-errors", 1)
    assert code == im2rec.EXIT_FAILED
    shards = report_of(tmp_path)["shards"]
    assert shards[0]["status"] == "failed" and not (tmp_path / NAMES[0]).exists()
    assert shards[1]["status"] == "complete" and shards[1]["written"] == 150
    for k, shard in enumerate(shards):  # shard 2 may have started before the refusal
        assert (tmp_path / NAMES[2 * k]).exists() == (shard["status"] == "complete"), shard
    time.sleep(0.5)  # nothing still running publishes behind the report
    assert [(tmp_path / NAMES[2 * k]).exists() for k in range(SHARDS)] == [
        s["status"] == "complete" for s in shards
    ]


def test_ctrl_c_on_the_driver_stops_the_shards_not_started(tmp_path, images, address):
    root = tmp_path / "images"
    shutil.copytree(images, root)
    prefix = make_list(tmp_path, root)
    # shards 0 and 1 begin with a pipe: their tasks block reading it, one on each worker,
    # and shard 2 waits for a free worker
    pipes = [
        root / line.split("\t")[-1]
        for line in prefix.with_suffix(".lst").read_text().splitlines()[:2]
    ]
    data = [pipe.read_bytes() for pipe in pipes]
    for pipe in pipes:
        pipe.unlink()
        os.mkfifo(pipe)
    command = [sys.executable, "-m", "recio.im2rec", "--engine", "dask", "--address", address,
               "--shards", SHARDS, "--resize", 32, "--quiet", prefix, root]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(list(map(str, command)), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    writers = []
    try:
        deadline = time.monotonic() + 60
        for pipe in pipes:  # a pipe opens for writing once its task has it open to read
            while True:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, f"no task opened {pipe}"
                try:
                    writers.append(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
                    break
                except OSError:
                    time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == im2rec.EXIT_INTERRUPTED
        assert report_of(tmp_path)["status"] == "interrupted"
    finally:
        proc.kill()
        proc.stderr.close()
        for fd, image in zip(writers, data, strict=False):  # the blocked tasks go on
            os.write(fd, image)
            os.close(fd)
    shard_records = [tmp_path / f"data-{k:05d}-of-{SHARDS:05d}.shard.json" for k in range(3)]
    deadline = time.monotonic() + 30
    while not all(p.exists() for p in shard_records[:2]) and time.monotonic() < deadline:
        time.sleep(0.05)  # the two running tasks finish on the cluster, as Dask runs them
    assert all(p.exists() for p in shard_records[:2])
    time.sleep(1.0)  # time for shard 2 to start, were it going to
    assert not shard_records[2].exists() and not (tmp_path / NAMES[4]).exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--engine", "ray"), "--engine ray is not implemented"),
        (("--address", "tcp://127.0.0.1:1"), "--address names the cluster for --engine"),
        (("--engine", "dask", "--layout", "insightface"), "not with --engine"),
    ],
)
def test_refused_arguments(tmp_path, images, caplog, argv, message):
    prefix = make_list(tmp_path, images)
    assert run(*argv, prefix, images) == im2rec.EXIT_FAILED
    assert message in caplog.text
    assert not list(tmp_path.glob("*.rec"))


def test_without_dask_the_error_says_what_to_install(tmp_path, images, caplog, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    prefix = make_list(tmp_path, images)
    assert run("--engine", "dask", prefix, images) == im2rec.EXIT_FAILED
    assert "--engine dask needs dask.distributed: pip install -e '.[cluster]'" in caplog.text


@pytest.mark.s3
@pytest.mark.slow  # each worker's first S3 client: importing s3fs and botocore
def test_output_to_s3(tmp_path, images, address, s3_server, s3_prefix):
    import fsspec

    threads = threaded(tmp_path, images)
    # one cached client per process (each new one costs a handshake), not one per file
    s3_server = {k: v for k, v in s3_server.items() if k != "skip_instance_cache"}
    options = json.dumps(s3_server)
    argv = ("--engine", "dask", "--address", address, "--shards", SHARDS, "--resize", 32,
            "--output", s3_prefix, "--storage-options", options,
            threads / "data", images)  # fmt: skip
    fs = fsspec.filesystem("s3", **s3_server)
    try:
        assert run(*argv) == im2rec.EXIT_OK
        got = {name: fs.cat_file(f"{s3_prefix}/{name}") for name in NAMES}
        assert got == outputs(threads)
        report = json.loads(fs.cat_file(f"{s3_prefix}/data.report.json"))
        assert [s["status"] for s in report["shards"]] == ["complete"] * SHARDS
        # what a rerun checks, over S3: every shard verifies, and a damaged one does not
        lst = str(threads / "data.lst")
        entries, _ = im2rec.read_list(lst)
        opts = EncodeOptions(resize=32, restart=DEFAULT_RESTART)  # as the command line
        stem = f"{s3_prefix}/data"
        jobs = engine.shard_jobs(lst, entries, str(images), opts, stem, SHARDS,
                                 storage_options=s3_server)  # fmt: skip
        assert all(engine.verified(job) for job in jobs)
        fs.pipe_file(f"{s3_prefix}/{NAMES[3]}", got[NAMES[3]] + b"1\t0\n")
        assert [bool(engine.verified(job)) for job in jobs] == [True, False, True]
    finally:
        fs.rm(s3_prefix, recursive=True)
