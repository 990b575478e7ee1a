"""OpenOptions: how records are opened, one value for every opener.

Where remote bytes come from and how (``storage_options``, ``fetch``), whether they are
kept on local disk (``cache_dir``, ``cache_limit``) and whether reads are checked against
the checksum sidecar (``verify_checksums``). :class:`~.file.RecordFile`,
:func:`~.shards.open_records`, :class:`~.shards.ShardedRecords` and
:func:`recio.sampling.mixing.open_mixture` take it as ``options=``, or its fields one by
one as keywords; the iterator's :class:`recio.pipeline.config.Storage` makes one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import storage

__all__ = ["OpenOptions"]


@dataclasses.dataclass(frozen=True)
class OpenOptions:
    """How records are opened (the defaults: local reads, no cache, checksums "auto")."""

    storage_options: dict[str, Any] | None = None  # fsspec options (credentials, endpoint)
    fetch: storage.FetchOptions | None = None  # request sizes, retries, the cache's blocks
    # remote data kept on local disk: blocks up to cache_limit bytes (NOTE [block cache]),
    # or, without a limit, each file copied whole
    cache_dir: str | None = None
    cache_limit: int | None = None
    # reads checked against the checksum sidecar: "auto" where one exists, True: one must
    # exist, False: not checked (NOTE [checksums by default])
    verify_checksums: bool | str = "auto"

    def __post_init__(self) -> None:
        if self.cache_limit is not None:
            if self.cache_dir is None:
                raise ValueError(f"cache_limit={self.cache_limit} needs a cache_dir")
            if isinstance(self.cache_limit, bool) or int(self.cache_limit) < 1:
                raise ValueError(
                    f"cache_limit must be a number of bytes >= 1, not {self.cache_limit!r}"
                )
        if self.verify_checksums not in (True, False, "auto"):
            raise ValueError(
                f'verify_checksums must be True, False or "auto", not {self.verify_checksums!r}'
            )

    def keywords(self) -> dict[str, Any]:
        """The fields as keywords (the same objects, not copies)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @classmethod
    def given(cls, options: OpenOptions | None = None, **keywords: Any) -> OpenOptions:
        """``options``, else the value of the fields an opener took as keywords.

        Raises:
            TypeError: both ``options`` and a keyword other than its default.
        """
        if options is None:
            return cls(**keywords)
        defaults = cls()
        both = sorted(k for k, v in keywords.items() if v is not getattr(defaults, k))
        if both:
            raise TypeError(f"give options= or {', '.join(both)}, not both")
        return options
