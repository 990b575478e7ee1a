"""The DALI stage's source: recio reads, shards, shuffles and checks the bytes DALI decodes.

:class:`RecioSource` is the ``fn.external_source`` callable of :mod:`recio.dali`'s pipeline:
a picklable, pure function of DALI's ``BatchInfo`` that turns one batch of the sampler's
plan into encoded images, labels and metadata (and, with a crop, the crop windows drawn as
the CPU iterator draws them). It needs no DALI itself.

NOTE [bad images]: DALI stops the whole pipeline on one image it cannot decode, and its
decoders treat libjpeg *warnings* such as "Premature end of JPEG data" as errors. The source
therefore checks every image before feeding it (:mod:`recio.decode.jpegcheck`): libjpeg's
header parse (tables, frame, scan headers) plus a walk of the marker structure that needs an
end-of-image marker after the last scan, which is what catches truncation. Bit flips inside
the entropy-coded data decode (to wrong pixels) in both libjpeg and DALI and pass, as they
do in the CPU iterator. ``validate="decode"`` adds a full libjpeg decode at 1/8 scale. A bad
image is then skipped, replaced or raised by the same
:class:`~recio.pipeline.positioned.ErrorPolicy` as in the CPU iterator; its record id and
status code travel in the metadata output.
NOTE [dali map check]: the images go to DALI as zero-copy views of the file's map, and DALI
copies them after the source returns. The source checks what the map lost when it reads
(``read_batch``: RecordFile.lost), but a file truncated after that check hands DALI pages
of zeros (NOTE [map guard]), which DALI decodes to black or refuses, with no report. So
each batch's metadata carries :func:`readable_bytes` of the files holding its records as
the source began it (column 7) and the records' positions (column 8), and whoever consumes
the batch compares it with what those files hold now:
:class:`~recio.dali.iterator.DALIImageRecordIter` does, after each run (and after a run
that failed), and runs the batch again from a new pipeline when the maps lost bytes in
between; the new source sees the loss, so the lost records are skipped, replaced or raised
as the CPU iterator's are. That costs two fstats per file of the batch (not per shard of
the dataset), and no copy. A
pipeline of your own around :class:`RecioSource` makes the same comparison.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..augment import CropSpec, KeyedDraw
from ..decode import DecodePool, Status
from ..decode.jpegcheck import Problem, image_problem
from ..decode.jpegcut import cut_image
from ..pipeline.positioned import ErrorPolicy
from ..pipeline.refill import Candidates, Refill, tolerant
from ..records.checksum import CHECKSUM_MISMATCH
from ..records.file import RecordFile
from ..records.spans import Spans
from ..sampling.mixing import LabelMap, read_mapped_batch
from ..sampling.sampler import Sampler

# per-sample int64 metadata: id, epoch, step, pad; for a bad slot its record id, its status
# and 1 where its checksum did not match (-1, 0, 0 for a good one); the bytes the maps held
# as the batch began, and each slot's position (NOTE [dali map check])
META_COLUMNS = 9
_VALIDATE = ("none", "header", "structure", "decode")
CROP_SOURCES = ("recio", "dali")


_BLACK_JPEG: bytes | None = None


def _black_jpeg() -> bytes:
    """A tiny valid JPEG that stands in for a bad image under on_error='replace'."""
    global _BLACK_JPEG
    if _BLACK_JPEG is None:
        from PIL import Image

        out = io.BytesIO()
        Image.new("RGB", (16, 16)).save(out, format="JPEG")
        _BLACK_JPEG = out.getvalue()
    return _BLACK_JPEG


def readable_bytes(records: Any, positions: np.ndarray | None = None) -> int:
    """The bytes the files of ``records`` can be read to now, all files together.

    ``positions``: only the files that hold those records (a batch's), not every shard.

    A local file counts its map's readable extent (its size now, short of any page that
    faulted: NOTE [map guard]), a remote one its size: the sum only goes down, and it does
    when a file shrank or a page of its map faulted (NOTE [dali map check]).
    """
    files = getattr(records, "shards", None) or [records]
    if positions is not None and len(files) > 1:
        which = np.searchsorted(records.starts, positions, side="right") - 1
        files = [files[k] for k in np.unique(which).tolist()]
    return sum(f.source.readable() if f.is_local else f.size for f in files)


def _arrays(images: Spans | list) -> list[np.ndarray]:
    """Each encoded image as a zero-copy uint8 array, as DALI's external source takes them."""
    if isinstance(images, Spans):
        base = np.frombuffer(images.base, dtype=np.uint8)
        bounds = zip(images.starts.tolist(), (images.starts + images.lengths).tolist(), strict=True)
        return [base[start:end] for start, end in bounds]
    return [np.frombuffer(image, dtype=np.uint8) for image in images]


def _cut(images: list, windows: np.ndarray) -> None:
    """Each restart-marked JPEG cut to its window's segments, the window moved into them."""
    for j, (image, window) in enumerate(zip(images, windows, strict=True)):
        piece = cut_image(image, window)
        if piece is not None and piece.cut:
            images[j] = np.frombuffer(piece.data, dtype=np.uint8)
            windows[j, :2] = piece.window[:2]


class RecioSource:
    """``fn.external_source`` callable (batch mode, ``batch_info=True``): batch → encoded bytes.

    A pure function of ``BatchInfo(iteration, epoch_idx)`` and the start point
    ``(start_epoch, start_step)``: DALI epoch ``k`` is recio epoch ``start_epoch + k``, and the
    first one starts at ``start_step``. It raises StopIteration at the end of each epoch.
    Picklable (the file reopens and the header pool restarts in the worker), so it suits
    ``fn.external_source(parallel=True)``.

    Outputs per sample: encoded image (uint8), label (float32, label_width), meta (int64:
    id, epoch, step, pad, bad record id or -1, bad status, 1 for a checksum mismatch, the
    :func:`readable_bytes` of the records as the batch began), with ``windows`` the window
    ``crop`` draws (int32 x, y, w, h) and flip (int32), and with on_error="replace" a keep
    mask (float32, 0 for a bad image). With ``cut`` (and ``windows``), a restart-marked
    JPEG goes as the segments that cover its window (NOTE [restart cut]), its window moved
    into them: the decoder does the crop's work alone, and decodes the same pixels. Over a
    mixture (:mod:`recio.sampling.mixing`) the sampler plans the mixed epochs and gives the
    copies' draw keys; ``label_maps`` are its sources' label mappings, per shard of the
    union.
    """

    def __init__(
        self,
        records: RecordFile,
        sampler: Sampler,
        *,
        label_width: int = 1,
        on_error: str = "skip",
        validate: str = "structure",
        crop: CropSpec | None = None,
        windows: bool = True,
        seed: int = 0,
        start_epoch: int = 0,
        start_step: int = 0,
        label_maps: Sequence[LabelMap | None] = (),
        cut: bool = False,
    ) -> None:
        self.policy = ErrorPolicy(on_error)
        if validate not in _VALIDATE:
            raise ValueError(f"validate must be one of {_VALIDATE}, not {validate!r}")
        self.records = records
        self.sampler = sampler
        self.label_width = label_width
        self.on_error = on_error
        self.validate = validate
        self.crop = crop
        self.windows = windows and crop is not None
        self.cut = cut
        self.seed = seed
        self.start_epoch = start_epoch
        self.start_step = start_step
        self.label_maps = tuple(label_maps)  # a mixture's sources with their own label widths
        self._pool: DecodePool | None = None
        self._refiller: Refill | None = None  # made when a batch has no good image
        # Sizes never change: cache them, so later epochs skip the header parse.
        self._sizes = np.full((len(records), 2), -1, dtype=np.int32)
        self._valid = np.zeros(len(records), dtype=bool)  # passed the check once

    @property
    def num_outputs(self) -> int:
        """Outputs per batch: 3, plus 2 with ``windows``, plus 1 with on_error="replace"."""
        return 3 + (2 if self.windows else 0) + (self.on_error == "replace")

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_pool"] = None  # threads do not travel; the worker starts its own
        state["_refiller"] = None  # (a lock)
        state.pop("_take", None)
        return state

    def _header_pool(self) -> DecodePool:
        if self._pool is None:
            self._pool = DecodePool(1)
        return self._pool

    def __call__(self, info: Any) -> tuple:
        """The outputs for DALI's ``BatchInfo``; StopIteration past the epoch's last step."""
        epoch = self.start_epoch + int(info.epoch_idx)
        step = int(info.iteration) + (self.start_step if info.epoch_idx == 0 else 0)
        if step >= self.sampler.steps_in_epoch(epoch):
            raise StopIteration
        return self.batch(epoch, step)

    def batch(self, epoch: int, step: int) -> tuple:
        """The outputs for batch ``step`` of ``epoch`` (see the class docstring)."""
        plan = self.sampler.plan(epoch, step)
        # before any read (NOTE [dali map check])
        readable = readable_bytes(self.records, plan.positions)
        records = read_mapped_batch(self.records, plan.positions, self.label_width, self.label_maps)
        labels, bad_headers = records.labels, records.problems
        n = len(labels)
        self.policy.check_headers(bad_headers)
        meta = np.zeros((n, META_COLUMNS), dtype=np.int64)
        meta[:, 0], meta[:, 1:4], meta[:, 4] = records.ids, (epoch, step, plan.pad), -1
        meta[:, 7], meta[:, 8] = readable, plan.positions
        images = _arrays(records.images)  # empty where the header is unreadable
        sizes, problems = self._check(plan.positions, images)
        problems.update({j: Problem(Status.CORRUPT, str(e)) for j, e in bad_headers.items()})
        keep = np.ones(n, dtype=np.float32)
        if problems:
            self._handle_bad(plan, images, labels, meta, sizes, keep, problems)
        out = [images, labels, meta]
        if self.windows:
            draws = KeyedDraw(self.crop, self.seed, epoch)
            epochs = self.sampler.slot_epochs(plan)
            keys = plan.positions if plan.keys is None else plan.keys  # a mixture's copies
            windows, flips = draws.windows(sizes, keys, epochs)
            if self.cut:
                _cut(images, windows)
            out += [windows, flips.astype(np.int32)]
        if self.on_error == "replace":
            out.append(keep)
        return tuple(out)

    def _check(self, positions: np.ndarray, images: list) -> tuple[np.ndarray, dict[int, Problem]]:
        """Image sizes (from the headers) and {slot: problem} for the images DALI would reject."""
        sizes = self._sizes[positions]
        problems: dict[int, Problem] = {}
        if self.validate == "none" and not self.windows:
            return sizes, problems
        unknown = np.flatnonzero(sizes[:, 0] < 0)
        if len(unknown):
            found = self._header_pool().image_sizes([images[j] for j in unknown])
            sizes[unknown] = found
            good = found[:, 0] > 0
            self._sizes[positions[unknown[good]]] = found[good]
            if self.validate != "none":
                for j in unknown[~good]:
                    if bytes(images[j][:2]) == b"\xff\xd8" or len(images[j]) == 0:
                        problems[int(j)] = Problem(
                            Status.CORRUPT, "corrupt: libjpeg cannot read the header"
                        )
        if self.validate in ("structure", "decode"):
            # A record's bytes never change: check each once (~0.3 ms), not every epoch.
            todo = [j for j in np.flatnonzero(~self._valid[positions]) if j not in problems]
            for j in todo:
                problem = image_problem(images[j], self.validate)
                if problem:
                    problems[int(j)] = problem
            if self.validate == "decode":
                self._decode_check(images, problems, todo)
            ok = [j for j in todo if j not in problems]
            self._valid[positions[ok]] = True
        return sizes, problems

    def _decode_check(self, images: list, problems: dict[int, Problem], todo: list) -> None:
        todo = [j for j in todo if j not in problems]
        tiny = np.empty((len(todo), 8, 8, 3), dtype=np.uint8)  # decodes at 1/8 scale
        pool = self._header_pool()
        status = pool.decode_batch([images[j] for j in todo], tiny)
        errors = pool.last_errors()
        for k in np.flatnonzero(status):
            code = Status(int(status[k]))
            problems[todo[k]] = Problem(code, errors[k] or code.text)

    def _handle_bad(self, plan, images, labels, meta, sizes, keep, problems) -> None:
        """Apply ``on_error`` to the bad slots (a batch with none good: NOTE [refill])."""
        status = np.zeros(len(images), dtype=np.int32)
        reasons: list[str | None] = [None] * len(images)
        for j, problem in problems.items():
            status[j], reasons[j] = problem.status, problem.reason
        fill = self.policy.fill_from(
            status,
            reasons,
            lambda j: self.records.describe(int(plan.positions[j]), int(meta[j, 0])),
        )
        bad = np.flatnonzero(status)
        meta[bad, 4], meta[bad, 5] = meta[bad, 0], status[bad]
        meta[bad, 6] = [reasons[j].startswith(CHECKSUM_MISMATCH) for j in bad]
        if fill is None:  # replace: a black image, masked to zero after normalisation
            black = np.frombuffer(_black_jpeg(), dtype=np.uint8)
            for j in bad:
                images[j] = black
                sizes[j] = (16, 16)
                keep[j] = 0.0
            return
        if fill[0] < 0:  # no image of the batch is good: those that follow it
            found = self._refill().find(
                plan, self._take, reasons[int(bad[0])],
                f"batch {plan.step} (epoch {plan.epoch}) of {self.records.url}",
            )  # fmt: skip
            for j in bad:
                images[j], sizes[j], labels[j], meta[j, 0] = found[j % len(found)]
            return
        for j in bad:
            k = fill[j]
            images[j], sizes[j], labels[j], meta[j, 0] = images[k], sizes[k], labels[k], meta[k, 0]

    def _refill(self) -> Refill:
        if self._refiller is None:
            self._refiller = Refill(self.sampler)
            self._take = tolerant(self._good_images)
        return self._refiller

    def _good_images(self, c: Candidates) -> list[tuple[int, tuple]]:
        """The good ones of a refill's candidates, checked as a batch's are.

        An item is ``(image, size, label, id)``.
        """
        got = read_mapped_batch(self.records, c.positions, self.label_width, self.label_maps)
        images = _arrays(got.images)
        sizes, problems = self._check(c.positions, images)
        return [
            (j, (images[j], sizes[j].copy(), got.labels[j].copy(), int(got.ids[j])))
            for j in range(len(images))
            if j not in problems and j not in got.problems
        ]
