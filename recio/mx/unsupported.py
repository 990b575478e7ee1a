"""The MXNet names recio.mx does not have: an error that says so and what to use instead."""

from __future__ import annotations

from typing import NoReturn

# MXNet name (the last part, or a module) -> what to use with recio instead
EQUIVALENTS = {
    "io": "recio.ImageRecordIter (mx.io.ImageRecordIter's keywords) or recio.RecordDataset",
    "ImageRecordIter": "recio.ImageRecordIter, which takes mx.io.ImageRecordIter's keywords",
    "ImageIter": "recio.ImageRecordIter, or recio.RecordDataset for a DataLoader",
    "DataBatch": "the batches of recio.ImageRecordIter (batch.data, batch.label)",
    "CreateAugmenter": "the augmentation keywords of recio.ImageRecordIter / RecordDataset",
    "imread": "recio.mx.image.imdecode(open(path, 'rb').read())",
    "gpu": "torch.device('cuda', i): recio.mx runs on numpy, on the CPU",
    "cpu": "nothing: recio.mx arrays are numpy arrays on the CPU",
    "Context": "torch.device: recio.mx arrays are numpy arrays on the CPU",
    "context": "torch.device: recio.mx arrays are numpy arrays on the CPU",
    "kv": "recio.dist (rank and world size) and torch.distributed",
    "kvstore": "recio.dist (rank and world size) and torch.distributed",
    "mod": "a PyTorch model (recio's training core: python -m recio.train)",
    "model": "a PyTorch model (recio's training core: python -m recio.train)",
    "sym": "a PyTorch model",
    "symbol": "a PyTorch model",
    "gluon": "PyTorch (torch.nn, torch.utils.data with recio.RecordDataset)",
    "autograd": "torch.autograd",
    "optimizer": "torch.optim",
    "metric": "your own metric on numpy or torch",
    "random": "numpy.random",
    "as_in_context": "torch.from_numpy(x.asnumpy()).to(device): recio.mx arrays stay on the CPU",
    "copyto": "torch.from_numpy(x.asnumpy()).to(device), or out[:] = x",
    "wait_to_read": "nothing: numpy arrays are ready when made",
    "attach_grad": "torch.autograd on a tensor of x.asnumpy()",
}


class UnsupportedMXNetName(AttributeError):
    """An MXNet name recio.mx does not provide; the message names what to use instead.

    An ``AttributeError`` so that ``hasattr`` and ``getattr(mx, name, default)`` behave as
    for any missing attribute.
    """


def unsupported(qualified: str, name: str) -> NoReturn:
    """Raise the error for ``name`` (``qualified``: as the user wrote it)."""
    if name.startswith("__"):  # Python's own probes (__path__, __wrapped__ ...)
        raise AttributeError(name)
    instead = EQUIVALENTS.get(name, "numpy (recio.mx covers InsightFace's calls only)")
    raise UnsupportedMXNetName(f"{qualified} is not in recio.mx: use {instead}")
