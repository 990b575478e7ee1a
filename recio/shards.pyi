"""Old import path of :mod:`recio.records.shards`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.records.shards`` instead.
"""

from recio.records.shards import ShardedLayout as ShardedLayout
from recio.records.shards import ShardedRecords as ShardedRecords
from recio.records.shards import ShardGroup as ShardGroup
from recio.records.shards import Spec as Spec
from recio.records.shards import expand_shards as expand_shards
from recio.records.shards import is_shard_spec as is_shard_spec
from recio.records.shards import open_records as open_records
