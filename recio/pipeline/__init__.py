"""The training input pipeline: records at positions in, decoded batches out.

:mod:`.config` checks MXNet's keywords once; :mod:`.positioned` is what every iterator
shares (epochs, ``len``, resumable state, the error policy); :mod:`.read_decode` turns a
batch's positions into pixels; :mod:`.iterator` is ``ImageRecordIter``, its threads and
prefetch; :mod:`.mxnet_inputs` reads the files MXNet takes beside the ``.rec``.
"""
