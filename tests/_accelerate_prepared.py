"""Under torchrun: a DataLoader around TorchBatches given to accelerator.prepare is refused on
every rank (none is left waiting for a broadcast), and the TorchBatches itself comes back from
prepare unchanged. Prints one JSON line per rank."""

from __future__ import annotations

import json
import sys

import torch
from accelerate import Accelerator

from recio.frameworks.torch_data import TorchBatches
from recio.pipeline.iterator import ImageRecordIter

accelerator = Accelerator(cpu=True)
it = ImageRecordIter(path_imgrec=sys.argv[1], data_shape=(3, 16, 16), batch_size=8, resize=16)
batches = TorchBatches(it)
report = {"rank": accelerator.process_index, "unchanged": accelerator.prepare(batches) is batches}
loader = accelerator.prepare(torch.utils.data.DataLoader(batches, batch_size=None))
report["wrapper"] = type(loader).__name__
try:
    next(iter(loader))
except RuntimeError as exc:
    report["error"] = str(exc)
report["ids"] = sorted(i for b in batches for i in b.index.tolist())  # unprepared: its shard
# one write of the whole line: two ranks share the pipe, and a line written in pieces (text,
# then its newline) can interleave with the other rank's
sys.stdout.write(json.dumps(report) + "\n")
sys.stdout.flush()
it.close()
accelerator.wait_for_everyone()
accelerator.end_training()
