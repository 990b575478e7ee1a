"""DALI's own readers.mxnet and CPU decoder give the same pixels on an optimized .rec.

`recio optimize` promises that restart markers change no pixel in any JPEG decoder; DALI's
CPU decoder (libjpeg-turbo inside DALI) is the one users of NVIDIA's RecordIO recipes run.
"""

import io

import numpy as np
from PIL import Image

from recio.dali import load_dali
from recio.im2rec.optimize import optimize
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

from ..conftest import needs_dali

# (width, height, Pillow subsampling: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0, None = greyscale)
SHAPES = [(61, 45, 2), (64, 48, 1), (33, 70, 0), (50, 37, None), (97, 23, 2)]


def _jpeg(rng, width, height, subsampling) -> bytes:
    mode = "L" if subsampling is None else "RGB"
    pixels = rng.integers(0, 256, (height, width) if mode == "L" else (height, width, 3))
    out = io.BytesIO()
    extra = {} if subsampling is None else {"subsampling": subsampling}
    Image.fromarray(pixels.astype(np.uint8), mode).save(out, "JPEG", quality=85, **extra)
    return out.getvalue()


def _dali_decode(rec: str, idx: str, n: int) -> list[np.ndarray]:
    """Every record of ``rec`` in file order through readers.mxnet and the CPU decoder."""
    dali = load_dali()
    fn, types = dali.fn, dali.types

    @dali.pipeline_def
    def graph():
        jpegs, _ = fn.readers.mxnet(path=[rec], index_path=[idx], random_shuffle=False)
        return fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)

    pipe = graph(batch_size=1, num_threads=1, device_id=None, seed=1)
    pipe.build()
    return [np.array(pipe.run()[0].at(0)) for _ in range(n)]


@needs_dali
def test_dali_decodes_an_optimized_rec_to_the_same_pixels(tmp_path):
    rng = np.random.default_rng(36)
    src_rec, src_idx = str(tmp_path / "src.rec"), str(tmp_path / "src.idx")
    with MXIndexedRecordIO(src_idx, src_rec, "w") as w:
        for key, (width, height, sub) in enumerate(SHAPES):
            w.write_idx(key, pack(IRHeader(0, float(key), key, 0), _jpeg(rng, width, height, sub)))
    dst_rec = str(tmp_path / "opt.rec")
    optimize(src_rec, dst_rec)
    with open(dst_rec, "rb") as f:
        assert f.read().count(b"\xff\xdd") >= len(SHAPES)  # a DRI segment in every JPEG

    original = _dali_decode(src_rec, src_idx, len(SHAPES))
    optimized = _dali_decode(dst_rec, str(tmp_path / "opt.idx"), len(SHAPES))
    for (width, height, _), a, b in zip(SHAPES, original, optimized, strict=True):
        assert a.shape == (height, width, 3)
        np.testing.assert_array_equal(a, b)
