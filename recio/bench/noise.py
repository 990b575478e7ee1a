"""Stages measured in interleaved rounds, and comparisons that hold only beyond their noise.

A busy machine slows whatever runs while it is busy. Measured one stage after another, two
stages see different loads, and their ratio says more about the load than about them. So
:func:`interleaved` runs every stage once per round (``seconds`` each, in an order rotated
from round to round), and :func:`compare` divides two stages' rates round by round: each
pair saw about the same load. The pairs' ratios spread by the load's changes; the median
ratio is an effect only where it stands further from 1 than any pair stands from it (and
by at least :data:`MIN_EFFECT`): otherwise the machine was too busy to tell.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from .stages import summary

__all__ = ["MIN_EFFECT", "Comparison", "compare", "interleaved", "rounds_of"]

#: The smallest change a verdict reports (5 %): less is no change worth a setting.
MIN_EFFECT = 0.05

Step = Callable[[], tuple[int, int]]
Factory = Callable[[], tuple[Step, Callable[[], None]]]


def interleaved(
    stages: dict[str, Factory],
    seconds: float,
    repeats: int,
    log: Callable[[str], None] = print,
) -> dict[str, dict]:
    """Measure each stage ``repeats`` times, one of each per round; rates and their rounds.

    Each measurement opens the stage (``factory()`` gives ``(step, close)``), runs one
    step as a warm-up, times steps for ``seconds`` and closes it, so a stage left open
    never works while another is measured. A stage's result is :func:`~.stages.timed`'s
    (``images_per_s``, ``MB_per_s``) with ``rounds``: its images/s in each round.
    """
    names = list(stages)
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(repeats):
        log(f"  round {r + 1} of {repeats}: {', '.join(names)}")
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            step, close = stages[name]()
            try:
                rounds[name].append(_rate(step, seconds))
            finally:
                close()
    out = {}
    for name in names:
        images = [i for i, _ in rounds[name]]
        out[name] = {
            "images_per_s": summary(images),
            "MB_per_s": summary([b / 1e6 for _, b in rounds[name]]),
            "rounds": images,
        }
    return out


def _rate(step: Step, seconds: float) -> tuple[float, float]:
    step()  # warm-up: the pool's threads, the page cache, the iterator's first batches
    images = nbytes = 0
    start = time.perf_counter()
    while True:
        i, b = step()
        images += i
        nbytes += b
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return images / elapsed, nbytes / elapsed


def rounds_of(stage: dict) -> list[float]:
    """A stage's images/s in each interleaved round (its median alone for a result without)."""
    return stage.get("rounds") or [stage["images_per_s"]["median"]]


@dataclass(frozen=True)
class Comparison:
    """Stage ``a`` against stage ``b``, round by round.

    ``ratio``: the median of the rounds' ``a / b``; ``low``, ``high``: the smallest and
    largest round's; ``noise``: how far the farthest round's ratio stands from the median,
    as a factor (0.1: 10 %); ``decided``: the median differs from 1 by more than the noise
    and by at least :data:`MIN_EFFECT`; ``same``: it differs by less than
    :data:`MIN_EFFECT`, with no round further from it than that.
    """

    ratio: float
    low: float
    high: float
    noise: float
    rounds: int

    @property
    def effect(self) -> float:
        """How far the median ratio stands from 1, as a factor (0.2: 1.2x or 1/1.2x)."""
        return math.exp(abs(math.log(self.ratio))) - 1

    @property
    def decided(self) -> bool:
        """A difference larger than the run's own noise, and worth a setting."""
        return self.effect >= MIN_EFFECT and self.effect > self.noise

    @property
    def same(self) -> bool:
        """No difference worth a setting, measured within :data:`MIN_EFFECT`."""
        return self.effect < MIN_EFFECT and self.noise < MIN_EFFECT

    def spread(self) -> str:
        """The rounds' ratios in words, for a verdict."""
        if self.rounds == 1:
            return f"{self.ratio:.2f}x in one round, no spread to judge it by"
        return (
            f"{self.low:.2f}x to {self.high:.2f}x in {self.rounds} interleaved rounds, "
            f"noise ±{self.noise:.0%}"
        )

    def cannot_tell(self, what: str, ran: str) -> str:
        """Why no verdict on ``what``: ``ran`` (``"A ran at"``) its spread; what to run."""
        if self.rounds == 1:
            return (
                f"one round cannot tell {what} from the machine's noise ({ran} "
                f"{self.ratio:.2f}x); run `recio bench` with --repeats 3 or more"
            )
        return (
            f"the machine was too busy to tell {what}: {ran} {self.spread()}, a spread "
            f"larger than the {self.ratio:.2f}x measured; run `recio bench` again with more "
            "--repeats when the machine is quieter"
        )


def compare(a: list[float], b: list[float]) -> Comparison:
    """Stage ``a``'s rates against ``b``'s, measured in the same rounds (:func:`interleaved`).

    With one round there is no spread to judge by: the noise is taken as infinite, so
    nothing is decided.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"need the same rounds of both stages, not {len(a)} and {len(b)}")
    ratios = sorted(x / y for x, y in zip(a, b, strict=True))
    n = len(ratios)
    median = ratios[n // 2] if n % 2 else math.sqrt(ratios[n // 2 - 1] * ratios[n // 2])
    far = max(abs(math.log(r / median)) for r in ratios)
    noise = math.exp(far) - 1 if n > 1 else math.inf
    return Comparison(median, ratios[0], ratios[-1], noise, n)
