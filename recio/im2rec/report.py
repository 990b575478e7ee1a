"""What a packing run did: its report, and the errors and statuses that end one."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator
from typing import Any


class TooManyErrors(RuntimeError):
    """More files were skipped than ``max_errors`` allows, or no image could be packed.

    Either way the writers are aborted: nothing is published, and outputs that already
    exist under the same names are left as they were.
    """


@dataclasses.dataclass
class PackReport:
    """What packing one ``.lst`` did.

    ``status``: ``running`` until it ends, then ``complete`` (published), ``aborted`` (the
    input was refused: too many bad files, none packed, a bad list), ``interrupted``
    (Ctrl-C, SIGTERM) or ``failed`` (an error reading, writing or publishing).
    """

    list: str
    outputs: list[str]
    images: int = 0
    written: int = 0
    bytes: int = 0
    seconds: float = 0.0
    skipped: list[dict] = dataclasses.field(default_factory=list)
    status: str = "running"
    options: dict = dataclasses.field(default_factory=dict)
    layout: str = "mxnet"
    identities: int | None = None  # insightface layout: identity records written
    # on a cluster (recio.im2rec.engine): each shard's outcome; None for a single machine
    shards: list[dict] | None = None

    @property
    def images_per_second(self) -> float:
        """Files handled (written or skipped) per second; 0 before any time is counted."""
        return (self.written + len(self.skipped)) / self.seconds if self.seconds else 0.0

    def to_json(self) -> str:
        """The report as indented JSON, with the rate, and times rounded."""
        d = dataclasses.asdict(self)
        if self.shards is None:
            del d["shards"]
        d["images_per_second"] = round(self.images_per_second, 1)
        d["seconds"] = round(self.seconds, 3)
        return json.dumps(d, indent=1) + "\n"

    def summary(self, shown: int = 20, report_path: str | None = None) -> str:
        """The report for people: a line of counts and rates, then the first skipped files.

        Args:
            shown: how many skipped files to list.
            report_path: where the whole report is, to say so when some are not listed.
        """
        n = len(self.skipped)
        if self.status == "complete":
            s = (
                f"{self.list}: complete; {self.written} of {self.images} images written "
                f"({self.bytes / 1e6:.1f} MB) in {self.seconds:.1f} s "
                f"({self.images_per_second:.0f} images/s), {n} skipped"
            )
            if self.identities is not None:
                s += f"; {self.identities} identities"
            if self.shards is not None:
                reused = sum(x["status"] == "reused" for x in self.shards)
                s += f"; {len(self.shards) - reused} shards converted, {reused} reused"
        else:  # the writers were aborted: what was packed is gone
            published = "" if self.status == "failed" else ", nothing published"
            s = (
                f"{self.list}: {self.status}{published}; {self.written} of {self.images} "
                f"images packed before it stopped, {n} skipped, in {self.seconds:.1f} s"
            )
        s += "".join(f"\n  skipped {x['path']}: {x['reason']}" for x in self.skipped[:shown])
        if n > shown:
            where = f" (all in {report_path})" if report_path else ""
            s += f"\n  ... and {n - shown} more{where}"
        return s


def failed_status(exc: BaseException) -> str:
    """A report's status for a run that ``exc`` ended."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, (TooManyErrors, ValueError)):  # the input was refused
        return "aborted"
    return "failed"  # reading, writing or publishing failed


@dataclasses.dataclass
class Run:
    """What :func:`reported_run` closes at the end: the progress bar, once the run has one."""

    bar: Any = None


@contextlib.contextmanager
def reported_run(report: Any) -> Iterator[Run]:
    """The end every run shares (``pack_list``, the cluster engine, ``optimize``).

    ``report`` (a ``status`` and ``seconds``) is ``running`` during the block, then
    ``complete``; a block ended by an exception leaves the status it set itself (a run that
    published some outputs says ``failed``), else :func:`failed_status`, and the exception
    goes on. Either way the progress bar is closed and ``report.seconds`` is the run's time.
    """
    run = Run()
    report.status = "running"
    start = time.perf_counter()
    try:
        yield run
    except BaseException as exc:
        if report.status == "running":
            report.status = failed_status(exc)
        raise
    else:
        report.status = "complete"
    finally:
        if run.bar is not None:
            run.bar.close()
        report.seconds = time.perf_counter() - start


def nothing_written(report: PackReport, lst: str, root: str) -> str:
    """Why a run that packed no image is aborted, naming the first failure."""
    if not report.skipped:
        return "the list has no entries: nothing to pack"
    if not report.images:  # every line was bad
        first = report.skipped[0]
        return f"no line of the list could be read (first: {first['path']}: {first['reason']})"
    files = [s for s in report.skipped if s["index"] is not None]
    where = os.path.join(root, files[0]["path"])
    message = f"every file failed (first: {where}: {files[0]['reason']})"
    if any(s["reason"] == "file not found" for s in files):
        message += f": is ROOT ({root}) right?"
    return message
