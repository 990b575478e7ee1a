"""Identity mixing of batches: the figures, the orders, and recio's default on a face file."""

import numpy as np
import pytest

from recio.sampling.identity_mix import buffer_order, mix_figures, mix_table, order_of


def test_figures_of_known_batches():
    classes = np.array([0, 0, 0, 1, 2, 3, 4, 4])
    figures = mix_figures(classes, np.arange(8), batch_size=4)
    assert figures.batches == 2
    assert figures.distinct_mean == 2.5 and figures.distinct_min == 2  # {0, 1}, {2, 3, 4}
    assert figures.top_share_mean == pytest.approx((3 / 4 + 2 / 4) / 2)
    assert figures.top_share_max == 0.75


def test_a_streaming_buffer_is_a_permutation_that_stays_near_the_read_position():
    order = buffer_order(10_000, 100, seed=3)
    assert np.array_equal(np.sort(order), np.arange(10_000))
    # output i is one of the first i + 100 records read
    assert (order <= np.arange(10_000) + 100).all()
    assert not np.array_equal(buffer_order(50, 100), np.arange(50))  # all in the buffer


def test_orders_on_an_identity_sorted_set():
    """Global mixes best; recio's block shuffle and a small buffer keep identities together."""
    classes = np.repeat(np.arange(400), 50)  # 20,000 images, sorted by identity
    rows = {r.order: r for r in mix_table(classes, ["global", "block", "buffer-2048", "none"], 128)}
    assert rows["global"].distinct_mean > 100 and rows["global"].top_share_max < 0.1
    assert rows["block"].distinct_mean < 0.5 * rows["global"].distinct_mean
    assert rows["buffer-2048"].distinct_mean < 0.75 * rows["global"].distinct_mean
    assert rows["none"].distinct_mean < 4 and rows["none"].top_share_max >= 0.39


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="global, block, block-N, buffer-N or none"):
        order_of("buffer-", 10)
