"""``preprocess_threads="auto"``: the tuner's decisions (NOTE [thread tuner]) and parked threads."""

import time

import numpy as np
import pytest

from recio.augment import CropSpec, KeyedDraw
from recio.decode import DecodePool
from recio.pipeline.autotune import ThreadTuner
from recio.pipeline.iterator import ImageRecordIter

from .test_iterator import jpeg, make_rec


def _simulate(tuner: ThreadTuner, need: float, batches: int, rate: float = 1.0):
    """Feed ``tuner`` what a pipeline gives when the consumer needs ``need`` threads' work.

    A thread decodes ``rate`` batches a second; the consumer takes 1/need s per batch. With
    fewer threads than it needs it waits for the difference and nothing is ready ahead;
    with enough, it never waits and the queue is full.
    """
    counts = []
    for _ in range(batches):
        n = tuner.threads
        produce, consume = 1.0 / (n * rate), 1.0 / need
        if produce > consume:
            tuner.observe(produce - consume, consume, 0.0)
        else:
            tuner.observe(0.0, consume, 1.0)
        counts.append(tuner.threads)
    return counts


def test_a_waiting_consumer_gets_threads_up_to_the_share():
    tuner = ThreadTuner(most=4, threads=1)
    counts = _simulate(tuner, need=10, batches=200)
    assert counts[-1] == 4
    assert [t for _, t in tuner.changes] == [2, 3, 4]


def test_a_slow_consumer_settles_at_one_thread():
    tuner = ThreadTuner(most=4, threads=4)
    counts = _simulate(tuner, need=0.2, batches=400)
    assert counts[-1] == 1
    assert [t for _, t in tuner.changes] == [3, 2, 1]
    assert all(c == 1 for c in counts[100:])


def test_it_settles_where_the_consumer_needs_it_without_oscillating():
    tuner = ThreadTuner(most=4, threads=4)
    counts = _simulate(tuner, need=1.6, batches=2000)
    assert counts[-1] == 2
    after_warmup = [b for b, _ in tuner.changes if b > 100]
    # one probe below the floor per `forget` windows at most
    assert len(after_warmup) <= 2 * (2000 // (tuner.window * tuner.forget)) + 1
    assert np.mean(np.array(counts[100:]) >= 2) > 0.97  # the consumer fed nearly always


def test_no_change_on_noise_below_the_thresholds():
    tuner = ThreadTuner(most=4, threads=2)
    rng = np.random.default_rng(0)
    for _ in range(500):  # waits under 1 %, half the queue ready: neither starving nor idle
        assert tuner.observe(rng.uniform(0, 0.0005), 0.1, rng.uniform(0.3, 0.5)) is None
    assert tuner.threads == 2 and tuner.changes == []


def test_a_park_that_slows_the_consumer_is_taken_back():
    """A consumer on cores other jobs hold: it never waits and the batches sit ready, yet
    it takes them at 1,778 batches/s with two threads and 910 with one (the figures of a
    loaded run). The park is undone and two becomes the floor; one probe per ``forget``
    windows at most."""
    tuner = ThreadTuner(most=2, threads=2)
    rate = {2: 1778.0, 1: 910.0}
    counts = []
    for _ in range(4000):
        tuner.observe(0.0, 1.0 / rate[tuner.threads], 1.0)
        counts.append(tuner.threads)
    probes = [b for b, t in tuner.changes if t == 1]
    assert 1 <= len(probes) <= 4000 // (tuner.window * tuner.forget) + 1
    assert np.mean(np.array(counts) == 2) > 0.97


def test_a_park_behind_a_real_step_stays():
    """The same observations, but the consumer's rate is its own step's at any count."""
    tuner = ThreadTuner(most=2, threads=2)
    for _ in range(400):
        tuner.observe(0.0, 1.0 / 900.0, 1.0)
    assert tuner.threads == 1 and [t for _, t in tuner.changes] == [1]


def test_noise_in_the_rate_after_a_park_within_drop_keeps_it():
    tuner = ThreadTuner(most=2, threads=2)
    rng = np.random.default_rng(1)
    for _ in range(400):  # the rate moves ±10 %, less than ``drop``
        tuner.observe(0.0, 1.0 / (900.0 * rng.uniform(0.9, 1.1)), 1.0)
    assert tuner.threads == 1


def _starved_on_busy_cores(tuner: ThreadTuner, rate: dict, batches: int, ran: float = 0.3):
    """A consumer that waits for every batch, on cores other jobs hold: at ``n`` threads
    the pipeline gives ``rate[n]`` batches a second, each thread on a core ``ran`` of its
    working time."""
    counts = []
    for _ in range(batches):
        period = 1.0 / rate[tuner.threads]
        busy = tuner.threads * period
        tuner.observe(0.9 * period, 0.1 * period, 0.0, busy, ran * busy)
        counts.append(tuner.threads)
    return counts


def test_on_busy_cores_threads_past_the_share_are_kept_while_they_pay():
    """The loaded run's rates (1-4 threads: 83, 152, 196, 175 images/s): the tuner goes
    past the share of two to three threads, tries four, finds no gain and keeps three."""
    tuner = ThreadTuner(most=2, threads=2, burst=4)
    counts = _starved_on_busy_cores(tuner, {1: 83.0, 2: 152.0, 3: 196.0, 4: 175.0}, 4000)
    assert max(counts) == 4 and np.mean(np.array(counts[200:]) == 3) > 0.95


def test_on_busy_cores_a_thread_that_wins_nothing_is_parked_again():
    """Other jobs that are this job's own ranks: a thread more gains nothing."""
    tuner = ThreadTuner(most=2, threads=2, burst=4)
    counts = _starved_on_busy_cores(tuner, {1: 80.0, 2: 150.0, 3: 150.0, 4: 150.0}, 4000)
    tries = [b for b, t in tuner.changes if t == 3]
    assert 1 <= len(tries) <= 4000 // (tuner.window * tuner.forget) + 1
    assert np.mean(np.array(counts) == 2) > 0.95


def test_free_cores_never_take_threads_past_the_share():
    tuner = ThreadTuner(most=2, threads=2, burst=4)
    counts = _starved_on_busy_cores(tuner, {1: 80.0, 2: 150.0, 3: 200.0, 4: 250.0}, 400, ran=1.0)
    assert max(counts) == 2
    tuner.threads = 4  # past the share, then the other jobs end: back to the share
    counts = _starved_on_busy_cores(tuner, {1: 80.0, 2: 150.0, 3: 200.0, 4: 250.0}, 400, ran=1.0)
    assert counts[-1] == 2


def _batch_images(n=48, seed=0):
    rng = np.random.default_rng(seed)
    return [jpeg(rng, int(rng.integers(300, 500)), int(rng.integers(300, 500))) for _ in range(n)]


def test_parked_threads_do_not_work_and_change_no_pixel():
    images = _batch_images()
    draw = KeyedDraw(CropSpec(64, 64, rand_crop=True, rand_mirror=True), 3, 0)
    records = np.arange(len(images), dtype=np.int64)
    with DecodePool(4) as pool:
        outs, ratios = [], []
        for active in (4, 1, 3):
            assert pool.set_active_threads(active) == active
            assert pool.activity()[0] == active
            out = np.empty((len(images), 64, 64, 3), np.uint8)
            _, busy0, _ = pool.activity()
            t0 = time.perf_counter()
            status = pool.decode_batch(images, out, draw=draw, records=records, layout="NHWC")
            wall = time.perf_counter() - t0
            ratios.append((pool.activity()[1] - busy0) / wall)
            assert not status.any()
            outs.append(out)
        with pytest.raises(ValueError):
            pool.set_active_threads(5)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    assert ratios[1] <= 1.02  # one thread: busy at most the wall time
    assert ratios[0] > 1.2  # four: more than one was at work


def test_one_image_calls_count_in_the_pools_busy_and_cpu_time():
    """A one-image call runs in the caller's thread (native/pool.c): its time counts in
    activity() as the threads' does, busy on the wall clock, CPU on the thread's own."""
    image = _batch_images(1)[0]
    out = np.empty((1, 64, 64, 3), np.uint8)
    with DecodePool(2) as pool:
        _, busy0, cpu0 = pool.activity()
        for _ in range(5):
            assert not pool.decode_batch([image], out, layout="NHWC").any()
        _, busy, cpu = pool.activity()
    assert busy > busy0 and cpu > cpu0


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("autotune"), n=200)


def test_epochs_identical_at_every_thread_count(rec):
    def epoch(threads, churn=False):
        kw = dict(shuffle=True, seed=5, random_resized_crop=True, rand_mirror=True)
        with ImageRecordIter(rec, (3, 32, 32), 8, preprocess_threads=threads, **kw) as it:
            got = []
            for i, b in enumerate(it):
                got.append((b.data.copy(), b.index.copy()))
                if churn:
                    it.pool.set_active_threads(1 + i % it.pool.num_threads)
            return got

    ref = epoch(1)
    for other in (epoch(3), epoch("auto"), epoch(4, churn=True)):
        assert len(other) == len(ref)
        for (a, ia), (b, ib) in zip(ref, other, strict=True):
            np.testing.assert_array_equal(ia, ib)
            np.testing.assert_array_equal(a, b)


def test_a_sleeping_consumer_parks_threads_and_the_stats_say_so(rec, monkeypatch):
    """The stage times are the run's own; the tuner is told what a consumer whose step is
    far longer than a batch's decode gives (it never waits, every batch is ready), so its
    decisions do not depend on the machine's load."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    with ImageRecordIter(rec, (3, 32, 32), 8, preprocess_threads="auto") as it:
        tuner = it._governor.tuner
        if it.plan.max_threads < 2:
            pytest.skip("one usable core: nothing to park")
        observe = tuner.observe
        monkeypatch.setattr(tuner, "observe", lambda *_: observe(0.0, 0.02, 1.0))
        for _ in range(3):
            for _ in it:
                time.sleep(0.02)  # a step far longer than a batch's decode
        assert tuner.threads == 1 and it.pool.activity()[0] == 1
        assert [t for _, t in tuner.changes] == list(range(it.plan.max_threads - 1, 0, -1))
        st = it.stats.stages
        assert st.batches == 3 * len(it)
        assert st.consumer_s > 0.9 * st.batches * 0.02
        assert st.wait_s < st.consumer_s
        assert 0 < st.decode_s < st.consumer_s
        assert st.threads == 1


def test_a_fast_consumer_gets_the_threads_back(rec, monkeypatch):
    """The iterator feeds its tuner and the pool follows the tuner's count. The tuner is
    told what a consumer that always waits gives (its decisions are a function of the
    observations alone), so the outcome does not depend on the machine's load."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    with ImageRecordIter(rec, (3, 96, 96), 8, preprocess_threads="auto") as it:
        tuner = it._governor.tuner
        if it.plan.max_threads < 2:
            pytest.skip("one usable core: nothing to add")
        it.pool.set_active_threads(1)
        tuner.threads = 1
        seen = []
        observe = tuner.observe

        def waiting(wait_s, away_s, ready, busy_s, cpu_s):
            seen.append((wait_s, away_s, ready, busy_s, cpu_s))
            # waited 10 ms, away 1 ms, nothing ready; the threads on their cores throughout
            return observe(0.01, 0.001, 0.0, 0.01, 0.01)

        monkeypatch.setattr(tuner, "observe", waiting)
        for _ in range(4):
            for _ in it:
                pass
        assert len(seen) >= 4 * (len(it) - 1)  # every batch but each epoch's first
        assert all(min(w, a, b, c) >= 0 and 0 <= r <= 1 for w, a, r, b, c in seen)
        assert tuner.threads == it.plan.max_threads
        assert it.pool.activity()[0] == it.plan.max_threads


def test_a_remote_source_is_tuned_and_timed_the_same_way(rec, memfs):
    """The threaded pipeline (a remote file): same batches at 1 thread and auto with the
    count changed under it, its waits and the reader's in ``stats.stages``."""
    from .test_iterator import _upload

    url = _upload(rec, "memory://autotune/data.rec", {})
    kw = dict(shuffle=True, seed=2, random_resized_crop=True)
    with ImageRecordIter(url, (3, 32, 32), 8, preprocess_threads=1, **kw) as it:
        ref = [(b.index.copy(), b.data.copy()) for b in it]
    with ImageRecordIter(url, (3, 32, 32), 8, **kw) as it:
        got = []
        for i, b in enumerate(it):
            got.append((b.index.copy(), b.data.copy()))
            it.pool.set_active_threads(1 + i % it.pool.num_threads)
            time.sleep(0.002)
        st = it.stats.stages
        assert st.batches == len(ref) and st.images == 200
        assert st.fetch_wait_s > 0 and st.decode_s > 0 and st.consumer_s >= 0.9 * 0.002 * 24
    for (ia, a), (ib, b) in zip(ref, got, strict=True):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(a, b)
