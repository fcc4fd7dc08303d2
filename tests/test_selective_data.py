"""The selective copying task (Mamba, Section 4.1.1): its layout, its randomness, its checks."""

import numpy as np
import pytest

from annotated_ssm.data import selective_copying


def test_layout_noise_data_then_markers():
    inputs, targets = selective_copying(50, 20, 4, 6, seed=0)
    assert inputs.shape == (50, 24) and targets.shape == (50, 4)
    assert inputs.dtype == targets.dtype == np.int32
    body, markers = inputs[:, :20], inputs[:, 20:]
    assert np.all(markers == 5)  # the marker is the last token
    assert np.all((targets >= 1) & (targets <= 4))  # data tokens: neither noise nor marker
    for row, target in zip(body, targets):
        data = row[row != 0]  # noise is token 0
        np.testing.assert_array_equal(data, target)  # the data tokens, in order


def test_positions_vary_and_cover_the_sequence():
    """The point of the task: the data tokens sit anywhere, differently in every sequence."""
    inputs, _ = selective_copying(2000, 16, 3, 10, seed=1)
    where = inputs[:, :16] != 0
    assert np.all(where.sum(axis=1) == 3)
    per_position = where.mean(axis=0)
    np.testing.assert_allclose(per_position, 3 / 16, atol=0.04)  # uniform over positions
    assert len({tuple(np.flatnonzero(row)) for row in where}) > 400  # not a few fixed layouts
    tokens = inputs[:, :16][where]
    np.testing.assert_allclose(np.bincount(tokens, minlength=9)[1:] / tokens.size, 1 / 8,
                               atol=0.02)  # data tokens uniform over 1 … vocab-2


def test_seeded():
    first, second = selective_copying(8, 12, 2, 5, seed=3), selective_copying(8, 12, 2, 5, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    other = selective_copying(8, 12, 2, 5, seed=4)
    assert not np.array_equal(first[0], other[0])


def test_every_position_used_when_length_equals_n_memorize():
    inputs, targets = selective_copying(5, 4, 4, 3, seed=0)
    np.testing.assert_array_equal(inputs[:, :4], targets)
    assert np.all(targets == 1)  # vocab 3: one data token


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=0), "n must be an integer >= 1; got 0"),
    (dict(length=2.5), "length must be an integer >= 1; got 2.5"),
    (dict(n_memorize=0), "n_memorize must be an integer >= 1; got 0"),
    (dict(length=3, n_memorize=4), "length must be >= n_memorize"),
    (dict(vocab=2), "vocab must be an integer >= 3; got 2"),
    (dict(seed=-1), "seed must be an integer"),
    (dict(seed=1.5), "seed must be an integer"),
])
def test_bad_arguments_name_themselves(kwargs, message):
    arguments = dict(n=4, length=10, n_memorize=2, vocab=5, seed=0) | kwargs
    with pytest.raises(ValueError, match=message):
        selective_copying(**arguments)
