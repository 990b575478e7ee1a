"""The C boundary of recio._native: close() racing running batches, the status codes the
extension exports, the SIMD path it reports, and what it links.

Every test needs the extension (``needs_native``: skipped where it is not built, failed
under CI).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from recio import decode
from recio.decode.pool import _native

from .images import encode

pytestmark = pytest.mark.needs_native

MACHINE = platform.machine().lower()
X86_64 = MACHINE in ("x86_64", "amd64")
X86 = X86_64 or MACHINE in ("i386", "i486", "i586", "i686", "x86")


def _run(script: str, timeout: float, **env: str) -> subprocess.CompletedProcess:
    """Runs script in a fresh interpreter that imports this checkout's recio (a crash shows
    as a negative or non-zero return code instead of taking pytest down)."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


# Pools, each closed from a second thread while a batch may be running on it. Every fifth
# entry point in turn (decode_batch, image_sizes, transcode_batch, resize_encode, and
# decode_batch on spans of one buffer); every tenth
# pool is closed before the batch starts, which must be refused. A tiny switch interval makes
# the GIL change hands as soon as the batch releases it, so that close() runs inside the
# released section as often as possible.
STRESS = """
import io, random, sys, threading, time
import numpy as np
from PIL import Image
from recio import _native
_options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
    out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
    max_pixels=1 << 27)

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
sys.setswitchinterval(1e-6)
rng = random.Random(1234)
failures = []
threading.excepthook = lambda a: failures.append(f"{a.exc_type.__name__}: {a.exc_value}")

def jpeg(seed):
    g = np.random.default_rng(seed)
    px = g.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    b = io.BytesIO()
    Image.fromarray(px).save(b, "JPEG", quality=85)
    return b.getvalue()

bufs = [jpeg(s) for s in range(32)]
n = len(bufs)
base = bytearray(b"".join(bufs))
lengths = np.array([len(b) for b in bufs], np.int64)
starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
H, W = 24, 32
rgb = np.random.default_rng(7).integers(0, 256, (48, 64, 3), dtype=np.uint8)

def run_batch(pool, kind):
    if kind == 0:
        out = np.zeros((n, H, W, 3), np.uint8)
        status = np.full(n, -1, np.int32)
        errors = pool.decode_batch(bufs, out, status, _options(H, W))
        assert status.tolist() == [0] * n, status
        assert errors is None, errors  # None: no image failed
        assert out.reshape(n, -1).max(axis=1).min() > 0  # every image written
    elif kind == 1:
        sizes = np.zeros((n, 2), np.int32)
        assert pool.image_sizes(bufs, sizes) is None
        assert sizes.tolist() == [[64, 48]] * n, sizes
    elif kind == 2:
        status = np.full(n, -1, np.int32)
        sizes = np.array([[W, H]] * n, np.int32)
        res = pool.transcode_batch(bufs, status=status, crops=None, sizes=sizes, quality=90,
                                   gray=0, interp=0, dct_mode=1, max_pixels=1 << 27)
        assert status.tolist() == [0] * n, status
        assert all(isinstance(r, bytes) and r[:2] == b"\\xff\\xd8" for r in res)
    elif kind == 3:
        res = pool.resize_encode(rgb, width=64, height=48, crop=(0, 0, 64, 48), out_w=W, out_h=H,
                                 quality=90, interp=0)
        assert res[:2] == b"\\xff\\xd8"
    else:
        out = np.zeros((n, H, W, 3), np.uint8)
        status = np.full(n, -1, np.int32)
        errors = pool.decode_batch(base, out, status, _options(H, W), starts=starts,
                                   lengths=lengths)
        assert status.tolist() == [0] * n and errors is None, (status, errors)
        assert out.reshape(n, -1).max(axis=1).min() > 0
        base.append(0)  # the batch's view of the base is released: it may be resized again
        del base[-1]

completed = refused = 0
for i in range(N):
    pool = _native.Pool(2)
    kind = i % 5
    early = i % 10 == 0
    go = threading.Event()
    delay = rng.random() * 0.002

    def closer():
        go.wait()
        end = time.perf_counter() + delay
        while time.perf_counter() < end:
            pass
        pool.close()

    t = threading.Thread(target=closer)
    t.start()
    if early:
        go.set()
        t.join()
    go.set()
    try:
        run_batch(pool, kind)
    except ValueError as e:
        assert "pool is closed" in str(e), e
        refused += 1
    else:
        assert not early, "a batch on a closed pool ran"
        completed += 1
    t.join()
    assert pool.closed and pool.num_threads == 0
    try:
        run_batch(pool, kind)
    except ValueError as e:
        assert "pool is closed" in str(e), e
    else:
        raise AssertionError("a batch after close() ran")
    pool.close()  # idempotent
assert not failures, failures
print("completed", completed, "refused", refused)
"""


def test_close_while_batches_run() -> None:
    """close() from another thread waits for the running batch or refuses a new one with a
    ValueError; it never crashes (the subprocess would die of a signal, or ASan abort)."""
    res = _run(STRESS, 120)
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    words = res.stdout.split()
    completed, refused = int(words[-3]), int(words[-1])
    assert completed + refused == 300
    assert refused >= 30  # the pools closed before their batch
    assert completed > 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_concurrent_close_calls_and_batches() -> None:
    """Several threads run batches on one pool while two others close it: each batch either
    completes or is refused, and both close() calls return only once the pool's threads are
    joined."""
    script = """
    import io, os, sys, threading, time
    import numpy as np
    from PIL import Image
    from recio import _native
    _options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
        out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
        max_pixels=1 << 27)

    sys.setswitchinterval(1e-6)
    failures = []
    threading.excepthook = lambda a: failures.append(f"{a.exc_type.__name__}: {a.exc_value}")
    b = io.BytesIO()
    Image.fromarray(np.full((40, 40, 3), 99, np.uint8)).save(b, "JPEG")
    bufs = [b.getvalue()] * 16
    results = []

    def tasks():
        return len(os.listdir("/proc/self/task"))

    for _ in range(40):
        before = tasks()
        pool = _native.Pool(2)
        start = threading.Barrier(6)

        def batch():
            start.wait()
            for _ in range(5):
                out = np.zeros((16, 8, 8, 3), np.uint8)
                st = np.zeros(16, np.int32)
                try:
                    pool.decode_batch(bufs, out, st, _options(8, 8))
                    assert st.tolist() == [0] * 16
                    results.append("ok")
                except ValueError as e:
                    assert "pool is closed" in str(e)
                    results.append("refused")

        def close():
            start.wait()
            pool.close()
            assert pool.closed and pool.num_threads == 0
            # returns only once the pool's threads are joined, also for the second caller; a
            # joined thread can stay listed in /proc for a moment while the kernel finishes
            # its exit (the join returns when the kernel clears its tid), so look again briefly
            for _ in range(20):
                if tasks() <= before + 6:
                    break
                time.sleep(0.001)
            assert tasks() <= before + 6, (tasks(), before)

        ts = [threading.Thread(target=f) for f in [batch] * 4 + [close] * 2]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not failures, failures
    print(len(results))
    """
    res = _run(script, 120)
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stderr[-4000:]}"
    assert res.stdout.split()[-1] == str(40 * 4 * 5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_close_in_forked_child_does_not_wait_for_the_parents_batch() -> None:
    """A child forked while a batch runs in the parent sees that batch as busy in its copy of
    the pool; there the pool refuses batches and close() returns at once (no join, no wait)."""
    script = """
    import io, os, signal, threading, time, traceback
    import numpy as np
    from PIL import Image
    from recio import _native
    _options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
        out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
        max_pixels=1 << 27)

    b = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (256, 256, 3), np.uint8)).save(
        b, "JPEG")
    bufs = [b.getvalue()] * 64
    pool = _native.Pool(2)
    stop = False

    def batch():
        out = np.zeros((64, 32, 32, 3), np.uint8)
        st = np.zeros(64, np.int32)
        pool.decode_batch(bufs, out, st, _options(32, 32))

    def loop():
        while not stop:
            batch()

    t = threading.Thread(target=loop)
    t.start()
    time.sleep(0.05)
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)  # a hang dies of SIGALRM
        try:
            try:
                batch()
                os._exit(3)
            except RuntimeError as e:
                assert "another process" in str(e), e
            assert not pool.closed
            pool.close()
            assert pool.closed and pool.num_threads == 0
            pool.close()
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    stop = True
    t.join()
    _, status = os.waitpid(pid, 0)
    pool.close()
    print(os.waitstatus_to_exitcode(status))
    """
    res = _run(script, 120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == "0", res.stdout + res.stderr


def test_close_at_exit_while_a_daemon_thread_decodes() -> None:
    """close() while the interpreter exits and a daemon thread is in a batch: that thread
    never takes the GIL back, so close() must not wait for it (the exit would hang)."""
    script = """
    import gc, io, os, threading, time
    import numpy as np
    from PIL import Image
    from recio import _native
    _options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
        out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
        max_pixels=1 << 27)

    b = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (512, 512, 3), np.uint8)).save(
        b, "JPEG")
    bufs = [b.getvalue()] * 64
    pool = _native.Pool(2)

    def loop():
        out = np.zeros((64, 32, 32, 3), np.uint8)
        st = np.zeros(64, np.int32)
        while True:
            pool.decode_batch(bufs, out, st, _options(32, 32))

    class Closer:
        def __init__(self, p):
            self.p = p

        def __del__(self, write=os.write):
            self.p.close()
            write(1, b"closed\\n")

    gc.disable()
    closer = Closer(pool)
    closer.cycle = closer
    del closer  # collected by the last collection of the exit, after daemon threads stop
    threading.Thread(target=loop, daemon=True).start()
    time.sleep(0.2)
    """
    res = _run(script, 60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["closed"], res.stdout


# --- spans: a batch's images as byte ranges of one buffer -------------------------------


def _options(out_h: int = 12, out_w: int = 16):
    """The JobOptions of an NHWC uint8 decode, bilinear, pow2 DCT scaling, ROI decode."""
    return _native.JobOptions(
        out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
        max_pixels=1 << 27,
    )  # fmt: skip


def _spanned(bufs: list[bytes], gap: int = 3) -> tuple[bytearray, np.ndarray, np.ndarray]:
    """bufs laid out in one bytearray, ``gap`` junk bytes before each: (base, starts, lengths)."""
    base, starts = bytearray(), []
    for b in bufs:
        base += b"\x5a" * gap
        starts.append(len(base))
        base += b
    return base, np.array(starts, np.int64), np.array([len(b) for b in bufs], np.int64)


def _decode(pool, images, n: int, *spans) -> tuple[np.ndarray, np.ndarray, object]:
    out = np.full((n, 12, 16, 3), 7, np.uint8)
    status = np.full(n, -1, np.int32)
    errors = pool.decode_batch(images, out, status, _options(), None, None, *spans)
    return out, status, errors


def test_spans_decode_as_the_list_does() -> None:
    bufs = [encode(40 + 8 * s, 30, seed=s) for s in range(6)] + [b"not a jpeg", b""]
    base, starts, lengths = _spanned(bufs)
    pool = _native.Pool(2)
    try:
        want_out, want_status, want_errors = _decode(pool, bufs, len(bufs))
        got_out, got_status, got_errors = _decode(pool, bytes(base), len(bufs), starts, lengths)
        sizes_list, sizes_spans = np.zeros((8, 2), np.int32), np.zeros((8, 2), np.int32)
        pool.image_sizes(bufs, sizes_list)
        pool.image_sizes(base, sizes_spans, starts, lengths)
    finally:
        pool.close()
    np.testing.assert_array_equal(got_out, want_out)
    assert got_status.tolist() == want_status.tolist()
    assert want_status[:6].tolist() == [0] * 6 and want_status[6] == decode.STATUS_UNSUPPORTED
    assert got_errors == want_errors and got_errors[0] is None and got_errors[7]
    assert sizes_spans.tolist() == sizes_list.tolist()
    assert sizes_spans[0].tolist() == [40, 30]


def _records_args(n: int, label_width: int = 1):
    out = np.full((n, 12, 16, 3), 7, np.uint8)
    status = np.full(n, -1, np.int32)
    heads = (np.zeros((n, label_width), np.float32), np.zeros(n, np.int64),
             np.zeros(n, np.int64), np.zeros(n, np.int64))  # fmt: skip
    return out, status, heads


def test_records_outside_the_base_or_malformed_are_left_to_the_exact_parse() -> None:
    """decode_records reads nothing outside its base: a record it cannot parse plainly
    (negative, misaligned, past the end, bad magic, continued frame) gets STATUS_RECORD."""
    from recio.records.format import IRHeader, pack

    payload = pack(IRHeader(0, 3.0, 42, 0), encode(20, 10))
    frame = struct.pack("<II", 0xCED7230A, len(payload)) + payload
    good = frame + b"\0" * (-len(frame) % 4)
    base = bytearray(good * 2)
    base[len(good) : len(good) + 4] = b"XXXX"  # the second record's magic
    cont = bytearray(good)
    struct.pack_into("<I", cont, 4, (1 << 29) | len(payload))  # cflag 1: first of frames
    base += cont
    offsets = np.array([0, -4, 2, len(base) - 8, 1 << 40, len(good), 2 * len(good)], np.int64)
    n = len(offsets)
    out, status, (labels, ids, starts, lengths) = _records_args(n)
    pool = _native.Pool(2)
    try:
        errors = pool.decode_records(
            bytes(base), offsets, labels, ids, starts, lengths, out, status, _options()
        )
        with pytest.raises(ValueError, match="labels"):
            pool.decode_records(
                bytes(base),
                offsets,
                np.zeros(3, np.float32),
                ids,
                starts,
                lengths,
                out,
                status,
                _options(),
            )
    finally:
        pool.close()
    assert status.tolist() == [0] + [decode.STATUS_RECORD] * (n - 1)
    assert errors is not None and errors[0] is None
    assert labels[0, 0] == 3.0 and ids.tolist() == [42] + [-1] * (n - 1)
    assert starts[0] == 8 + 24 and lengths[0] == len(payload) - 24
    assert out[0].max() > 0


def test_a_batch_without_failures_returns_no_error_list() -> None:
    bufs = [encode(20, 10)] * 3
    pool = _native.Pool(1)
    try:
        _, status, errors = _decode(pool, bufs, 3)
        assert status.tolist() == [0, 0, 0] and errors is None
        _, status, errors = _decode(pool, bufs + [b"junk"], 4)
        assert errors[:3] == [None] * 3 and isinstance(errors[3], str)
    finally:
        pool.close()


@pytest.mark.parametrize(
    ("starts", "lengths", "error"),
    [
        ([0, 90], [10, 11], "span 1 (start 90, length 11) is outside the base buffer (100 bytes)"),
        ([0, -1], [10, 1], "span 1 (start -1, length 1)"),
        ([0, 5], [10, -1], "span 1 (start 5, length -1)"),
        ([0, 101], [10, 0], "span 1 (start 101, length 0)"),
        ([0, 2**62], [10, 2**62], "span 1 (start 4611686018427387904"),  # no overflow
        ([0, 10], [10], "starts has 2 spans, lengths 1"),
        (np.array([0, 10], np.int32), [10, 10], "starts must be a 1-D int64 array"),
        ([[0, 10]], [[10, 10]], "starts must be a 1-D int64 array"),
    ],
)
def test_spans_outside_the_base_are_refused_before_any_work(starts, lengths, error) -> None:
    base = bytearray(encode(10, 10)[:100].ljust(100, b"\0"))
    starts = starts if isinstance(starts, np.ndarray) else np.array(starts, np.int64)
    pool = _native.Pool(1)
    try:
        for run in ("decode", "sizes"):
            out = np.full((2, 12, 16, 3), 7, np.uint8)
            status = np.full(2, -1, np.int32)
            sizes = np.full((2, 2), -5, np.int32)
            with pytest.raises(ValueError, match=re.escape(error)):
                if run == "decode":
                    lengths = np.array(lengths, np.int64)
                    pool.decode_batch(base, out, status, _options(), starts=starts, lengths=lengths)
                else:
                    pool.image_sizes(base, sizes, starts, np.array(lengths, np.int64))
            assert (out == 7).all() and (status == -1).all() and (sizes == -5).all()
            base.append(0)  # no view of the base is left behind by the refusal
            del base[-1]
        with pytest.raises(ValueError, match="both starts and lengths"):
            pool.image_sizes(base, sizes, np.zeros(2, np.int64))
        with pytest.raises(TypeError, match="base is not a contiguous bytes-like"):
            pool.image_sizes("text", sizes, np.zeros(2, np.int64), np.zeros(2, np.int64))
    finally:
        pool.close()


def test_the_base_is_held_while_the_batch_runs_and_released_after() -> None:
    """The batch holds a view of the base (a bytearray cannot be resized under it) and a
    reference, both given back when it returns, also when another thread drops the last
    reference of its own meanwhile."""
    bufs = [encode(160, 120, seed=s) for s in range(8)] * 50
    base, starts, lengths = _spanned(bufs)
    pool = _native.Pool(1)
    refused, running = [], threading.Event()

    def batch() -> None:
        running.set()
        _, status, _ = _decode(pool, base, len(bufs), starts, lengths)
        assert status.tolist() == [0] * len(bufs)

    try:
        before = sys.getrefcount(base)
        for _ in range(20):  # until a resize meets a running batch (the first almost always)
            t = threading.Thread(target=batch)
            t.start()
            running.wait()
            while t.is_alive():
                try:
                    base.append(0)
                    del base[-1]
                except BufferError:
                    refused.append(True)
                    break
            t.join()
            if refused:
                break
        assert refused, "a resize never met a running batch"
        assert sys.getrefcount(base) == before
        base.append(0)  # released
        del base[-1]
    finally:
        pool.close()


SPANS_OF_A_CLOSED_MAP = """
import mmap, os, sys, tempfile, threading, weakref
import numpy as np
from recio import _native
_options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
    out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
    max_pixels=1 << 27)
sys.setswitchinterval(1e-6)
data = open(os.environ["JPEG"], "rb").read()
n = 64
starts = np.arange(n, dtype=np.int64) * len(data)
lengths = np.full(n, len(data), np.int64)
with tempfile.TemporaryFile() as f:
    f.write(data * n)
    f.flush()
    pool = _native.Pool(2)
    for i in range(40):
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        gone = weakref.ref(m)
        view = memoryview(m)
        closed = []

        def close():  # the reader's close(): release its view, try to unmap
            try:
                view.release()
            except BufferError:
                pass
            try:
                m.close()
                closed.append(True)
            except BufferError:  # the batch's view still maps it
                pass

        out = np.zeros((n, 8, 8, 3), np.uint8)
        status = np.full(n, -1, np.int32)
        t = threading.Timer(0.0005 * (i % 8), close)
        t.start()
        try:
            pool.decode_batch(memoryview(m) if i % 2 else m, out, status, _options(8, 8),
                              starts=starts, lengths=lengths)
            assert status.tolist() == [0] * n, status
        except ValueError as e:  # closed before the batch took its view
            assert "closed" in str(e), e
        t.join()
        if not closed:
            m.close()  # the batch is over: nothing maps it now
        del m, view
        assert gone() is None
    pool.close()
print("ok")
"""


def test_spans_of_a_map_closed_during_the_batch(tmp_path) -> None:
    """A reader closing its map while a batch decodes spans of it: the batch's view keeps the
    map (mmap.close refuses), or the batch is refused before it reads; never a fault."""
    jpeg = tmp_path / "one.jpg"
    jpeg.write_bytes(encode(64, 48))
    res = _run(SPANS_OF_A_CLOSED_MAP, 120, JPEG=str(jpeg))
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stderr[-4000:]}"
    assert res.stdout.split()[-1] == "ok"


def test_uninitialised_pool_is_closed() -> None:
    pool = _native.Pool.__new__(_native.Pool)
    assert pool.closed and pool.num_threads == 0
    with pytest.raises(ValueError, match="pool is closed"):
        pool.image_sizes([], bytearray(0))
    pool.close()


def test_closed_pool_cannot_be_reinitialised() -> None:
    pool = _native.Pool(1)
    with pytest.raises(RuntimeError, match="initialised"):
        pool.__init__(1)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.__init__(1)
    assert pool.closed


def _status_codes(module: object) -> dict[str, int]:
    names = vars(module)
    return {k: v for k, v in names.items() if k.startswith("STATUS_") and k != "STATUS_NAMES"}


def test_status_codes_match_decode_module() -> None:
    """recio.decode's STATUS_* and STATUS_NAMES are the extension's (the C enum), both ways."""
    c_codes = _status_codes(_native)
    assert _status_codes(decode) == c_codes
    assert decode.STATUS_NAMES == _native.STATUS_NAMES
    assert set(_native.STATUS_NAMES) == set(c_codes.values())
    assert all(type(v) is int for v in c_codes.values())
    assert all(type(v) is str for v in _native.STATUS_NAMES.values())
    assert _native.STATUS_OK == 0


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_simd_reports_the_path_that_runs() -> None:
    """SIMD names the passes that run: AVX2 only on an x86-64 CPU with it, SSE2 on other
    x86-64 CPUs (or under RECIO_SIMD=sse2), the plain C loops ("scalar") off x86."""
    assert _native.SIMD in ("avx2", "sse2", "scalar")
    flags = _cpu_flags()
    if _native.SIMD == "avx2" and flags:
        assert "avx2" in flags
    if not X86:
        assert _native.SIMD == "scalar"  # the SSE2 and AVX2 passes are x86 code
    elif not X86_64:
        assert _native.SIMD in ("sse2", "scalar")  # no AVX2 path on 32-bit x86
    elif os.environ.get("RECIO_SIMD") == "sse2" or (flags and "avx2" not in flags):
        assert _native.SIMD == "sse2"
    elif "avx2" in flags:
        assert _native.SIMD == "avx2"


@pytest.mark.skipif(not X86_64, reason="the SSE2 path is compiled on x86-64 only")
def test_simd_env_selects_sse2() -> None:
    res = _run("from recio import _native; print(_native.SIMD)", 60, RECIO_SIMD="sse2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == "sse2"


@pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")
def test_does_not_link_turbojpeg() -> None:
    """Only the libjpeg API is used from C; TurboJPEG (PyTurboJPEG's) is not linked."""
    res = subprocess.run(["ldd", _native.__file__], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "libjpeg" in res.stdout
    assert "turbojpeg" not in res.stdout.lower(), res.stdout


def test_decode_pool_close_while_the_pillow_part_runs() -> None:
    """A DecodePool closed from another thread mid-batch (PNGs go to Pillow's threads):
    the batch completes or raises ValueError("DecodePool is closed"), never RuntimeError."""
    import io
    import threading
    import time

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    pngs = []
    for _ in range(16):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (300, 300, 3), dtype=np.uint8)).save(buf, "PNG")
        pngs.append(buf.getvalue())
    outcomes = []
    for k in range(60):  # closes spread over the batch: before, inside the native part, after
        pool = decode.DecodePool(2)
        out = np.empty((len(pngs), 32, 32, 3), dtype=np.uint8)
        delay = 0.0002 * (k % 20)
        closer = threading.Thread(target=lambda p=pool, d=delay: (time.sleep(d), p.close()))
        closer.start()
        try:
            pool.decode_batch(pngs, out)
            outcomes.append("done")
        except ValueError as exc:
            assert "closed" in str(exc)
            outcomes.append("refused")
        closer.join()
    assert set(outcomes) <= {"done", "refused"}  # anything else raised out of the loop


def _record_base(sizes: list[tuple[int, int]]) -> tuple[bytes, np.ndarray]:
    """A .rec's bytes of one JPEG record per size (label k, id 100 + k), and the offsets."""
    from recio.records.format import IRHeader, pack

    base, offsets = bytearray(), []
    for k, (w, h) in enumerate(sizes):
        payload = pack(IRHeader(0, float(k), 100 + k, 0), encode(w, h, seed=k))
        offsets.append(len(base))
        base += struct.pack("<II", 0xCED7230A, len(payload)) + payload
        base += b"\0" * (-len(base) % 4)
    return bytes(base), np.array(offsets, np.int64)


def test_submitted_batches_queue_and_decode_as_decode_records() -> None:
    """submit_records returns at once; batches queued back to back each come out as
    decode_records gives them (NOTE [pending jobs]); result() is kept, and releases the
    buffers it held (a bytearray base can be resized again)."""
    base, offsets = _record_base([(20 + 4 * k, 16 + 2 * k) for k in range(12)])
    base = bytearray(base + b"\0\0\0\0XXXX")  # and a record that is not one
    offsets = np.append(offsets, len(base) - 8)
    n = len(offsets)
    pool = _native.Pool(2)
    try:
        want_out, want_status, want_heads = _records_args(n)
        want = pool.decode_records(base, offsets, *want_heads, want_out, want_status, _options())
        jobs = []
        for _ in range(4):
            out, status, heads = _records_args(n)
            pending = pool.submit_records(base, offsets, *heads, out, status, _options())
            jobs.append((pending, out, status, heads))
        with pytest.raises(BufferError):
            base.append(0)  # held by the queued jobs
        for pending, out, status, heads in jobs:
            assert pending.wait(30) and pending.done and pending.wait(0)
            got = pending.result()
            assert got == want and pending.result() is got
            np.testing.assert_array_equal(out, want_out)
            assert status.tolist() == want_status.tolist() == [0] * 12 + [decode.STATUS_RECORD]
            for a, b in zip(heads, want_heads, strict=True):
                np.testing.assert_array_equal(a, b)
        del jobs, pending
        base.append(0)  # every view released
        with pytest.raises(ValueError, match="timeout"):
            pool.submit_records(
                base, offsets[:2], *_records_args(2)[2], *_records_args(2)[:2], _options()
            ).wait(-1)
    finally:
        pool.close()
    with pytest.raises(ValueError, match="closed"):
        pool.submit_records(base, offsets, *want_heads, want_out, want_status, _options())


def test_records_in_a_list_of_extents_decode_as_in_one_base() -> None:
    """A list of buffers, one per record (NOTE [unjoined extents] in recio/pipeline/remote.py),
    decodes as the same records joined into one base: labels, ids, pixels; the spans are
    inside each record's own buffer; a record not plainly one frame within its own buffer
    (cut short, bad magic) is left to the exact parse; the buffers are held until result();
    a list of another length than the offsets is refused."""
    base, offsets = _record_base([(20 + 4 * k, 16 + 2 * k) for k in range(6)])
    ends = np.append(offsets[1:], len(base))
    extents = [bytearray(base[a:b]) for a, b in zip(offsets.tolist(), ends.tolist(), strict=True)]
    extents[4] = extents[4][: len(extents[4]) // 2]  # cut short: the frame ends past it
    extents[5] = bytearray(b"XXXX") + extents[5][4:]  # not a record's magic
    n = len(extents)
    pool = _native.Pool(2)
    try:
        want_out, want_status, want_heads = _records_args(n)
        pool.decode_records(base, offsets, *want_heads, want_out, want_status, _options())
        out, status, heads = _records_args(n)
        pending = pool.submit_records(
            extents, np.zeros(n, np.int64), *heads, out, status, _options()
        )
        with pytest.raises(BufferError):
            extents[0].append(0)  # held by the queued job
        assert pending.wait(30)
        pending.result()
        del pending
        extents[0].append(0)  # released
        with pytest.raises(ValueError, match="5 extents for 6 offsets"):
            pool.decode_records(extents[:5], np.zeros(n, np.int64), *heads, out, status, _options())
    finally:
        pool.close()
    assert want_status.tolist() == [0] * 6
    assert status.tolist() == [0] * 4 + [decode.STATUS_RECORD] * 2
    np.testing.assert_array_equal(out[:4], want_out[:4])
    labels, ids, starts, lengths = heads
    assert labels[:4].tolist() == want_heads[0][:4].tolist()
    assert ids.tolist() == [100, 101, 102, 103, -1, -1]
    assert (starts[:4] == want_heads[2][:4] - offsets[:4]).all()
    assert lengths[:4].tolist() == want_heads[3][:4].tolist()


def test_close_with_batches_queued_stops_them_and_writes_nothing_after() -> None:
    """close() from another thread while batches are queued: the running images end, the
    rest are skipped; once close() returns nothing writes into any output, each result() is
    the batch's or 'pool is closed', and dropping a Pending never waited for is safe."""
    script = """
    import struct, threading, time
    import numpy as np
    from recio import _native
    _options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
        out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
        max_pixels=1 << 27)
    from recio.records.format import IRHeader, pack
    from tests.images import encode

    payload = pack(IRHeader(0, 1.0, 7, 0), encode(320, 240, seed=1))
    frame = struct.pack("<II", 0xCED7230A, len(payload)) + payload
    frame += b"\\0" * (-len(frame) % 4)
    n = 48
    base = frame * n
    offsets = np.arange(n, dtype=np.int64) * len(frame)
    for trial in range(6):
        pool = _native.Pool(2)
        jobs = []
        # far more work than a loaded machine can finish between start() and close(), so
        # the last batches are still queued when it runs
        for _ in range(48):
            out = np.zeros((n, 64, 64, 3), np.uint8)
            heads = (np.zeros((n, 1), np.float32), np.zeros(n, np.int64), np.zeros(n, np.int64),
                     np.zeros(n, np.int64))
            st = np.full(n, -1, np.int32)
            p = pool.submit_records(base, offsets, *heads, out, st, _options(64, 64))
            jobs.append((p, out))
        closer = threading.Thread(target=pool.close)
        time.sleep(0.002 * trial)
        closer.start()
        closer.join(30)
        assert not closer.is_alive()
        assert all(p.done for p, _ in jobs)
        snap = [out.copy() for _, out in jobs]
        time.sleep(0.05)
        assert all(np.array_equal(s, out) for s, (_, out) in zip(snap, jobs))
        outcomes = []
        for p, out in jobs[:-3]:
            try:
                outcomes.append(p.result() is None and out.any())
            except ValueError as e:
                assert "closed" in str(e), e
                outcomes.append("closed")
        assert outcomes[-1] == "closed", outcomes  # the last ones never ran
        del jobs  # three never waited for
    print("ok")
    """
    res = _run(script, 120)
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    assert res.stdout.split()[-1] == "ok"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_pending_batch_in_a_forked_child_refuses_to_wait() -> None:
    """A child forked while a batch is queued has no pool threads to finish it: there the
    Pending refuses to wait (RuntimeError) and is dropped without waiting (no hang)."""
    script = """
    import os, signal, struct, traceback
    import numpy as np
    from recio import _native
    _options = lambda out_h, out_w: _native.JobOptions(  # NHWC uint8
        out_h=out_h, out_w=out_w, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
        max_pixels=1 << 27)
    from recio.records.format import IRHeader, pack
    from tests.images import encode

    payload = pack(IRHeader(0, 1.0, 7, 0), encode(320, 240, seed=1))
    frame = struct.pack("<II", 0xCED7230A, len(payload)) + payload
    frame += b"\\0" * (-len(frame) % 4)
    n = 256
    offsets = np.arange(n, dtype=np.int64) * len(frame)
    heads = [np.zeros((n, 1), np.float32)] + [np.zeros(n, np.int64) for _ in range(3)]
    out, st = np.zeros((n, 64, 64, 3), np.uint8), np.full(n, -1, np.int32)
    pool = _native.Pool(2)
    p = pool.submit_records(frame * n, offsets, *heads, out, st, _options(64, 64))
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)  # a hang dies of SIGALRM
        try:
            for call in (lambda: p.wait(1), p.result, lambda: p.done):
                try:
                    call()
                    os._exit(3)
                except RuntimeError as e:
                    assert "another process" in str(e), e
            del p
            pool.close()
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    assert p.result() is None and st.tolist() == [0] * n
    _, status = os.waitpid(pid, 0)
    pool.close()
    print(os.waitstatus_to_exitcode(status))
    """
    res = _run(script, 120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == "0", res.stdout + res.stderr


def test_job_options_are_named_and_checked_once() -> None:
    """NOTE [named parameters] in native/bind_options.c: a JobOptions is made from its fields'
    names only (positions, a missing or an unknown name are TypeErrors), checked when made,
    and a decode takes nothing else as its options."""
    named = dict(out_h=12, out_w=16, layout=0, itemsize=1, interp=0, bgr=0, dct_mode=1, roi=1,
                 max_pixels=1 << 27)  # fmt: skip
    _native.JobOptions(**named)
    with pytest.raises(TypeError, match="keyword arguments only"):
        _native.JobOptions(*named.values())
    with pytest.raises(TypeError, match="roi"):
        _native.JobOptions(**{k: v for k, v in named.items() if k != "roi"})
    with pytest.raises(TypeError, match="colour"):
        _native.JobOptions(**named, colour=1)
    with pytest.raises(ValueError, match="bad decode parameters"):
        _native.JobOptions(**{**named, "layout": 2})
    with pytest.raises(ValueError, match="lookup table"):
        _native.JobOptions(**{**named, "itemsize": 4})
    with pytest.raises(ValueError, match="lut has 1536 bytes, needs 3072"):
        _native.JobOptions(**{**named, "itemsize": 4}, lut=np.zeros((3, 256), np.float16))
    pool = _native.Pool(1)
    try:
        out = np.zeros((1, 12, 16, 3), np.uint8)
        with pytest.raises(TypeError, match="options must be a recio._native.JobOptions"):
            pool.decode_batch([encode(16, 12)], out, np.zeros(1, np.int32), tuple(named.values()))
        status = np.full(1, -1, np.int32)
        assert pool.decode_batch([encode(16, 12)], out, status, _native.JobOptions(**named)) is None
        assert status.tolist() == [0] and out.any()
    finally:
        pool.close()


def _cut_and_broken() -> tuple[bytes, bytes, bytes]:
    """A good JPEG, the same cut short (a libjpeg warning), and one whose frame header says
    0 x 0 (a libjpeg error)."""
    good = encode(320, 240)
    sof = good.index(b"\xff\xc0")
    broken = good[: sof + 5] + b"\0\0\0\0" + good[sof + 9 :]
    return good, good[: len(good) * 2 // 3], broken


def test_each_libjpeg_caller_reports_a_warning_and_an_error_in_its_own_words() -> None:
    """native/jpeg_glue.c is the one error manager of the decoder, the transcode and the
    lossless transcode: a cut-short JPEG is a kept warning (truncated) and a broken header a
    longjmp'd error, each with libjpeg's own text in the caller's message."""
    from recio.im2rec.encoder import JpegEncoder

    images = list(_cut_and_broken())
    want = [0, decode.STATUS_TRUNCATED, decode.STATUS_CORRUPT]
    eof, empty = "Premature end of JPEG file", "Empty JPEG image (DNL not supported)"
    with decode.DecodePool(1, backend="native") as pool:
        out = np.zeros((3, 60, 80, 3), np.uint8)
        assert pool.decode_batch(images, out).tolist() == want
        assert pool.last_errors() == [None, f"JPEG: {eof} (image incomplete)", f"JPEG: {empty}"]
        encoder = JpegEncoder(pool)
        status, jpegs = encoder.transcode_jpeg(images, np.array([[80, 60]] * 3))
        assert status.tolist() == want and jpegs[0] and jpegs[1:] == [None, None]
        assert encoder.last_errors()[1:] == [f"JPEG: {eof} (image incomplete)", f"JPEG: {empty}"]
        status, jpegs = encoder.optimize_jpeg(images)
        assert status.tolist() == want and jpegs[0] and jpegs[1:] == [None, None]
        assert encoder.last_errors()[1:] == [
            f"truncated JPEG, left as it is: {eof}",
            f"JPEG read: {empty}",
        ]
        # the state of a failed image does not leak into the next call: the good one again
        assert pool.decode_batch(images[:1], out[:1]).tolist() == [0]
        assert encoder.optimize_jpeg(images[:1])[0].tolist() == [0]
