"""``recio optimize``: a ``.rec`` rewritten with every JPEG transcoded losslessly.

Each record's JPEG becomes a baseline JPEG with restart markers (NOTE [restart markers]),
made from the same DCT coefficients (:meth:`~recio.im2rec.encoder.JpegEncoder.optimize_jpeg`):
no decode, so every image decodes to exactly the pixels it did. The record around it (its
IRHeader and labels), its key and its place in the file are kept; records that hold no
JPEG (PNGs, InsightFace's header and identity records) and JPEGs libjpeg warns about
(damaged, cut short) are copied as they are. The outputs publish atomically, like im2rec's:
a run that fails or is interrupted leaves the destination as it was.

NOTE [restart markers]: a baseline JPEG's entropy-coded data is one chain (each block's DC
coefficient is coded as a difference from the previous one), so a decoder must Huffman-decode
every MCU before the last one it needs. A restart marker every few MCUs cuts the chain into
segments that decode independently (the predictors reset at each), which lets a crop's
decode start at the segment that covers it. Every JPEG decoder reads them (OpenCV, Pillow,
DALI, browsers); they cost a few percent of bytes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from .. import decode, storage
from ..records.checksum import sidecar_path
from ..records.file import RecordFile
from ..records.format import unpack
from ..records.index import default_idx_path
from ..records.recordio import MXIndexedRecordIO
from ..records.shard_names import expand_shards
from .encoder import JpegEncoder, restart_code
from .report import reported_run

__all__ = ["DEFAULT_RESTART", "OptimizeReport", "optimize", "output_urls"]

log = logging.getLogger("recio.optimize")

#: The restart interval ``recio optimize`` writes by default: a marker every MCU.
DEFAULT_RESTART = 1

_BATCH = 64  # records per native call: one GIL release, and a bounded amount in flight


@dataclasses.dataclass
class OptimizeReport:
    """What one ``optimize`` run did.

    ``status``: ``running``, then ``complete`` (published), ``interrupted`` (Ctrl-C,
    SIGTERM), ``aborted`` (the input was refused) or ``failed`` (reading, writing or
    publishing). ``kept``: the JPEGs copied as they are, with the reason, by output and key.
    """

    sources: list[str]
    outputs: list[str]
    restart: int | str = DEFAULT_RESTART
    records: int = 0
    transcoded: int = 0
    other: int = 0  # records that hold no JPEG, copied
    kept: list[dict] = dataclasses.field(default_factory=list)
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    status: str = "running"

    def to_json(self) -> str:
        """The report as indented JSON, times rounded."""
        d = dataclasses.asdict(self)
        d["seconds"] = round(self.seconds, 3)
        return json.dumps(d, indent=1) + "\n"

    def summary(self, shown: int = 10) -> str:
        """One line of counts, then the first JPEGs kept as they were."""
        change = self.bytes_out / self.bytes_in - 1 if self.bytes_in else 0.0
        what = "complete" if self.status == "complete" else f"{self.status}, nothing published"
        s = (
            f"{', '.join(self.outputs)}: {what}; {self.records} records in "
            f"{self.seconds:.1f} s: {self.transcoded} JPEGs transcoded, {self.other} other "
            f"records copied, {len(self.kept)} JPEGs kept as they were; "
            f"{self.bytes_in / 1e6:.1f} MB -> {self.bytes_out / 1e6:.1f} MB ({change:+.1%})"
        )
        s += "".join(
            f"\n  kept {k['output']} key {k['key']}: {k['reason']}" for k in self.kept[:shown]
        )
        if len(self.kept) > shown:
            s += f"\n  ... and {len(self.kept) - shown} more"
        return s


def output_urls(sources: Sequence[str], dst: str) -> list[str]:
    """Where each source ``.rec`` goes.

    ``dst`` itself for one source, unless ``dst`` is a folder (ends with ``/``, or is a
    local directory); several sources go into the folder ``dst`` under their own names.
    """
    folder = dst.endswith("/") or len(sources) > 1
    if not folder and storage.is_local(dst):
        folder = os.path.isdir(storage.local_path(dst))
    if not folder:
        if not dst.endswith(".rec"):
            raise ValueError(f"the output {dst} is not a .rec name nor a folder (end it with /)")
        if storage.is_local(dst):  # as for a folder: the output's own folder is made
            os.makedirs(os.path.dirname(os.path.abspath(storage.local_path(dst))), exist_ok=True)
        return [dst]
    if storage.is_local(dst):
        os.makedirs(storage.local_path(dst), exist_ok=True)
    return [dst.rstrip("/") + "/" + src.rstrip("/").rpartition("/")[2] for src in sources]


def optimize(
    src: str | Sequence[str],
    dst: str,
    *,
    restart: int | Literal["row"] = DEFAULT_RESTART,
    num_thread: int = 2,
    storage_options: dict[str, Any] | None = None,
    progress: bool = False,
    report: OptimizeReport | None = None,
) -> OptimizeReport:
    """Rewrite the ``.rec`` (or shards) ``src`` into ``dst`` with restart-marked JPEGs.

    Args:
        src: a ``.rec`` URL, a shard pattern or a list of them (as
            :func:`recio.records.open_records` takes).
        dst: the output ``.rec`` for one source, or a folder (several sources go there
            under their names). Its ``.idx`` is written beside it, and the checksum
            sidecar where the source has one.
        restart: a restart marker every ``restart`` MCUs, or every MCU row (``"row"``).
        num_thread: native threads transcoding.
        storage_options: fsspec options for remote URLs (in and out).
        progress: a progress bar on stderr.
        report: filled in as the run goes (pass one to read it after an exception).

    Returns:
        The report (``status`` ``"complete"``).

    Raises:
        ValueError: bad arguments, a damaged source (``recio.errors`` names the file and
            offset; a source record that fails its checksum is one). Whatever happens,
            nothing is published unless every output is whole.
    """
    restart_code(restart)  # checked before any work
    if not decode.native_available():
        raise ImportError("recio optimize needs recio's native extension (recio._native)")
    if num_thread < 1:
        raise ValueError(f"num_thread must be >= 1, not {num_thread}")
    sources = expand_shards(src, storage_options)
    outputs = output_urls(sources, dst)
    if report is None:
        report = OptimizeReport(sources, outputs)
    report.sources, report.outputs, report.restart = sources, outputs, restart
    from tqdm import tqdm

    writers: list[MXIndexedRecordIO] = []
    readers: list[RecordFile] = []
    with reported_run(report) as run:
        try:
            with decode.DecodePool(num_thread, backend="native") as pool:
                encoder = JpegEncoder(pool)
                for url in sources:
                    readers.append(_open_source(url, storage_options))
                bar = run.bar = tqdm(
                    total=sum(len(r) for r in readers), unit="rec", desc="optimize",
                    disable=not progress, dynamic_ncols=True, mininterval=0.5, file=sys.stderr,
                )  # fmt: skip
                for reader, out in zip(readers, outputs, strict=True):
                    writer = MXIndexedRecordIO(
                        default_idx_path(out), out, "w", storage_options=storage_options,
                        checksums=reader.checksums is not None,
                    )  # fmt: skip
                    writers.append(writer)
                    _rewrite(reader, writer, encoder, restart, report, out, bar)
            for w in writers:
                w.close()
        except BaseException:
            for w in writers:
                w.abort()
            raise
        finally:
            for r in readers:
                r.close()
    return report


def _open_source(url: str, storage_options: dict[str, Any] | None) -> RecordFile:
    """The source, read in index order.

    Its records are checked against its sidecar where it has one, so that a damaged
    record is not given a new checksum that matches it.
    """
    idx = default_idx_path(url)
    has_idx = storage.exists(idx, storage_options)
    sidecar = sidecar_path(url, idx if has_idx else None)
    verify = storage.exists(sidecar, storage_options)
    return RecordFile(url, storage_options=storage_options, verify_checksums=verify)


def _rewrite(
    reader: RecordFile,
    writer: MXIndexedRecordIO,
    encoder: JpegEncoder,
    restart: int | str,
    report: OptimizeReport,
    out: str,
    bar: Any,
) -> None:
    """Every record of ``reader``, in index order, into ``writer`` under its key.

    The next batch transcodes on the pool (the GIL released) while this one is written.
    """
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="recio-optimize") as ex:
        pending = None
        for start in range(0, len(reader), _BATCH):
            positions = list(range(start, min(len(reader), start + _BATCH)))
            job = ex.submit(_transcode, encoder, positions, reader.read_many(positions), restart)
            if pending is not None:
                _write(writer, reader.keys, pending.result(), report, out, bar)
            pending = job
        if pending is not None:
            _write(writer, reader.keys, pending.result(), report, out, bar)


class _Batch(NamedTuple):
    positions: list[int]
    payloads: list  # the source's
    new: list  # the new payload, or None: copy the source's
    reasons: list[str | None]  # why a JPEG is kept as it is


def _transcode(
    encoder: JpegEncoder, positions: list[int], payloads: list, restart: int | str
) -> _Batch:
    """A batch's records with their JPEGs transcoded (the IRHeader and labels kept)."""
    prefixes, jpegs, where = [], [], []
    for j, payload in enumerate(payloads):
        try:
            _, img = unpack(payload)
        except ValueError:  # shorter than an IRHeader: no image in it
            continue
        if bytes(img[:3]) == b"\xff\xd8\xff":
            where.append(j)
            jpegs.append(img)
            prefixes.append(payload[: len(payload) - len(img)])
    new: list = [None] * len(payloads)
    reasons: list[str | None] = [None] * len(payloads)
    if jpegs:
        status, outs = encoder.optimize_jpeg(jpegs, restart=restart)
        errors = encoder.last_errors()
        for j, st, prefix, jpeg, err in zip(where, status, prefixes, outs, errors, strict=True):
            if st == 0:
                new[j] = b"".join((prefix, jpeg))
            else:
                reasons[j] = err or decode.STATUS_NAMES.get(int(st), str(st))
    return _Batch(positions, payloads, new, reasons)


def _write(
    writer: MXIndexedRecordIO,
    keys: np.ndarray,
    batch: _Batch,
    report: OptimizeReport,
    out: str,
    bar: Any,
) -> None:
    for i, payload, made, reason in zip(*batch, strict=True):
        key = int(keys[i])
        report.records += 1
        report.bytes_in += len(payload)
        if made is not None:
            report.transcoded += 1
            payload = made
        elif reason is not None:
            report.kept.append({"output": out, "key": key, "reason": reason})
        else:
            report.other += 1
        report.bytes_out += len(payload)
        writer.write_idx(key, payload)
    bar.update(len(batch.positions))
