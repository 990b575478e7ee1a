"""The training core's built-in model: a small ResNet (basic blocks, batch norm).

Wide and deep enough to learn the sample dataset in a few epochs, small enough
to train on a laptop CPU. For small images (up to 64 px) the stem keeps full
resolution, as CIFAR ResNets do; for larger ones it downsamples by 4, as the
ImageNet ResNets do.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class BasicBlock(nn.Module):
    """Two 3×3 convolutions and a shortcut (a 1×1 convolution when the shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Two 3×3 convolutions with batch norm, plus the shortcut, then ReLU."""
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem, stages of basic blocks (each after the first halves the resolution), pool, linear."""

    def __init__(
        self,
        num_classes: int,
        widths: Sequence[int] = (16, 32, 64),
        blocks: Sequence[int] = (1, 1, 1),
        image_size: int = 32,
    ) -> None:
        super().__init__()
        if len(widths) != len(blocks) or not widths:
            raise ValueError(f"widths {widths} and blocks {blocks} must have the same length")
        if image_size <= 64:
            self.stem = nn.Sequential(
                nn.Conv2d(3, widths[0], 3, 1, 1, bias=False),
                nn.BatchNorm2d(widths[0]),
                nn.ReLU(inplace=True),
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                nn.BatchNorm2d(widths[0]),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
        layers: list[nn.Module] = []
        in_ch = widths[0]
        for i, (width, count) in enumerate(zip(widths, blocks, strict=True)):
            for j in range(count):
                stride = 2 if i > 0 and j == 0 else 1
                layers.append(BasicBlock(in_ch, width, stride))
                in_ch = width
        self.stages = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # Zero the last BN of each block: every block starts as the identity (Goyal et al.).
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (N×num_classes) for images ``x`` (N×3×H×W)."""
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def resnet(
    num_classes: int,
    width: int = 16,
    blocks: Sequence[int] = (1, 1, 1),
    image_size: int = 32,
) -> ResNet:
    """A ResNet whose stage widths double from ``width``; ``blocks`` per stage."""
    widths = [width * 2**i for i in range(len(blocks))]
    return ResNet(num_classes, widths, blocks, image_size)
