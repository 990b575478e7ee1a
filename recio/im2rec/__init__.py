"""im2rec: image folder → ``.lst`` → ``.rec``/``.idx``, MXNet's ``tools/im2rec.py`` remade.

Same command line, ``.lst`` format, ``--recursive`` labels, shuffle (``random.seed(100)``
unless ``--seed``) and output names as MXNet 1.9.1, so lists and records move freely
between the two. Beyond MXNet: a pool of threads (libjpeg-turbo and Pillow release the
GIL) with output in ``.lst`` order through a bounded reorder window (NOTE [output order] in
:mod:`~recio.im2rec.pack`); bad files skipped and reported (``--max-errors``, exit code);
``--shards``; any fsspec URL as output; EXIF orientation applied when re-encoding; writers
that publish only complete files; ``--layout insightface``, InsightFace's face-recognition
layout (NOTE [insightface layout] in :mod:`~recio.im2rec.layout`).

Modules: :mod:`~recio.im2rec.lists` (folder → ``.lst``), :mod:`~recio.im2rec.pack`
(``.lst`` → ``.rec``/``.idx``), :mod:`~recio.im2rec.layout` (the order and keys of the
records, and the face layout's index records), :mod:`~recio.im2rec.transcode` (one image
file → record bytes: JPEG → JPEG in C, else Pillow), :mod:`~recio.im2rec.encoder` (the
native pool's encoder API the C paths use), :mod:`~recio.im2rec.engine` (one
task per shard on a Dask cluster, resumable: ``--engine dask``), :mod:`~recio.im2rec.cli`
(the command line).
"""

from .batches import default_pool
from .cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_SKIPPED, add_arguments, main, run
from .encoder import JpegEncoder
from .layout import LAYOUTS, FaceIndex, group_by_class
from .lists import (
    DEFAULT_EXTS,
    MXNET_SEED,
    find_lists,
    list_images,
    make_lists,
    read_list,
    split_list,
)
from .pack import output_names, pack_list
from .report import PackReport, TooManyErrors
from .transcode import EncodeOptions, SkipImage, encode_image, make_record, make_records

__all__ = [
    "DEFAULT_EXTS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SKIPPED",
    "LAYOUTS",
    "MXNET_SEED",
    "EncodeOptions",
    "FaceIndex",
    "JpegEncoder",
    "PackReport",
    "SkipImage",
    "TooManyErrors",
    "add_arguments",
    "default_pool",
    "encode_image",
    "find_lists",
    "group_by_class",
    "list_images",
    "main",
    "make_lists",
    "make_record",
    "make_records",
    "output_names",
    "pack_list",
    "read_list",
    "run",
    "split_list",
]
