"""``preprocess_threads="auto"``: the decode threads follow what the consumer needs.

NOTE [thread tuner]: after each batch the iterator tells the tuner how long the consumer
waited inside ``next()`` and how long it was away (its own step), and what share of the
batches in flight were already decoded when it came back. Every ``window`` batches the tuner
decides:

- the consumer waited more than ``starve`` of its time: the input is the bottleneck; one
  more thread, up to the plan's share of the cores;
- it (almost) never waited and at least ``idle`` of the batches in flight were sitting ready
  on average: the decoders outrun the consumer; one thread parked;
- else nothing.

Hysteresis, so that it settles: a window right after a change is not judged (the queue is
still filling or draining); when the consumer starves in the window after a park, or takes
batches more than ``drop`` slower than in the window that decided it, the thread comes back
and that count becomes a floor that is not parked below again (the consumer does need it);
a floor is forgotten after ``forget`` windows without a change, so that a consumer that
slows down later still lets threads go.

The rate check tells a consumer that is slow because of its own step from one that is slow
because other jobs hold the cores: both leave batches ready and never wait, but parking a
thread behind a real step changes nothing, while on busy cores it costs the pipeline a
share of the CPU and the consumer's rate falls with it.

Cores busy elsewhere: where the decode threads ran on a core less than ``contended`` of the
time they were working (their CPU time against their busy time, from the pool), other jobs
hold the cores, and a thread more wins the pipeline a larger share of them. So while the
consumer starves in such a window the tuner adds threads past the plan's share, up to
``burst`` (the pool's size), one at a time, and keeps each only if the consumer's rate rose
with it (by more than ``gain``; 0: any rise, since a thread more on busy cores costs little
and the noise must not take a useful one away). Where it did not (the other jobs are this
job's own ranks, say, and a thread more only adds switching) it is parked again and the
count becomes a ceiling until the floor is forgotten. A window whose threads are not
contended parks the threads past the share again.

Parking only, never ending threads (NOTE [parked threads] in native/pool.c), so a change
costs nothing. The decisions are a function of the observations alone, so tests drive them
with made-up times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ThreadTuner"]


@dataclass
class ThreadTuner:
    """Decides the active decode threads from the consumer's waits (NOTE [thread tuner])."""

    most: int
    threads: int
    least: int = 1
    window: int = 8
    starve: float = 0.05
    calm: float = 0.01
    idle: float = 0.6
    forget: int = 100
    drop: float = 0.25
    burst: int = 0
    contended: float = 0.8
    gain: float = 0.0
    changes: list[tuple[int, int]] = field(default_factory=list)  # (batch, threads) per change
    _wait: float = 0.0
    _away: float = 0.0
    _ready: float = 0.0
    _seen: int = 0
    _batches: int = 0
    _skip: bool = False
    _floor: int = 1
    _parked_last: bool = False
    _quiet: int = 0
    _rate_before_park: float = 0.0
    _busy: float = 0.0
    _cpu: float = 0.0
    _added_past_share: bool = False
    _rate_before_add: float = 0.0
    _ceiling: int = 0

    def __post_init__(self) -> None:
        self.least = max(1, self.least)
        self.most = max(self.least, self.most)
        self.burst = max(self.most, self.burst)
        self.threads = min(self.most, max(self.least, self.threads))
        self._floor = self.least
        self._ceiling = self.burst

    def observe(
        self, wait_s: float, away_s: float, ready: float, busy_s: float = 0.0, cpu_s: float = 0.0
    ) -> int | None:
        """One batch: the consumer's wait in ``next()``, its time away, the ready share.

        ``busy_s``, ``cpu_s``: the decode threads' working and CPU seconds meanwhile (0:
        not known, taken as not contended). Returns the new thread count when it changes, else None.
        """
        self._wait += max(0.0, wait_s)
        self._away += max(0.0, away_s)
        self._ready += min(1.0, max(0.0, ready))
        self._busy += max(0.0, busy_s)
        self._cpu += max(0.0, cpu_s)
        self._seen += 1
        self._batches += 1
        if self._seen < self.window:
            return None
        wait, total, ready_mean = self._wait, self._wait + self._away, self._ready / self._seen
        rate = self._seen / total if total > 0 else 0.0  # batches a second, as the consumer saw
        contended = self._busy > 0 and self._cpu < self.contended * self._busy
        self._wait = self._away = self._ready = self._busy = self._cpu = 0.0
        self._seen = 0
        if self._skip:  # the window after a change: the queue was settling
            self._skip = False
            return None
        share = wait / total if total > 0 else 0.0
        parked_last, self._parked_last = self._parked_last, False
        added, self._added_past_share = self._added_past_share, False
        slower = parked_last and rate < (1 - self.drop) * self._rate_before_park
        top = min(self.burst, self._ceiling) if contended else self.most
        new = self.threads
        if added and rate <= (1 + self.gain) * self._rate_before_add:
            new = self.threads - 1  # a thread past the share that won nothing
            self._ceiling = new
        elif (share > self.starve or slower) and self.threads < top:
            new = self.threads + 1
            if parked_last:  # parked one too many: this count is needed
                self._floor = max(self._floor, new)
            if new > self.most:
                self._added_past_share, self._rate_before_add = True, rate
        elif self.threads > self.most and not contended:  # the cores are free again
            new = self.threads - 1
        elif share < self.calm and ready_mean >= self.idle and self.threads > self._floor:
            new = self.threads - 1
            self._parked_last, self._rate_before_park = True, rate
        if new == self.threads:
            self._quiet += 1
            if self._quiet >= self.forget:
                self._floor, self._ceiling, self._quiet = self.least, self.burst, 0
            return None
        self.threads, self._skip, self._quiet = new, True, 0
        self.changes.append((self._batches, new))
        return new


class Governor:
    """The iterator's per-batch hook: stage times into ``stats.stages``, the tuner's moves.

    ``pool``: the iterator's :class:`~recio.decode.DecodePool`; ``tuner``: None for a
    fixed thread count (nothing is changed, only measured).
    """

    def __init__(self, pool, stages, tuner: ThreadTuner | None) -> None:
        self.pool = pool
        self.stages = stages
        self.tuner = tuner
        self._left: float | None = None  # when the consumer last left next()
        _, self._busy, self._cpu = pool.activity()
        self._fetched = 0.0  # the running pipeline's reader wait, as last seen

    def batch(self, entered: float, left: float, images: int, pipeline: Any) -> None:
        """A batch handed over: the consumer came in at ``entered`` and left at ``left``.

        ``pipeline``: the running one; its ``blocked`` is the time of that the consumer
        waited for the batch (the rest is recio's Python that hands it over), its
        ``fetch_wait`` the reader's wait for the store so far, its ``ready_share()`` the
        share of the batches in flight already decoded (asked only when tuning).
        """
        first = self._left is None  # of a pipeline just started: its wait is no signal
        away = 0.0 if first else max(0.0, entered - self._left)
        blocked, inside = pipeline.blocked, left - entered
        threads, busy, cpu = self.pool.activity()
        busy_s, cpu_s = busy - self._busy, cpu - self._cpu
        fetched = getattr(pipeline, "fetch_wait", 0.0)
        self.stages.add(images, blocked, inside - blocked, away, busy_s, threads)
        self.stages.decode_cpu_s += cpu_s
        self.stages.fetch_wait_s += max(0.0, fetched - self._fetched)
        self._busy, self._cpu, self._left, self._fetched = busy, cpu, left, fetched
        if self.tuner is not None and not first:
            new = self.tuner.observe(
                blocked, away + inside - blocked, pipeline.ready_share(), busy_s, cpu_s
            )
            if new is not None:
                self.pool.set_active_threads(new)

    def pause(self) -> None:
        """An epoch ended or the pipeline stopped: the time until the next batch is no step."""
        self._left = None

    def started(self) -> None:
        """A new pipeline runs: its reader's wait counts from zero."""
        self._fetched = 0.0
