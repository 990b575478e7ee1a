"""The restart cut's saving in the JPEG decoder recio.gpu hands its images to, on this CPU.

    python tools/bench_gpu_cut.py [--images 64] [--rounds 7] [--decoder auto] [--dali]

Synthetic 375-500 px JPEGs, losslessly re-encoded with a restart marker every MCU; each
gets its RandomResizedCrop-224 window (recio's draw, as ImageRecordIter's). Per round, the
decoder (torchvision's CPU decode_jpeg, else Pillow's) decodes the cut JPEGs and the whole
ones in turn; the figures are the medians over rounds of the CPU seconds per image (this
process's user + system time), the cut's and the whole's side by side, and their ratio.
Also the bytes handed to the decoder. The cut itself (recio's restart_cut) is timed apart.
``--dali``: the DALI stage's CPU pipeline (one thread) over a .rec of those JPEGs, an epoch
per round with ``cut=True`` and one without, in turn (the first round a warm-up): CPU
seconds per image, medians; the source's cut counts in the cut's figure.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import sys
import time

import numpy as np


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--decoder", default="auto")
    parser.add_argument("--dali", action="store_true")
    args = parser.parse_args(argv)
    import torch

    from recio import decode
    from recio.augment import CropSpec, KeyedDraw
    from recio.bench.sample import sample_image
    from recio.gpu import JpegDecoder, cut_batch
    from recio.im2rec import JpegEncoder

    rng = np.random.default_rng(0)
    bodies = []
    for k in range(args.images):
        size = (int(rng.integers(375, 501)), int(rng.integers(333, 501)))
        out = io.BytesIO()
        sample_image(rng, k % 10, size).convert("RGB").save(out, "JPEG", quality=90)
        bodies.append(out.getvalue())
    with decode.DecodePool(1) as pool:
        _, marked = JpegEncoder(pool).optimize_jpeg(bodies, restart=1)
        sizes = pool.image_sizes(marked)
    spec = CropSpec(224, 224, random_resized_crop=True, rand_mirror=True)
    windows, _ = KeyedDraw(spec, 1, 0).windows(sizes, np.arange(len(marked)))
    start = time.perf_counter()
    cuts = cut_batch(marked, windows)
    cut_s = (time.perf_counter() - start) / len(marked)
    whole = cut_batch(marked, windows, cut=False)
    jpeg = JpegDecoder(torch.device("cpu"), args.decoder)
    times = {"cut": [], "whole": []}
    for _ in range(args.rounds):
        for name, pieces in (("cut", cuts), ("whole", whole)):
            data = [p.data for p in pieces]
            c = cpu()
            jpeg.decode(data)
            times[name].append((cpu() - c) / len(data))
    cut_ms = statistics.median(times["cut"]) * 1e3
    whole_ms = statistics.median(times["whole"]) * 1e3
    cut_bytes = sum(len(p.data) for p in cuts) / len(cuts)
    whole_bytes = sum(len(p.data) for p in whole) / len(whole)
    print(f"decoder {jpeg.name}, {len(marked)} images, {args.rounds} rounds (medians)")
    print(f"decode CPU ms/img: cut {cut_ms:.2f}, whole {whole_ms:.2f}, "
          f"ratio {whole_ms / cut_ms:.2f}x; the cut itself {cut_s * 1e3:.3f} ms/img")  # fmt: skip
    n_cut = sum(p.cut for p in cuts)
    print(f"bytes to the decoder: cut {cut_bytes:.0f}, whole {whole_bytes:.0f} "
          f"({cut_bytes / whole_bytes:.0%}); {n_cut} of {len(cuts)} cut")  # fmt: skip
    if args.dali:
        dali_rounds(marked, args.rounds)
    return 0


def dali_rounds(marked: list[bytes], rounds: int) -> None:
    import tempfile

    from recio.dali import DALIImageRecordIter
    from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

    rec = os.path.join(tempfile.mkdtemp(), "marked.rec")
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for key, body in enumerate(marked):
            w.write_idx(key, pack(IRHeader(0, 0.0, key, 0), body))
    kw = dict(data_shape=(3, 224, 224), batch_size=16, random_resized_crop=True,
              rand_mirror=True, seed=1, device="cpu", preprocess_threads=1)  # fmt: skip
    iters = {
        "cut": DALIImageRecordIter(rec, cut=True, **kw),
        "whole": DALIImageRecordIter(rec, **kw),
    }
    times = {"cut": [], "whole": []}
    for k in range(rounds + 1):
        for name, it in iters.items():
            c, n = cpu(), 0
            for batch in it:
                n += len(batch.index) - batch.pad
            if k:  # the first round builds the pipelines
                times[name].append((cpu() - c) / n)
    cut_ms = statistics.median(times["cut"]) * 1e3
    whole_ms = statistics.median(times["whole"]) * 1e3
    print(f"DALI CPU pipeline, CPU ms/img: cut {cut_ms:.2f}, whole {whole_ms:.2f}, "
          f"ratio {whole_ms / cut_ms:.2f}x")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
