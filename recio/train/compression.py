"""2-bit gradient compression with error feedback, as MXNet's kvstore does it, for DDP.

Each gradient value, plus the residual kept from earlier steps, becomes one of
three codes: ``+threshold`` (bits 11) when it is at least ``threshold``,
``-threshold`` (bits 10) when it is at most ``-threshold``, else 0 (bits 00).
What was not sent stays in the residual and joins the next step's gradient.
Sixteen codes fill one 32-bit word, laid out in memory as MXNet's
``quantize_2bit`` writes them: byte ``k`` of a word holds values ``4k..4k+3``,
the first in its two highest bits. Each parameter is compressed on its own and
padded to a multiple of 16 values, as MXNet compresses each key.

The DDP communication hook all-gathers the packed words of every rank; each
rank dequantises all of them and averages, so the ranks stay identical.
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations at runtime.
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

VALUES_PER_WORD = 16


def packed_words(numel: int) -> int:
    """32-bit words needed for ``numel`` values."""
    return -(-numel // VALUES_PER_WORD)


def quantize_2bit(
    grad: torch.Tensor, residual: torch.Tensor, threshold: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed int32 words for ``grad + residual``, and the residual left after sending them.

    ``residual`` is not changed, so a caller can drop the step (an overflow) and
    keep the old residual.
    """
    flat = grad.detach().reshape(-1).float()
    if residual.numel() != flat.numel():
        raise ValueError(f"residual has {residual.numel()} values, gradient {flat.numel()}")
    total = residual + flat
    n_codes = packed_words(flat.numel()) * VALUES_PER_WORD
    codes = torch.zeros(n_codes, dtype=torch.int32, device=flat.device)
    pos = total >= threshold
    neg = total <= -threshold
    codes[: flat.numel()][pos] = 3
    codes[: flat.numel()][neg] = 2
    sent = (pos.float() - neg.float()) * threshold
    quads = codes.view(-1, 4)
    byte = (quads[:, 0] << 6) | (quads[:, 1] << 4) | (quads[:, 2] << 2) | quads[:, 3]
    # Bytes in memory order, read as native (little-endian) words: MXNet's layout.
    words = byte.to(torch.uint8).view(torch.int32)
    return words, total - sent


def dequantize_2bit(words: torch.Tensor, numel: int, threshold: float) -> torch.Tensor:
    """The float32 values (``numel`` of them) that packed ``words`` stand for."""
    byte = words.contiguous().view(torch.uint8).to(torch.int32)
    codes = torch.stack([(byte >> s) & 3 for s in (6, 4, 2, 0)], dim=1).reshape(-1)[:numel]
    out = torch.zeros(numel, dtype=torch.float32, device=words.device)
    out[codes == 3] = threshold
    out[codes == 2] = -threshold
    return out


@dataclass
class TwoBitState:
    """What the hook keeps between steps: residuals per parameter, and byte counts.

    ``grad_scale`` is the current loss scale (float16 training): gradients arrive
    scaled, and the threshold applies to the true gradient.
    """

    threshold: float = 0.5
    process_group: Any = None
    names: dict[int, str] = field(default_factory=dict)  # id(parameter) -> name
    residuals: dict[str, torch.Tensor] = field(default_factory=dict)
    grad_scale: float = 1.0
    sent_bytes: int = 0  # packed bytes this rank contributed since the last reset
    dense_bytes: int = 0  # what the uncompressed gradients would have been

    @classmethod
    def for_model(
        cls, model: torch.nn.Module, threshold: float, process_group: Any = None
    ) -> "TwoBitState":
        """A fresh state for ``model``'s trainable parameters (their names key the residuals)."""
        names = {id(p): n for n, p in model.named_parameters() if p.requires_grad}
        return cls(threshold=threshold, process_group=process_group, names=names)

    def reset_counts(self) -> tuple[int, int]:
        """``(sent_bytes, dense_bytes)`` since the last reset; both start again from 0."""
        counts = (self.sent_bytes, self.dense_bytes)
        self.sent_bytes = self.dense_bytes = 0
        return counts


def two_bit_hook(state: TwoBitState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: 2-bit quantise, all-gather packed words, dequantise, average."""
    group = state.process_group or dist.group.WORLD
    world = dist.get_world_size(group)
    buffer = bucket.buffer()
    grads = [g.reshape(-1) for g in bucket.gradients()]
    names = [state.names[id(p)] for p in bucket.parameters()]
    scale = state.grad_scale
    finite = bool(torch.isfinite(buffer).all())
    parts, new_residuals = [], []
    for name, g in zip(names, grads, strict=True):
        residual = state.residuals.get(name)
        if residual is None:
            residual = torch.zeros(g.numel(), dtype=torch.float32, device=g.device)
        if finite:
            words, left = quantize_2bit(g / scale, residual, state.threshold)
        else:
            words = torch.zeros(packed_words(g.numel()), dtype=torch.int32, device=g.device)
            left = residual
        parts.append(words)
        new_residuals.append(left)
    # The last word says whether this rank overflowed, so that every rank skips the step.
    parts.append(torch.tensor([0 if finite else 1], dtype=torch.int32, device=buffer.device))
    packed = torch.cat(parts)
    state.sent_bytes += packed.numel() * packed.element_size()
    state.dense_bytes += buffer.numel() * buffer.element_size()
    gathered = [torch.empty_like(packed) for _ in range(world)]
    work = dist.all_gather(gathered, packed, group=group, async_op=True)

    def finish(_: torch.futures.Future) -> torch.Tensor:
        if any(int(words[-1]) for words in gathered):
            # Someone overflowed: pass inf on so GradScaler skips; keep the old residuals.
            buffer.fill_(float("inf"))
            return buffer
        total = torch.zeros(buffer.numel(), dtype=torch.float32, device=buffer.device)
        for words in gathered:
            offset, pieces = 0, []
            for g in grads:
                n = packed_words(g.numel())
                pieces.append(dequantize_2bit(words[offset : offset + n], g.numel(), 1.0))
                offset += n
            total += torch.cat(pieces)
        total *= state.threshold * scale / world
        buffer.copy_(total.view_as(buffer).to(buffer.dtype))
        for name, left in zip(names, new_residuals, strict=True):
            state.residuals[name] = left
        return buffer

    return work.get_future().then(finish)
