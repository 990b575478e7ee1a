"""Finding DALI and the GPU: one clear message where either is missing.

DALI is imported only through :func:`load_dali`, so ``import recio.dali`` works (and the
DALI-free source can be used) where DALI is not installed.
"""

from __future__ import annotations

from .._install import install_hint

INSTALL_HINT = install_hint("dali")


class DeviceUnavailableError(RuntimeError):
    """The GPU was asked for, but DALI sees no CUDA device."""


def load_dali():
    """The ``nvidia.dali`` module, or an ImportError that says how to install it."""
    try:
        import nvidia.dali as dali
    except ImportError as exc:
        raise ImportError(f"recio.dali needs NVIDIA DALI: {INSTALL_HINT}") from exc
    return dali


def gpu_count() -> int:
    """CUDA devices DALI can use; 0 (never an exception) where there is no driver or GPU."""
    from nvidia.dali import backend

    try:
        return int(backend.GetCUDADeviceCount())
    except Exception:  # noqa: BLE001 - any failure to query the driver means "no GPU"
        return 0


def resolve_device(device: str = "auto") -> str:
    """``"gpu"`` or ``"cpu"``; ``"auto"`` picks the GPU when DALI sees one.

    Raises:
        DeviceUnavailableError: ``device="gpu"`` and no CUDA device is visible; the message
            says what to install and which fallback to use (instead of DALI's raw
            ``dlopen libcuda.so failed`` at pipeline build).
    """
    load_dali()
    if device not in ("auto", "gpu", "cpu"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'cpu', not {device!r}")
    if device == "cpu":
        return "cpu"
    if gpu_count() > 0:
        return "gpu"
    if device == "auto":
        return "cpu"
    raise DeviceUnavailableError(
        "recio.dali: device='gpu' but DALI finds no CUDA device "
        "(nvidia.dali.backend.GetCUDADeviceCount() is 0: no NVIDIA driver / libcuda.so, or "
        "CUDA_VISIBLE_DEVICES hides the GPUs). On a GPU machine install the NVIDIA driver and "
        f"{INSTALL_HINT}. Without a GPU use device='cpu' (the same DALI graph on the CPU) or "
        "recio.ImageRecordIter (recio's native CPU decoder, usually faster there)."
    )
