"""The input checks every module uses: each message names the argument and what it got."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from annotated_ssm import _validation as v


def test_check_finite_counts_bad_entries():
    v.check_finite("A", np.ones(3))
    with pytest.raises(ValueError, match=r"A must be finite; got 2 non-finite entries"):
        v.check_finite("A", np.array([1.0, np.nan, np.inf]))


def test_check_positive_finite_reports_the_smallest_entry():
    v.check_positive_finite("step", np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"step must be real, finite and > 0; got -0.5 \(its smallest entry\)"):
        v.check_positive_finite("step", np.array([0.1, -0.5, 0.0]))


def test_check_positive_finite_rejects_complex_without_printing_the_array():
    with pytest.raises(ValueError, match=r"step must be real.*got a complex array \(dtype complex128\)") as info:
        v.check_positive_finite("step", np.full(1000, 0.1 + 0j))
    assert len(str(info.value)) < 200


def test_value_checks_are_skipped_under_jit_but_shapes_are_not():
    @jax.jit
    def f(step):
        v.check_positive_finite("step", step)  # a tracer: nothing to look at
        return step * 2

    assert float(f(jnp.float32(-1.0))) == -2.0
    with pytest.raises(ValueError, match=r"A must be a square matrix of shape \(\.\.\., N, N\); got shape \(2, 3\)"):
        jax.jit(lambda A: v.check_square("A", A) or A)(jnp.zeros((2, 3)))


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "4"])
def test_check_positive_int_rejects(value):
    with pytest.raises(ValueError, match=r"N must be an integer >= 1; got"):
        v.check_positive_int("N", value)


def test_check_positive_int_accepts_numpy_integers():
    assert v.check_positive_int("N", np.int64(4)) == 4


def test_check_ndim_check_even_check_choice():
    with pytest.raises(ValueError, match=r"u must have 2 or 3 dimensions \(batch\); got shape \(4,\)"):
        v.check_ndim("u", np.zeros(4), (2, 3), "batch")
    with pytest.raises(ValueError, match=r"N must be even \(pairs\); got 5"):
        v.check_even("N", 5, "pairs")
    with pytest.raises(ValueError, match=r"unknown method 'rk4'; choose one of: 'euler', 'zoh'"):
        v.check_choice("method", "rk4", ("euler", "zoh"))
