"""recio: a data input pipeline engine for image models on MXNet-compatible RecordIO."""

__version__ = "0.1.0"
