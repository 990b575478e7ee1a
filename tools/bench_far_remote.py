#!/usr/bin/env python3
"""The iterator from a far-away S3 (added latency, capped bandwidth) against local disk.

    python tools/bench_far_remote.py [--images 8000] [--delay 0.03] [--rate 100e6] \\
        [--rounds 3] [--seconds 3] [--workdir DIR] [--split-cores] [--only CONFIG ...]
        [--concurrency N] [--gap BYTES] [--read-ahead BYTES] [--clients C ...] [--json OUT]

Needs an S3 server (``tools/s3_server.sh start``; ``RECIO_S3_ENDPOINT``, default
http://127.0.0.1:8333, testing/testing). The sample dataset (``recio bench``'s shapes,
``--images`` of them, 33 KB each; with ``--workdir`` made once and kept there) is written
locally and uploaded with its checksum sidecar; a delay proxy (tests/delayproxy.py, in a
process of its own) adds ``--delay`` seconds to every request and caps each connection at
``--rate`` bytes/s. 8,000 images make a local epoch last about two seconds on two free
cores, and four block-shuffle windows (2,048 records each), so that block shuffle streams
and the epochs' boundaries weigh what they weigh in a real run. Side by side, in
alternating rounds, with the same iterator settings (RandomResizedCrop 64 + flip, uint8,
batch 64, 2 decode threads):

- local disk and S3, global and block shuffle (S3 verifies the records' checksums, its
  default for remote data; local does not);
- S3, block shuffle, without checksum verification (what verifying costs end to end);
- S3, block shuffle, through a block cache of half the dataset (``cache_limit``): its
  first (cold) epoch, then the later ones, with Belady (the iterator's schedule) and
  with LRU; and the hit rate LRU would have had on the Belady run's own trace.

For each: images/s (median of rounds) and its ratio to local with the same shuffle; the
client's CPU per image (this process's CPU time: decode, fetch and parse threads; the
proxy and the server are other processes); bytes fetched per image; the server's CPU in
the same window (cores busy, and its share of the CPU that server, proxy and client used
together) and the proxy's (cores); the most requests the proxy held at once (connections
busy in parallel); the median wait for an epoch's first batch; and the seconds the client's
full garbage collections took in the timed windows, all rounds together (each
configuration's set-up is collected before its epochs are timed: ``settled``).

Two modes. By default server, proxy and client share the machine's cores, as they do in
the tests: the S3 rows' ratios then also measure the server's share of those cores.
``--split-cores`` pins the server and the proxy (every thread) to one core and this
process (the client: its decode, fetch and parse threads) to the others, for the local
rows as for the S3 ones: as with a store on other machines, the ratios compare the
client against itself, with the store's CPU off its cores.

``--only`` runs the configurations named (``CONFIGS``: local-global, local-block,
s3-global, s3-block, s3-unverified, cache-belady, cache-lru) and no others; a row's ratio
to local needs the local row of its shuffle among them. ``--concurrency``, ``--gap`` and
``--read-ahead`` set those ``FetchOptions`` of the S3 rows instead of their defaults.
``--clients`` runs the plain S3 rows once per client, side by side in each round: "obstore"
(``FetchOptions(client="obstore")``), "ranges" (fsspec with the presigned range client,
``recio.storage.httprange``), "s3fs" (fsspec, ``presign_s3=False``: botocore signs each
range); by default the default client alone. Each row then also says the requests it
sent per image (the proxy's count).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout

from recio import storage  # noqa: E402
from recio.bench.sample import build_sample_rec  # noqa: E402
from recio.pipeline.iterator import ImageRecordIter  # noqa: E402
from recio.storage.blockcache import entry_bytes  # noqa: E402
from recio.storage.replay import replay  # noqa: E402

if TYPE_CHECKING:
    import psutil

#: What --clients names: the FetchOptions of each S3 client compared.
CLIENTS = {"default": {}, "obstore": {"client": "obstore"}, "ranges": {"client": "fsspec"},
           "s3fs": {"client": "fsspec", "presign_s3": False}}  # fmt: skip

#: What --only names: every configuration of a round, in the order they run.
CONFIGS = ("local-global", "local-block", "s3-global", "s3-block", "s3-unverified",
           "cache-belady", "cache-lru")  # fmt: skip

ITER_ARGS = dict(data_shape=(3, 64, 64), batch_size=64, shuffle=True, seed=0,
                 random_resized_crop=True, rand_mirror=True, dtype="uint8",
                 preprocess_threads=2)  # fmt: skip


def s3_options(endpoint: str) -> dict:
    return {
        "endpoint_url": endpoint,
        "key": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        "secret": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        "skip_instance_cache": True,
    }


def listener(port: int) -> psutil.Process:
    """The process listening on 127.0.0.1:``port`` (the S3 server)."""
    import psutil  # the benchmark's alone (the core split's test runs without it)

    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return psutil.Process(conn.pid)
    raise SystemExit(f"no process found listening on port {port}")


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of process ``pid`` to ``cores`` (threads it starts later inherit)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(tid), cores)


def start_proxy(upstream: int, delay: float, rate: float) -> tuple[subprocess.Popen, int]:
    proxy = subprocess.Popen(
        [sys.executable, "-m", "tests.delayproxy", "--upstream", str(upstream),
         "--delay", str(delay), "--rate", str(rate)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proxy, int(proxy.stdout.readline())


def proxy_stats(proxy: subprocess.Popen, reset: bool = False) -> dict:
    """The proxy's counters (tests/delayproxy.py); ``reset``: its peak starts afresh after."""
    proxy.stdin.write("reset\n" if reset else "stats\n")
    proxy.stdin.flush()
    return json.loads(proxy.stdout.readline())


def fetched_bytes(it: ImageRecordIter) -> int:
    source = it.records.source
    if source.schedules:  # the block cache: what it fetched
        return source.stats.bytes_fetched
    return int(getattr(source, "stats", {}).get("bytes", 0))


class FullCollections:
    """The count and seconds of this process's full garbage collections (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.count, self.seconds, self._start = 0, 0.0, 0.0
        gc.callbacks.append(self._seen)

    def close(self) -> None:
        """Stop counting."""
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start


def settled(it: ImageRecordIter) -> ImageRecordIter:
    """``it``, after a full collection of what its set-up left (S3 clients' objects).

    Each configuration makes a new S3 client (``skip_instance_cache``), whose tens of
    thousands of objects make the collector run a full pass over the whole heap some time
    later (0.27-0.40 s with the GIL held, on this benchmark's heap before recio opened a
    dataset through one client): in whichever epoch comes next, once after the heap grew,
    not every epoch. Collected here, before any timed epoch, every configuration starts
    from the same heap; the timed windows report the full collections still in them.
    """
    gc.collect()
    return it


class Measure:
    """Images, wall, client CPU, server and proxy CPU, bytes fetched over whole epochs."""

    def __init__(self, server: psutil.Process, proxy: subprocess.Popen) -> None:
        import psutil

        self.server, self.proxy = server, proxy
        self.proxy_proc = psutil.Process(proxy.pid)
        self.collections = FullCollections()

    def epochs(self, it: ImageRecordIter, seconds: float, at_least: int = 1) -> dict:
        b0, images, done, firsts = fetched_bytes(it), 0, 0, []
        s0, p0 = cpu(self.server), cpu(self.proxy_proc)
        r0 = proxy_stats(self.proxy)["requests"]
        g0, gs0 = self.collections.count, self.collections.seconds
        proxy_stats(self.proxy, reset=True)
        c0, t0 = time.process_time(), time.perf_counter()
        while done < at_least or time.perf_counter() - t0 < seconds:
            start = time.perf_counter()
            for batch in it:
                if start:
                    firsts.append(time.perf_counter() - start)
                    start = 0.0
                images += len(batch.index) - batch.pad
            done += 1
        wall = time.perf_counter() - t0
        client = time.process_time() - c0
        server, proxy = cpu(self.server) - s0, cpu(self.proxy_proc) - p0
        counts = proxy_stats(self.proxy)
        return {
            "requests_per_image": (counts["requests"] - r0) / images,
            "images_per_s": images / wall,
            "client_cpu_ms_per_image": 1e3 * client / images,
            "client_cores": client / wall,
            "bytes_fetched_per_image": (fetched_bytes(it) - b0) / images,
            "server_cores": server / wall,
            "server_cpu_share": server / max(server + proxy + client, 1e-9),
            "proxy_cores": proxy / wall,
            "peak_requests": counts["peak_held"],
            "first_batch_ms": 1e3 * statistics.median(firsts),
            "full_gc_s": self.collections.seconds - gs0,
            "full_gcs": self.collections.count - g0,
            "epochs": done,
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``only`` is the set of configurations to run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=0.03, help="seconds added per request")
    parser.add_argument("--rate", type=float, default=100e6, help="bytes/s per connection")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="per configuration, round")
    parser.add_argument("--workdir", help="make the sample here once, and keep it")
    parser.add_argument(
        "--split-cores",
        action="store_true",
        help="server and proxy on one core, this client on the others",
    )
    parser.add_argument(
        "--only", nargs="+", choices=CONFIGS, default=list(CONFIGS), metavar="CONFIG",
        help=f"run only these configurations, of {', '.join(CONFIGS)}",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=int, help="connections per file (FetchOptions; default: its own)"
    )
    parser.add_argument("--gap", type=int, help="FetchOptions.gap of the S3 rows, bytes")
    parser.add_argument(
        "--read-ahead", type=int, help="FetchOptions.read_ahead of the S3 rows, bytes"
    )
    parser.add_argument(
        "--clients", nargs="+", choices=sorted(CLIENTS), default=["default"], metavar="C",
        help=f"the S3 clients to compare, of {', '.join(sorted(CLIENTS))}",
    )  # fmt: skip
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    args.only = set(args.only)
    return args


def main() -> None:
    args = parse_args()
    only = args.only
    all_cores = sorted(os.sched_getaffinity(0))
    store_cores, client_cores = set(all_cores), set(all_cores)
    if args.split_cores:
        if len(all_cores) < 2:
            raise SystemExit("--split-cores needs at least two cores")
        store_cores, client_cores = {all_cores[0]}, set(all_cores[1:])
        pin(os.getpid(), client_cores)  # before the iterators start their threads

    endpoint = os.environ.get("RECIO_S3_ENDPOINT", "http://127.0.0.1:8333")
    bucket = os.environ.get("RECIO_S3_BUCKET", "test")
    port = int(endpoint.rsplit(":", 1)[1])
    work = tempfile.mkdtemp(prefix="recio-far-")
    sample = os.path.join(args.workdir, f"sample-{args.images}") if args.workdir else work
    local = os.path.join(sample, "sample.rec")
    if not os.path.exists(local[:-4] + ".crc"):  # the sidecar is written last
        local = build_sample_rec(sample, args.images)
    url = f"s3://{bucket}/bench-far-{os.getpid()}/sample.rec"
    fs, path = storage.filesystem(url, s3_options(endpoint))
    for ext in (".rec", ".idx", ".crc"):
        fs.put_file(local[:-4] + ext, path[:-4] + ext)
    size = os.path.getsize(local)
    proxy, proxy_port = start_proxy(port, args.delay, args.rate)
    far = s3_options(f"http://127.0.0.1:{proxy_port}")
    server = listener(port)
    measure = Measure(server, proxy)
    if args.split_cores:
        pin(server.pid, store_cores)
        pin(proxy.pid, store_cores)
    print(
        f"{args.images} images, {size / 1e6:.1f} MB; S3 at {endpoint} behind a proxy adding "
        f"{args.delay * 1e3:.0f} ms a request, {args.rate / 1e6:.0f} MB/s a connection; "
        f"load average {os.getloadavg()[0]:.1f}; "
        + (f"server and proxy on core {sorted(store_cores)}, client on {sorted(client_cores)}"
           if args.split_cores else f"server, proxy and client share cores {all_cores}")
    )  # fmt: skip

    def fetch_options(**kw) -> storage.FetchOptions:
        for name in ("concurrency", "gap", "read_ahead"):
            if getattr(args, name) is not None:
                kw[name] = getattr(args, name)
        return storage.FetchOptions(**kw)

    def plain(where: str, mode: str, verify: bool | str = "auto", client: str = "default"):
        if where == "local":
            return ImageRecordIter(local, shuffle_mode=mode, **ITER_ARGS)
        fetch = fetch_options(**CLIENTS[client])
        return ImageRecordIter(url, shuffle_mode=mode, storage_options=far, fetch=fetch,
                               verify_checksums=verify, **ITER_ARGS)  # fmt: skip

    results: dict[str, list[dict]] = {}
    hit_rates: dict[str, list[float]] = {"belady": [], "lru": [], "lru_replayed": []}
    try:
        for _ in range(args.rounds):
            for where in ("local", "S3"):
                for mode in ("global", "block"):
                    if f"{where.lower()}-{mode}" not in only:
                        continue
                    for client in args.clients if where == "S3" else ["default"]:
                        with settled(plain(where, mode, client=client)) as it:
                            measure.epochs(it, 0)  # warm-up: connections, the link estimate
                            row = measure.epochs(it, args.seconds)
                        named = where if client == "default" else f"{where} ({client})"
                        results.setdefault(f"{named}, {mode} shuffle", []).append(row)
            if "s3-unverified" in only:
                with settled(plain("S3", "block", verify=False)) as it:
                    measure.epochs(it, 0)
                    row = measure.epochs(it, args.seconds)
                results.setdefault("S3, block shuffle, checksums not verified", []).append(row)
            for policy in [p for p in ("belady", "lru") if f"cache-{p}" in only]:
                cache = tempfile.mkdtemp(prefix="cache-", dir=work)
                fetch = fetch_options(cache_policy=policy)
                with ImageRecordIter(url, shuffle_mode="block", storage_options=far,
                                     cache_dir=cache, cache_limit=size // 2, fetch=fetch,
                                     **ITER_ARGS) as it:  # fmt: skip
                    settled(it)
                    source = it.records.source
                    source.stats.trace = []
                    cold = measure.epochs(it, 0)
                    warm_hits = source.stats.hits + source.stats.waited
                    warm_used = warm_hits + source.stats.misses
                    row = measure.epochs(it, args.seconds)
                    stats = source.stats
                    used = stats.hits + stats.waited + stats.misses - warm_used
                    rate = (stats.hits + stats.waited - warm_hits) / max(used, 1)
                    hit_rates[policy].append(rate)
                    if policy == "belady":
                        block = entry_bytes(source.block_size)
                        hit_rates["lru_replayed"].append(
                            replay(stats.trace, block, size // 2, "lru")
                        )
                name = f"S3, block shuffle, cache of half ({policy})"
                results.setdefault(name + ", first epoch", []).append(cold)
                results.setdefault(name + ", later epochs", []).append(row)
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        proxy.kill()
        proxy.wait()
        if args.split_cores:
            pin(server.pid, set(all_cores))  # the server is shared: give it its cores back
        fs.rm(path.rsplit("/", 1)[0], recursive=True)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
        shutil.rmtree(work, ignore_errors=True)

    summary = {}
    for name, rows in results.items():
        entry = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "epochs"}
        entry["full_gc_s"] = sum(r["full_gc_s"] for r in rows)  # a rare, long pause: summed
        mode = "global" if "global" in name else "block"
        base = summary.get(f"local, {mode} shuffle")
        if base:
            entry["ratio_to_local"] = entry["images_per_s"] / base["images_per_s"]
            entry["cpu_per_image_to_local"] = (
                entry["client_cpu_ms_per_image"] / base["client_cpu_ms_per_image"]
            )
        summary[name] = entry
    print(f"{'':<58} {'img/s':>7} {'x local':>7} {'CPU ms/img':>10} {'x local':>7} {'cores':>5} "
          f"{'KB/img':>7} {'req/img':>7} {'server cores':>12} {'share':>6} {'proxy':>5} "
          f"{'conns':>5} {'1st ms':>6} {'GC s':>5}")  # fmt: skip
    for name, e in summary.items():
        print(f"{name:<58} {e['images_per_s']:7.0f} {e.get('ratio_to_local', 1):7.2f} "
              f"{e['client_cpu_ms_per_image']:10.3f} {e.get('cpu_per_image_to_local', 1):7.2f} "
              f"{e['client_cores']:5.2f} "
              f"{e['bytes_fetched_per_image'] / 1e3:7.1f} {e['requests_per_image']:7.3f} "
              f"{e['server_cores']:12.2f} "
              f"{e['server_cpu_share']:6.1%} {e['proxy_cores']:5.2f} {e['peak_requests']:5.0f} "
              f"{e['first_batch_ms']:6.1f} {e['full_gc_s']:5.2f}")  # fmt: skip
    plain_s3 = summary.get("S3, block shuffle", {}).get("images_per_s")
    unverified = summary.get("S3, block shuffle, checksums not verified", {}).get("images_per_s")
    if plain_s3 and unverified:
        cpu_on = summary["S3, block shuffle"]["client_cpu_ms_per_image"]
        cpu_off = summary["S3, block shuffle, checksums not verified"]["client_cpu_ms_per_image"]
        print(
            f"checksum verification, S3 block shuffle: {1 - plain_s3 / unverified:+.1%} "
            f"of the images/s, {cpu_on - cpu_off:+.3f} ms ({cpu_on / cpu_off - 1:+.1%}) of "
            "client CPU an image"
        )
    rates = {k: statistics.median(v) for k, v in hit_rates.items() if v}
    print("block hit rate, later epochs: " + ", ".join(f"{k} {v:.1%}" for k, v in rates.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "hit_rates": rates, "rounds": results,
                       "split_cores": args.split_cores}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
