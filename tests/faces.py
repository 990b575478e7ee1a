"""Face-recognition datasets in InsightFace's layout, written as InsightFace's own tool does.

Images are keys 1..N (the images of one identity consecutive, two labels each:
``[class, 1.0]``), then the header record, key 0 but physically after the images
(``flag=2``, ``label=[N + 1, N + 1 + K]``, no image), then one identity record per class
(keys N+1 .. N+K, ``label=[first, end)`` image keys, no image).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recio.records.format import IRHeader
from recio.records.recordio import MXIndexedRecordIO, pack
from tests.images import encode


@dataclass
class FaceFile:
    rec: str
    idx: str
    class_sizes: list[int]

    @property
    def num_images(self) -> int:
        return sum(self.class_sizes)

    def classes(self) -> np.ndarray:
        """The class of image key k at index k - 1."""
        return np.repeat(np.arange(len(self.class_sizes)), self.class_sizes)

    def ranges(self) -> np.ndarray:
        ends = 1 + np.cumsum(self.class_sizes)
        return np.stack([ends - np.asarray(self.class_sizes), ends], axis=1)


def write_faces(
    folder,
    class_sizes=(3, 1, 4, 2),
    *,
    header: bool = True,
    size: int = 24,
    name: str = "train",
    label_only_at=(),
) -> FaceFile:
    """A face dataset; without ``header`` just the image records (keys 1..N).

    ``label_only_at``: image keys after which a record holding only labels is written
    (key 10_000 + k, one label), as some tools leave in plain files.
    """
    rec, idx = str(folder / f"{name}.rec"), str(folder / f"{name}.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        key = 1
        for cls, count in enumerate(class_sizes):
            for _ in range(count):
                image = encode(size, size, seed=key)
                w.write_idx(key, pack(IRHeader(0, [float(cls), 1.0], key, 0), image))
                if key in label_only_at:
                    w.write_idx(10_000 + key, pack(IRHeader(0, float(cls), 10_000 + key, 0), b""))
                key += 1
        if header:
            n, k = key - 1, len(class_sizes)
            w.write_idx(0, pack(IRHeader(0, [float(n + 1), float(n + 1 + k)], 0, 0), b""))
            first = 1
            for cls, count in enumerate(class_sizes):
                w.write_idx(n + 1 + cls, pack(IRHeader(0, [first, first + count], 0, 0), b""))
                first += count
    return FaceFile(rec, idx, list(class_sizes))
