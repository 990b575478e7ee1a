"""What the epoch overlap gains on a small file: the iterator against a checkout without it.

    python tools/bench_epoch_overlap.py R.rec --before DIR [--batch-sizes 64,128]
                                        [--epochs 6] [--rounds 5] [--threads 2]
                                        [--step-ms-per-image 1.0] [--remote]

A local file's pipeline queues the next epoch's first batches on the pool while the last
ones are taken (NOTE [epoch overlap] in recio/pipeline/queued.py). On a file of a few
batches an epoch, the pool otherwise idles at every epoch's end: the last batches are
finished, handed over, and only the next epoch's ``iter()`` queues more. ``--before DIR``
is a checkout without the overlap (``424644f``; ``git archive COMMIT | tar -x -C DIR``,
then ``python setup.py build_ext --inplace`` there). Side by side, in interleaved rounds (the
order alternating), per batch size, each measure a subprocess of its own:

* ``overlap``: ``ImageRecordIter`` of this checkout;
* ``drain``: ``ImageRecordIter`` of ``DIR``.

RandomResizedCrop 224 + flip, uint8 NCHW, shuffled, ``preprocess_threads`` fixed. The
consumer sleeps ``--step-ms-per-image`` × the batch size a batch (a training step on a GPU,
the GIL released; 0: nothing). The drain costs most where that step is about as long as a
batch's decode: the consumer then waits for each epoch's first batch in full, while with a
consumer that takes no time the pool is the bound and never idles at an epoch's end either
way. Each measure runs one epoch to warm up (pool threads,
the page cache, each JPEG's first whole-stream read), then times ``--epochs`` epochs.
Prints each round's images/s and the median ratio overlap / drain. ``--remote`` reads the
file from fsspec's memory filesystem (each measure copies it there first), so the remote
pipeline runs (a reader thread, two decode threads) without a network's noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkouts import run_in  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rate(rec: str, batch: int, threads: int, epochs: int, step_s: float, remote: bool) -> float:
    """Images per second over ``epochs`` epochs, after a warm-up epoch (this process's recio)."""
    from recio import ImageRecordIter

    if remote:
        import fsspec

        fs = fsspec.filesystem("memory")
        for suffix in (".rec", ".idx"):
            fs.put_file(rec[: -len(".rec")] + suffix, f"/bench/data{suffix}")
        rec = "memory://bench/data.rec"

    it = ImageRecordIter(
        rec, data_shape=(3, 224, 224), batch_size=batch, shuffle=True, seed=1,
        random_resized_crop=True, rand_mirror=True, dtype="uint8",
        preprocess_threads=threads, last_batch="pad",
    )  # fmt: skip
    with it:
        for _batch in it:
            pass
        images, t0 = 0, time.perf_counter()
        for _ in range(epochs):
            for b in it:
                images += len(b.index) - b.pad
                if step_s:
                    time.sleep(step_s)
        return images / (time.perf_counter() - t0)


def measure(code: str, args: argparse.Namespace, batch: int) -> float:
    """:func:`rate` in a subprocess importing recio from ``code``."""
    argv = [args.rec, "--one", str(batch), "--threads", str(args.threads)]
    argv += ["--epochs", str(args.epochs), "--step-ms-per-image", str(args.step_ms_per_image)]
    return float(run_in(code, __file__, [*argv, *(["--remote"] if args.remote else [])]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--before", help="a built checkout without the overlap")
    parser.add_argument("--batch-sizes", default="64,128")
    parser.add_argument("--epochs", type=int, default=6, help="timed epochs a measure (6)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--step-ms-per-image", type=float, default=1.0)
    parser.add_argument("--remote", action="store_true", help="read it as a remote file")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a measure's subprocess
    args = parser.parse_args(argv)
    args.rec = os.path.abspath(args.rec)
    if args.one is not None:
        step_s = args.step_ms_per_image * args.one / 1000
        print(rate(args.rec, args.one, args.threads, args.epochs, step_s, args.remote))
        return 0
    if args.before is None:
        parser.error("--before DIR is needed (a built checkout without the overlap)")
    code = {"overlap": HERE, "drain": os.path.abspath(args.before)}
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        rates: dict[str, list[float]] = {"overlap": [], "drain": []}
        ratios = []
        for r in range(args.rounds):
            order = ("overlap", "drain") if r % 2 == 0 else ("drain", "overlap")
            got = {k: measure(code[k], args, batch) for k in order}
            for k, v in got.items():
                rates[k].append(v)
            ratios.append(got["overlap"] / got["drain"])
            print(
                f"batch {batch} round {r}: overlap {got['overlap']:,.0f}, "
                f"drain {got['drain']:,.0f} images/s ({ratios[-1]:.2f}x)",
                flush=True,
            )
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(
            f"batch {batch}: overlap {med['overlap']:,.0f} "
            f"({min(rates['overlap']):,.0f}-{max(rates['overlap']):,.0f}), drain "
            f"{med['drain']:,.0f} ({min(rates['drain']):,.0f}-{max(rates['drain']):,.0f}) "
            f"images/s; ratio median {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
