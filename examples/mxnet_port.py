"""An MXNet data script, ported to recio by changing its imports.

The MXNet original began with::

    import mxnet as mx
    from mxnet import recordio

and used ``recordio.MXIndexedRecordIO``, ``recordio.pack_img``,
``recordio.unpack_img`` and ``mx.io.ImageRecordIter``. The two imports below
give the same names; the rest of the script is unchanged MXNet code. The one
difference a port meets: a recio batch holds one numpy array, so MXNet's
``batch.data[0].asnumpy()`` becomes ``batch.data``.

    python examples/mxnet_port.py WORKDIR
"""

from __future__ import annotations

import os
import sys
import types

import numpy as np

from recio import (
    ImageRecordIter,
    recordio,  # was: from mxnet import recordio
)

mx = types.SimpleNamespace(
    recordio=recordio, io=types.SimpleNamespace(ImageRecordIter=ImageRecordIter)
)
# was: import mxnet as mx


def write_dataset(prefix: str, num_images: int = 40) -> None:
    """MXNet code: pack synthetic BGR images with labels into prefix.rec/.idx."""
    rng = np.random.default_rng(0)
    record = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "w")
    for i in range(num_images):
        label = i % 4
        img = np.full((48, 64, 3), 40 * label, dtype=np.uint8)  # BGR, as cv2 gives it
        img[10:30, 10:40] = rng.integers(0, 255, 3, dtype=np.uint8)
        header = mx.recordio.IRHeader(0, float(label), i, 0)
        record.write_idx(i, mx.recordio.pack_img(header, img, quality=95, img_fmt=".jpg"))
    record.close()


def check_dataset(prefix: str) -> int:
    """MXNet code: read records back by key and unpack the images."""
    record = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
    for key in record.keys:
        header, img = mx.recordio.unpack_img(record.read_idx(key))
        assert img.shape == (48, 64, 3) and header.id == key
    count = len(record.keys)
    record.close()
    return count


def iterate(prefix: str) -> int:
    """MXNet code: the usual ImageRecordIter arguments, two epochs with reset()."""
    data_iter = mx.io.ImageRecordIter(
        path_imgrec=prefix + ".rec",
        path_imgidx=prefix + ".idx",
        data_shape=(3, 32, 32),
        batch_size=8,
        shuffle=True,
        rand_crop=True,
        rand_mirror=True,
        mean_r=123.68,
        mean_g=116.779,
        mean_b=103.939,
        preprocess_threads=2,
        prefetch_buffer=2,
        round_batch=True,
    )
    print("provide_data", data_iter.provide_data, "provide_label", data_iter.provide_label)
    batches = 0
    for epoch in range(2):
        data_iter.reset()
        for batch in data_iter:
            data = batch.data  # MXNet: batch.data[0].asnumpy()
            label = batch.label  # MXNet: batch.label[0].asnumpy()
            assert data.shape == (8, 3, 32, 32) and label.shape == (8,)
            batches += 1
        print(f"epoch {epoch}: {batches} batches so far, last pad {batch.pad}")
    data_iter.close()
    return batches


if __name__ == "__main__":
    workdir = sys.argv[1] if len(sys.argv) > 1 else "."
    prefix = os.path.join(workdir, "mxnet_port")
    write_dataset(prefix)
    print(f"{check_dataset(prefix)} records written and read back")
    print(f"{iterate(prefix)} batches in two epochs")
