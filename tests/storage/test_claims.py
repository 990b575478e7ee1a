"""Claims: a block being fetched is claimed by a byte-range lock that goes with its owner."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from recio.storage.blockcache import BlockCache
from recio.storage.claims import Claims

REPO = Path(__file__).resolve().parents[2]


_CLAIMER = """
import sys, time
from recio.storage.blockcache import BlockCache
cache = BlockCache(sys.argv[1], 1 << 20)
mine, theirs = cache._claim("k", [(0, 10, None), (1, 10, None)])
print(len(mine), len(theirs), flush=True)
time.sleep(60)
"""


def test_a_claim_is_a_lock_that_goes_with_its_process_and_leaves_no_file(tmp_path):
    """NOTE [claims]: a block another process has claimed waits; once that process is
    killed (no unclaim ever runs), the claim is gone and the block is this process's to
    fetch. Claiming and letting go create no file in the folder."""
    claimer = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
        text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    try:
        assert claimer.stdout.readline().split() == ["2", "0"]
        cache = BlockCache(str(tmp_path), 1 << 20)
        mine, theirs = cache._claim("k", [(0, 10, None), (2, 10, None)])
        assert [b for b, *_ in mine] == [2] and [(b, o) for b, _, _, o in theirs] == [(0, "there")]
        name = os.path.basename(cache.entry("k", 0))
        assert cache._claims.still_held(name, "there")
    finally:
        claimer.kill()
        claimer.wait()
        claimer.stdout.close()
    assert not cache._claims.still_held(name, "there")
    mine, theirs = cache._claim("k", [(0, 10, None), (1, 10, None)])
    assert [b for b, *_ in mine] == [0, 1] and not theirs
    # another thread of this object waits for this one's claims, a second object in this
    # process (an open of its own) as for another process's
    _, theirs = cache._claim("k", [(1, 10, None)])
    assert [o for *_, o in theirs] == ["here"]
    other = BlockCache(str(tmp_path), 1 << 20)
    _, theirs = other._claim("k", [(1, 10, None)])
    assert [o for *_, o in theirs] == ["there"]
    cache._unclaim("k", [0, 1])
    assert [b for b, *_ in other._claim("k", [(1, 10, None)])[0]] == [1]
    other._unclaim("k", [1])
    assert sorted(os.listdir(tmp_path)) == [".claims", ".lock"]


def test_owners_here_there_and_none(tmp_path):
    """A thread of the same object sees "here", a second open (another object, or
    process) "there"; a claim let go is no one's, and the file is the only trace."""
    lock_a, lock_b = threading.Lock(), threading.Lock()
    a, b = Claims(str(tmp_path), lock_a), Claims(str(tmp_path), lock_b)
    with lock_a:
        assert a.owner("k-0001.blk") is None
        a.take("k-0001.blk")
        assert a.owner("k-0001.blk") == "here"
        assert a.owner("k-0002.blk") is None
    with lock_b:
        assert b.owner("k-0001.blk") == "there"
        assert b.owner("k-0002.blk") is None
    assert a.still_held("k-0001.blk", "here") and b.still_held("k-0001.blk", "there")
    a.release(["k-0001.blk"])
    assert not a.still_held("k-0001.blk", "here")
    assert not b.still_held("k-0001.blk", "there")
    with lock_b:
        assert b.owner("k-0001.blk") is None
    assert sorted(os.listdir(tmp_path)) == [".claims"]
