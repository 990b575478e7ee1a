"""im2rec on a Dask cluster: each task converts one slice of the ``.lst`` into one shard.

The driver reads and checks the list as the single-machine run does, cuts it into the
slices of NOTE [shard slices] (:mod:`~recio.im2rec.pack`) and submits one task per shard
that is not already done. A task, on any worker, encodes its slice in list order and
writes the shard straight to its URL (local, S3, HDFS, ...) through the same writers as
:func:`~recio.im2rec.pack.pack_list`, so a shard is published only whole, and its bytes are
those of the single-machine run with the same ``--shards``. Workers report progress as
Dask events, which the driver shows in one bar; the shards' records are merged into one
``STEM.report.json``.

NOTE [resumable shards]: after publishing its ``.rec``/``.idx``, a task writes the shard's
record, ``SHARD.shard.json`` beside them (``SHARD`` is the shard's name without ``.rec``):
what it was made from (a digest of its slice, ROOT, the options and the shard geometry),
its counts and skipped files, the ``.rec``'s size and the ``.idx``'s size and SHA-256. A
rerun reuses a shard whose record matches what this run would make from and whose files
check out: the ``.rec`` has the recorded size, the ``.idx`` the recorded bytes, and the
record at its largest offset ends where the ``.rec`` ends (one frame header read). Every
other shard is converted again, replacing what is there. A killed run so loses only the
shards it was converting; their hidden partial files are removed when they are redone.

NOTE [stopping a run]: once a run is over ``--max-errors``, the shards not yet started must
not start, and the ones converting must be let finish: Dask cannot stop a task that is
running (cancelling its future only forgets it), so a shard the driver called cancelled
could still be published after the report was written. The driver so sets a Dask
``Event`` that every task checks before it starts (one not started returns ``None``), and
waits for every task; the report then says of each shard what is on disk. On Ctrl-C the
driver sets the event and cancels, without waiting.

Why Dask and not Ray: see the ``cluster`` extra in ``pyproject.toml``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from .. import storage
from .._install import install_hint
from ..records.format import ListEntry, format_idx_line
from ..records.recordio import MXIndexedRecordIO
from ..storage import remove_partials
from .batches import FramedRuns, batch_stream
from .lists import check_list, read_list_into
from .pack import output_names, shard_slice
from .report import PackReport, TooManyErrors, nothing_written, reported_run
from .transcode import EncodeOptions, make_batch

log = logging.getLogger("recio.im2rec")

ENGINES = ("dask", "ray")
RECORD_VERSION = 1
# a worker sends its shard's progress at most this often (seconds)
_PROGRESS_EVERY = 0.25


@dataclasses.dataclass(frozen=True)
class ShardJob:
    """One task: the slice of the list for one shard, and where the shard goes.

    ``entries`` are the list's entries ``shard``, ``shard + shards``, ... (NOTE [shard
    slices]); ``record`` is the URL of the shard's record (NOTE [resumable shards]);
    ``max_skips`` the skipped files the shard may have before it is refused (``None``: no
    limit); ``topic`` the Dask event topic its progress goes to; ``stop`` the name of the
    Dask ``Event`` that, once set, says not to start (NOTE [stopping a run]).
    """

    list: str
    shard: int
    shards: int
    entries: tuple[ListEntry, ...]
    root: str
    opts: EncodeOptions
    rec: str
    idx: str
    record: str
    key: str
    max_skips: int | None = None
    storage_options: dict[str, Any] | None = None
    topic: str | None = None
    stop: str | None = None


def record_name(rec: str) -> str:
    """The URL of a shard's record: ``SHARD.shard.json`` beside ``SHARD.rec``."""
    return (rec[: -len(".rec")] if rec.endswith(".rec") else rec) + ".shard.json"


def shard_key(
    entries: Sequence[ListEntry], root: str, opts: EncodeOptions, shard: int, shards: int
) -> str:
    """A digest of what a shard is made from: its slice, ROOT, options and geometry."""
    h = hashlib.sha256()
    head = {"version": RECORD_VERSION, "root": root, "shard": shard, "shards": shards}
    head["options"] = dataclasses.asdict(opts)
    h.update(json.dumps(head, sort_keys=True).encode())
    for e in entries:
        h.update(f"\n{e.index}\t{','.join(map(repr, e.labels))}\t{e.path}".encode())
    return h.hexdigest()


def shard_jobs(
    lst: str,
    entries: Sequence[ListEntry],
    root: str,
    opts: EncodeOptions,
    stem: str,
    shards: int,
    *,
    max_skips: int | None = None,
    storage_options: dict[str, Any] | None = None,
    topic: str | None = None,
    stop: str | None = None,
) -> list[ShardJob]:
    """The tasks that convert ``entries`` into ``shards`` shards named after ``stem``."""
    jobs = []
    for k, (rec, idx) in enumerate(output_names(stem, shards)):
        part = shard_slice(entries, k, shards)
        jobs.append(
            ShardJob(
                list=lst,
                shard=k,
                shards=shards,
                entries=tuple(part),
                root=root,
                opts=opts,
                rec=rec,
                idx=idx,
                record=record_name(rec),
                key=shard_key(part, root, opts, k, shards),
                max_skips=max_skips,
                storage_options=storage_options,
                topic=topic,
                stop=stop,
            )
        )
    return jobs


# --- on a worker ------------------------------------------------------------------------


def convert_shard(job: ShardJob) -> dict | None:
    """Convert one slice into one shard and write its record; the record (a dict).

    Runs on a worker (or anywhere: progress then goes nowhere). The ``.rec``/``.idx``
    pair is published only whole (NOTE [resumable shards]). ``None``, with nothing done,
    when the run's stop event is already set (NOTE [stopping a run]).

    Raises:
        TooManyErrors: more than ``job.max_skips`` files skipped, or every file of a
            non-empty slice failed; nothing of this shard is published.
    """
    if _stopped(job):
        return None
    start = time.perf_counter()
    send = _progress_sender(job)
    for url in (job.rec, job.idx, job.record):  # a killed run's leftovers (resumed)
        remove_partials(url, job.storage_options)
    skipped: list[dict] = []
    writer = MXIndexedRecordIO(job.idx, job.rec, "w", storage_options=job.storage_options)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="turbojpeg")  # as pack_list does
            stream = batch_stream(job.entries, job.root, job.opts, 1, "thread", make_batch)
            done = 0
            for chunk, batch in stream:  # as pack_list writes them (one shard)
                runs = FramedRuns(batch)
                for j, entry in enumerate(chunk):
                    if batch.others[j] is None:  # made in C: written with its run
                        runs.add(0, j, entry.index)
                        continue
                    payload, reason = batch.others[j]
                    if payload is None:
                        position = job.shard + (done + j) * job.shards
                        skipped.append(
                            {"index": entry.index, "path": entry.path, "reason": reason,
                             "position": position}
                        )  # fmt: skip
                        if job.max_skips is not None and len(skipped) > job.max_skips:
                            raise TooManyErrors(
                                f"shard {job.shard}: {len(skipped)} skipped, more than the "
                                f"{job.max_skips} --max-errors leaves it (last: {entry.path}: "
                                f"{reason})"
                            )
                    else:
                        runs.flush([writer], 0)
                        writer.write_idx(entry.index, payload)
                runs.flush([writer])
                done += len(chunk)
                send(done)
        if job.entries and not writer.keys:  # a wrong ROOT, most likely: publish nothing
            raise TooManyErrors(
                f"shard {job.shard}: every file failed (first: "
                f"{os.path.join(job.root, skipped[0]['path'])}: {skipped[0]['reason']})"
            )
        rec_bytes = writer.tell()
        idx_text = "".join(format_idx_line(k, writer.idx[k]) for k in writer.keys).encode()
        written = len(writer.keys)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    send(len(job.entries), final=True)
    record = {
        "version": RECORD_VERSION,
        "list": job.list,
        "shard": job.shard,
        "shards": job.shards,
        "key": job.key,
        "rec": job.rec,
        "idx": job.idx,
        "images": len(job.entries),
        "written": written,
        "skipped": skipped,
        "rec_bytes": rec_bytes,
        "idx_bytes": len(idx_text),
        "idx_sha256": hashlib.sha256(idx_text).hexdigest(),
        "seconds": round(time.perf_counter() - start, 3),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }
    out = storage.AtomicOutput(job.record, job.storage_options)
    try:
        out.write((json.dumps(record, indent=1) + "\n").encode())
        out.commit()
    except BaseException:
        out.abort()
        raise
    return record


def _stopped(job: ShardJob) -> bool:
    """Whether the run that sent ``job`` has been stopped (never, off a Dask worker)."""
    if job.stop is None:
        return False
    try:
        from distributed import Event, get_worker

        get_worker()
    except (ImportError, ValueError):  # not on a Dask worker: no run to ask
        return False
    return Event(job.stop).is_set()


def _progress_sender(job: ShardJob):
    """``send(done, final=False)``: the shard's images done, as a Dask event, rate-limited."""
    worker = None
    if job.topic is not None:
        try:
            from distributed import get_worker

            worker = get_worker()
        except (ImportError, ValueError):  # not on a Dask worker: nobody to tell
            worker = None
    last = [0.0]

    def send(done: int, final: bool = False) -> None:
        now = time.monotonic()
        if worker is None or (not final and now - last[0] < _PROGRESS_EVERY):
            return
        last[0] = now
        worker.log_event(job.topic, {"shard": job.shard, "done": done, "pid": os.getpid()})

    return send


# --- on the driver ----------------------------------------------------------------------


def verified(job: ShardJob) -> dict | None:
    """The shard's record if the shard is complete and checks out, else ``None``.

    See NOTE [resumable shards]: the record must match ``job.key``; the ``.rec`` must
    have its recorded size, the ``.idx`` its recorded bytes, and the ``.rec``'s last
    indexed record must end where the file ends.
    """
    from ..records.format import parse_idx
    from ..records.scan import record_end

    opts = job.storage_options
    try:
        record = json.loads(storage.read_bytes(job.record, opts))
        if record.get("version") != RECORD_VERSION or record.get("key") != job.key:
            return None
        idx = storage.read_bytes(job.idx, opts)
        if len(idx) != record["idx_bytes"] or (
            hashlib.sha256(idx).hexdigest() != record["idx_sha256"]
        ):
            return None
        offsets = [offset for _, offset in parse_idx(idx.decode(), path=job.idx)]
        if len(offsets) != record["written"]:
            return None
        with contextlib.closing(storage.open_source(job.rec, opts)) as source:
            if source.size != record["rec_bytes"]:
                return None
            if offsets and record_end(source, max(offsets)) != source.size:
                return None
            if not offsets and source.size:
                return None
    except (OSError, ValueError, KeyError, TypeError):  # missing, unreadable or not ours
        return None
    return record


class _Bar:
    """One progress bar for every shard: workers' events in, never past a shard's size."""

    def __init__(self, bar, sizes: dict[int, int]) -> None:
        self.bar, self.sizes = bar, sizes
        self.done = dict.fromkeys(sizes, 0)
        self.events = 0
        self._lock = threading.Lock()

    def event(self, event: tuple) -> None:
        """A Dask event ``(timestamp, {"shard": k, "done": n})`` from a worker."""
        _, msg = event
        self.advance(msg["shard"], msg["done"])
        self.events += 1

    def advance(self, shard: int, done: int) -> None:
        """Shard ``shard`` has ``done`` images done (counts only go up)."""
        with self._lock:
            if shard not in self.done:
                return
            done = min(done, self.sizes[shard])
            if done > self.done[shard]:
                self.bar.update(done - self.done[shard])
                self.done[shard] = done

    def finish(self, shard: int) -> None:
        """Shard ``shard`` has ended: all its images are done."""
        self.advance(shard, self.sizes.get(shard, 0))


# The local cluster's workers, measured on 2 busy cores (one shard of 400 images in a
# worker against the same shard in the driver): Dask's statistical profiler, which samples
# every worker thread's stack every 10 ms, holding the GIL, cost about half as much CPU
# again; its MALLOC_TRIM_THRESHOLD_=65536 hands each freed image's memory back to the
# kernel to fault it in again for the next (2.5 times the page faults). Both off: 1.2 times
# the driver's CPU, first-task imports included. A cluster at --address keeps its own.
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,  # None: not set
    # periodic work that wakes every process tens of times a second, for what one task per
    # shard does not need: stealing (the scheduler hands a free worker the next shard),
    # event-loop health checks, memory and system sampling, the notebook widget
    "distributed.scheduler.work-stealing": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.deploy.cluster-repr-interval": "10s",
}


@contextlib.contextmanager
def connect(engine: str = "dask", address: str | None = None, workers: int = 2) -> Iterator:
    """A Dask client: of the cluster at ``address``, else of a new local cluster.

    The local cluster has ``workers`` worker processes of one thread each (each converts
    one shard at a time) and is shut down on exit.

    Raises:
        ValueError: an engine other than ``"dask"``.
        ImportError: Dask is not installed (the ``cluster`` extra).
    """
    check_engine(engine)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError(
            f"--engine dask needs dask.distributed: {install_hint('cluster')}"
        ) from None
    if workers < 1:
        raise ValueError(f"workers must be >= 1, not {workers}")
    # Dask's own INFO lines (every nanny, worker and connection) would bury im2rec's.
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        if address:
            with Client(address, timeout=30) as client:
                yield client
            return
        import dask

        with dask.config.set(LOCAL_CLUSTER_CONFIG):
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # any free port: never fight over 8787
                silence_logs=logging.ERROR,
            )
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
    finally:
        quiet.setLevel(level)


def check_engine(engine: str) -> str:
    """``engine`` if recio can convert on it.

    Raises:
        ValueError: not ``"dask"`` (``"ray"`` is named, not implemented).
    """
    if engine == "dask":
        return engine
    if engine == "ray":
        raise ValueError(
            "--engine ray is not implemented: recio converts on Dask (--engine dask); "
            "Ray's 79 MB of wheels and ~10 s cluster start buy nothing for one task per "
            "shard (see the cluster extra in pyproject.toml)"
        )
    raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")


def pack_on_cluster(
    lst: str,
    root: str,
    opts: EncodeOptions | None = None,
    *,
    client: Any,
    out_stem: str | None = None,
    shards: int = 1,
    max_errors: int | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: bool = False,
    report: PackReport | None = None,
) -> PackReport:
    """Pack ``lst`` into ``shards`` shards on the Dask cluster of ``client``, resumably.

    The shards are byte-identical to :func:`~recio.im2rec.pack.pack_list`'s with the
    same ``shards``. Shards already complete and verified (:func:`verified`) are reused;
    the others are converted, one task each, and published as each ends, so a run that
    fails or is killed keeps its finished shards for the next (NOTE [resumable shards]).
    ``report.shards`` lists each shard's outcome (``complete``, ``reused``, ``failed``,
    or ``cancelled``: not started once the run was over ``max_errors`` or interrupted).
    ``max_errors`` counts the list's bad lines and every shard's skipped files together:
    a shard over what is left of it is not published, and a run over it ends with
    TooManyErrors, but shards published before stay (they are whole).

    Raises:
        TooManyErrors: ``max_errors`` exceeded, or a shard's every file failed.
        ValueError: a bad list (repeated indices), ``shards`` < 1.
        OSError: reading or writing failed; the first error of any shard.
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, not {shards}")
    opts = opts or EncodeOptions()
    stem = out_stem or (lst[: -len(".lst")] if lst.endswith(".lst") else lst)
    names = output_names(stem, shards)
    if report is None:
        report = PackReport(list=lst, outputs=[])
    report.list, report.outputs = lst, [n for pair in names for n in pair]
    report.options = dataclasses.asdict(opts)
    report.shards = []
    with reported_run(report) as run:
        entries, linenos, bad_lines = read_list_into(report, lst, storage_options, max_errors)
        check_list(lst, entries, linenos, root, opts)
        if not entries:
            raise TooManyErrors(nothing_written(report, lst, root))
        budget = None if max_errors is None else max_errors - len(bad_lines)
        run_id = uuid.uuid4().hex
        jobs = shard_jobs(
            lst, entries, root, opts, stem, shards, max_skips=budget,
            storage_options=storage_options, topic=f"recio-im2rec-{run_id}",
            stop=f"recio-im2rec-stop-{run_id}",
        )  # fmt: skip
        outcomes: dict[int, dict] = {}
        todo = []
        for job in jobs:
            record = verified(job)
            if record is None:
                todo.append(job)
            else:
                outcomes[job.shard] = {**record, "status": "reused"}
        if outcomes:
            log.info(
                "%s: %d of %d shards already complete and verified, reused",
                lst, len(outcomes), shards,
            )  # fmt: skip
        from tqdm import tqdm

        bar = run.bar = tqdm(
            total=len(entries),
            initial=sum(len(j.entries) for j in jobs if j.shard in outcomes),
            unit="img",
            desc=os.path.basename(stem),
            disable=not progress,
            dynamic_ncols=True,
            mininterval=0.5,
            file=sys.stderr,
        )
        tracker = _Bar(bar, {j.shard: len(j.entries) for j in todo})
        errors = _run_jobs(client, todo, tracker, outcomes, budget)
        report.shards = [_shard_entry(outcomes.get(j.shard), j) for j in jobs]
        done = [outcomes[k] for k in sorted(outcomes) if "key" in outcomes[k]]
        report.written = sum(r["written"] for r in done)
        report.bytes = sum(r["rec_bytes"] for r in done)  # as pack_list counts
        skips = sorted((s for r in done for s in r["skipped"]), key=lambda s: s["position"])
        report.skipped.extend({k: v for k, v in s.items() if k != "position"} for s in skips)
        if errors:
            raise errors[0]
        if max_errors is not None and len(report.skipped) > max_errors:
            raise TooManyErrors(
                f"{len(report.skipped)} skipped, more than --max-errors {max_errors} "
                "(the shards published are whole and are reused by a rerun)"
            )
    return report


def _run_jobs(
    client: Any, jobs: list[ShardJob], tracker: _Bar, outcomes: dict, budget: int | None
) -> list[BaseException]:
    """Run ``jobs`` on the cluster; their records into ``outcomes``; the errors, in order.

    Every shard that has started runs to its end even when another fails (its output is
    then kept for a rerun); once the skips pass ``budget`` the others do not start, and on
    Ctrl-C none does (NOTE [stopping a run]).
    """
    from distributed import Event, as_completed

    if not jobs:
        return []
    topic = jobs[0].topic
    stop = Event(jobs[0].stop, client=client)
    client.subscribe_topic(topic, tracker.event)
    futures = {
        client.submit(convert_shard, job, key=f"recio-im2rec-{job.shard}-{uuid.uuid4().hex}",
                      pure=False): job
        for job in jobs
    }  # fmt: skip
    errors: list[BaseException] = []
    skips = 0
    try:
        for future in as_completed(futures):
            job = futures[future]
            if future.cancelled():  # by someone else (the cluster restarted): not run
                continue
            try:
                record = future.result()
            except Exception as exc:  # the shard's own error, as its task raised it
                tracker.finish(job.shard)
                errors.append(exc)
                outcomes[job.shard] = {"status": "failed", "error": _one_line(exc)}
                if isinstance(exc, TooManyErrors):
                    stop.set()
                continue
            if record is None:  # not started: the run was stopped
                continue
            tracker.finish(job.shard)
            outcomes[job.shard] = {**record, "status": "complete"}
            skips += len(record["skipped"])
            if budget is not None and skips > budget:
                stop.set()
    except BaseException:  # Ctrl-C, SIGTERM: nothing more starts, nothing is waited for
        with contextlib.suppress(Exception):
            stop.set()  # left set: a task the cancel misses must still not start
            client.cancel([f for f in futures if not f.done()])
        raise
    else:
        with contextlib.suppress(Exception):
            stop.clear()  # every task has ended; a set Event stays on the scheduler
    finally:
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(topic)
    for job in futures.values():  # not started: redone by a rerun
        if job.shard not in outcomes:
            outcomes[job.shard] = {"status": "cancelled"}
    return errors


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _shard_entry(outcome: dict | None, job: ShardJob) -> dict:
    """What the merged report says of one shard."""
    entry = {"shard": job.shard, "rec": job.rec, "idx": job.idx, "images": len(job.entries)}
    outcome = outcome or {"status": "cancelled"}
    entry["status"] = outcome["status"]
    if "key" in outcome:
        entry.update(
            written=outcome["written"],
            skipped=len(outcome["skipped"]),
            bytes=outcome["rec_bytes"],
            seconds=outcome["seconds"],
            finished=outcome["finished"],
            worker=outcome["worker"],
        )
    elif "error" in outcome:
        entry["error"] = outcome["error"]
    return entry
