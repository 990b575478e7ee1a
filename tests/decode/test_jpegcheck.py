"""Is an encoded JPEG whole: every truncation caught, and every bit flip DALI refuses."""

import numpy as np
import pytest

from recio import dali, decode
from recio.decode import jpegcheck

from ..conftest import needs_dali
from ..images import encode


def _jpeg(seed=0, progressive=False):
    return encode(96, 64, seed=seed, progressive=progressive)


@pytest.mark.parametrize("progressive", [False, True])
def test_structure_check_catches_every_truncation(progressive):
    good = _jpeg(progressive=progressive)
    assert jpegcheck.jpeg_structure_problem(good) is None
    for cut in range(2, len(good) - 1, 7):
        assert jpegcheck.jpeg_structure_problem(good[:cut]), cut
    assert jpegcheck.jpeg_structure_problem(good[:-2])  # only the EOI marker missing


@needs_dali
def test_check_catches_what_stops_dali_on_bit_flips():
    """Every bit-flipped JPEG DALI's CPU decoder refuses must be refused before DALI sees it."""
    fn, types = dali.load_dali().fn, dali.load_dali().types
    good = _jpeg(seed=3)
    rng = np.random.default_rng(0)
    header_end = good.index(b"\xff\xda") + 14
    variants = []
    for _ in range(60):  # flips in the headers (tables, frame, scan) and in the data
        b = bytearray(good)
        pos = int(rng.integers(2, header_end if rng.random() < 0.7 else len(b)))
        b[pos] ^= 1 << int(rng.integers(0, 8))
        variants.append(bytes(b))
    current = [good]

    # Synchronous, no prefetch: each run() decodes exactly the variant just set.
    sync = dict(exec_async=False, exec_pipelined=False, prefetch_queue_depth=1)

    @dali.load_dali().pipeline_def(batch_size=1, num_threads=1, device_id=None, **sync)
    def one():
        data = fn.external_source(
            source=lambda: [np.frombuffer(current[0], np.uint8)], batch=True, dtype=types.UINT8
        )
        return fn.decoders.image(data, device="cpu")

    pool = decode.DecodePool(1)
    refused = 0
    pipe = one()
    pipe.build()
    for buf in variants:
        current[0] = buf
        try:
            pipe.run()
            continue
        except Exception:  # noqa: BLE001 - DALI's error: this variant must be caught by us
            pipe = one()
            pipe.build()
        refused += 1
        header_bad = pool.image_sizes([buf])[0, 0] <= 0
        assert header_bad or jpegcheck.image_problem(buf), buf.hex()
    assert refused >= 5  # the test exercised DALI's refusals
