"""Per-stage times of an iterator's pipeline, for ``stats.stages`` and ``recio bench``.

NOTE [stage times]: what each batch costs where, measured without a tracer:

- ``wait_s``: the consumer's time inside ``next()`` waiting for the batch to be decoded;
- ``handover_s``: the rest of its time inside ``next()``: recio's Python per batch (on a
  local file the consumer's thread submits and finishes the batches, NOTE [queued
  batches]; the labels, the stats, ``on_error``);
- ``consumer_s``: the consumer's time between two ``next()`` calls (its training step);
- ``decode_s``: the decode threads' busy time, all together (read from the map, parse,
  decode, augment: one native call per image; ``DecodePool.activity``), and
  ``decode_cpu_s`` its CPU time (less what the OS gave other threads meanwhile: the cost
  that carries over to another machine);
- ``fetch_wait_s``: a remote source's reader thread waiting for fetched bytes;
- ``thread_s``: decode threads x seconds they were active (the decode stage's capacity).

Utilisation of a stage = its busy time / the time it had: the decode stage's is
``decode_s / thread_s``, the consumer's ``consumer_s / wall``; the stage closest to 1 with
the consumer waiting is the one that limits (:func:`recio.bench.bottleneck.verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StageTimes"]


@dataclass
class StageTimes:
    """Seconds spent per stage since the iterator started (NOTE [stage times])."""

    batches: int = 0
    images: int = 0
    wall_s: float = 0.0
    wait_s: float = 0.0
    handover_s: float = 0.0
    consumer_s: float = 0.0
    decode_s: float = 0.0
    decode_cpu_s: float = 0.0
    thread_s: float = 0.0
    fetch_wait_s: float = 0.0
    threads: int = 0

    def add(
        self,
        images: int,
        wait_s: float,
        handover_s: float,
        away_s: float,
        decode_s: float,
        threads: int,
    ) -> None:
        """One batch: ``images`` delivered, the consumer's times, the decoders' busy time."""
        wall = wait_s + handover_s + away_s
        self.batches += 1
        self.images += images
        self.wait_s += wait_s
        self.handover_s += handover_s
        self.consumer_s += away_s
        self.wall_s += wall
        self.decode_s += decode_s
        self.thread_s += threads * wall
        self.threads = threads

    def utilisation(self) -> dict[str, float]:
        """Busy share of each stage: decode threads, the consumer, the waiting for input."""
        wall = self.wall_s or 1e-12
        return {
            "decode": self.decode_s / self.thread_s if self.thread_s else 0.0,
            "consumer": self.consumer_s / wall,
            "handover": self.handover_s / wall,
            "input_wait": self.wait_s / wall,
            "fetch_wait": self.fetch_wait_s / wall,
        }

    def per_image(self) -> dict[str, float]:
        """Seconds per delivered image of each stage (CPU seconds for decode)."""
        n = max(1, self.images)
        return {
            "decode": self.decode_s / n,
            "decode_cpu": self.decode_cpu_s / n,
            "consumer": self.consumer_s / n,
            "handover": self.handover_s / n,
            "wait": self.wait_s / n,
        }
