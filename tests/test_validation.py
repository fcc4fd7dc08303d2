"""The input checks of the package's doors: each message names the argument and what it got."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from annotated_ssm import _validation as v


def test_check_finite_counts_bad_entries():
    v.check_finite("A", np.ones(3))
    with pytest.raises(ValueError, match=r"^A .*2 non-finite"):
        v.check_finite("A", np.array([1.0, np.nan, np.inf]))


def test_cast_positive_finite_checks_in_the_target_dtype():
    out = v.cast_positive_finite("s", [0.5, 2.0], np.float32)
    assert out.dtype == jnp.float32 and np.array_equal(np.asarray(out), [0.5, 2.0])
    with pytest.raises(ValueError, match=r"^s .*1e\+39 .*inf in float32.*index \(1,\)"):
        v.cast_positive_finite("s", np.array([1.0, 1e39]), np.float32)
    with pytest.raises(ValueError, match=r"^s .*-1\.0 at index \(0, 1\)"):
        v.cast_positive_finite("s", jnp.array([[1.0, -1.0], [0.0, 1.0]]), np.float32)  # on its device
    with pytest.raises(ValueError, match=r"^s must be real.*complex"):
        v.cast_positive_finite("s", np.array([1 + 1j]), np.float32)
    traced = jax.jit(lambda s: v.cast_positive_finite("s", s, np.float32))(jnp.array([-1.0]))
    assert float(traced[0]) == -1.0  # a tracer: cast, not checked


def test_check_float_dtype():
    for name in ("float16", "bfloat16", "float32", "float64"):
        assert v.check_float_dtype("dtype", name).name == name
    assert v.check_float_dtype("dtype", jnp.complex64, complex_allowed=True) == np.complex64
    for bad, spelled in [(jnp.int32, "dtype int32"), (bool, "dtype bool"), ("x", "'x', which is not a dtype"),
                         (np.complex64, "dtype complex64")]:
        with pytest.raises(ValueError, match=rf"^dtype .*got {spelled}"):
            v.check_float_dtype("dtype", bad)


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "4"])
def test_check_positive_int_rejects(value):
    with pytest.raises(ValueError, match=r"N must be an integer >= 1; got"):
        v.check_positive_int("N", value)


def test_check_positive_int_accepts_numpy_integers():
    assert v.check_positive_int("N", np.int64(4)) == 4


def test_check_ndim_check_choice():
    with pytest.raises(ValueError, match=r"^u .*2 or 3 dimensions.*\(4,\)"):
        v.check_ndim("u", np.zeros(4), (2, 3), "batch")
    with pytest.raises(ValueError, match=r"method 'rk4'.*'euler', 'zoh'"):
        v.check_choice("method", "rk4", ("euler", "zoh"))


@pytest.mark.parametrize("value", ["no", 1, 0, None, "True"])
def test_check_bool_rejects_non_bools(value):
    with pytest.raises(ValueError, match=r"flag must be True or False; got"):
        v.check_bool("flag", value)


def test_check_bool_accepts_python_and_numpy_bools():
    assert v.check_bool("flag", np.bool_(True)) is True and v.check_bool("flag", False) is False


@pytest.mark.parametrize("value", [0, -1.0, np.nan, np.inf, "1", True, None])
def test_check_positive_real_rejects(value):
    with pytest.raises(ValueError, match=r"eps must be a real number, finite and > 0; got"):
        v.check_positive_real("eps", value)


def test_check_batch_shape():
    assert v.check_batch_shape("batch_shape", 5) == (5,)
    assert v.check_batch_shape("batch_shape", np.int64(2)) == (2,)
    assert v.check_batch_shape("batch_shape", (2, 3)) == (2, 3)
    assert v.check_batch_shape("batch_shape", ()) == ()
    for bad in ("ab", (-1,), (2.5,), None, True):
        with pytest.raises(ValueError, match=rf"^batch_shape .*got {re.escape(repr(bad))}"):
            v.check_batch_shape("batch_shape", bad)


def test_computation_dtypes():
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert v.computation_dtypes("u", jnp.zeros(2, jnp.float32)) == (f32, f32)
    assert v.computation_dtypes("u", jnp.zeros(2, jnp.bfloat16)) == (f32, np.dtype(jnp.bfloat16))
    assert v.computation_dtypes("u", np.zeros(2, np.float16)) == (f32, np.dtype(np.float16))
    assert v.computation_dtypes("u", np.zeros(2, np.int64)) == (f32, f32)
    assert v.computation_dtypes("u", np.zeros(2, bool)) == (f32, f32)
    # Without x64, float64 is float32 in JAX: computed (and returned) in float32.
    assert v.computation_dtypes("u", np.zeros(2, np.float64)) == (f32, f32)
    with jax.enable_x64(True):
        assert v.computation_dtypes("u", np.zeros(2, np.float64)) == (f64, f64)
        assert v.computation_dtypes("u", np.zeros(2, np.int8)) == (f64, f64)  # the default float
    with pytest.raises(ValueError, match=r"u must be real .*got dtype complex64"):
        v.computation_dtypes("u", jnp.zeros(2, jnp.complex64))
    with pytest.raises(ValueError, match=r"u must be real .*got dtype <U1"):
        v.computation_dtypes("u", np.array(["a"]))


def test_check_finite_at_names_the_first_bad_position():
    x = np.zeros((2, 5, 3))
    v.check_finite_at("u", x, ("batch", "time", "channel"))
    x[1, 4, 0] = np.inf
    x[1, 2, 2] = np.nan
    with pytest.raises(ValueError, match=r"^u .*nan at \(batch 1, time 2, channel 2\)"):
        v.check_finite_at("u", x, ("batch", "time", "channel"))
    with pytest.raises(ValueError, match=r"^u .*inf at \(time 1, channel 0\)"):
        v.check_finite_at("u", x[1, 3:], ("batch", "time", "channel"))  # time counts from the slice
    # Under jit the values are tracers: nothing is checked (no device-to-host copy).
    assert np.isnan(jax.jit(lambda x: v.check_finite_at("u", x, ("time",)) or x)(jnp.array([np.nan])))[0]


def test_check_step_bounds_in_float32():
    assert v.check_step_bounds(1e-3, 0.1) == (1e-3, 0.1)
    tiny = float(np.finfo(np.float32).tiny)
    assert v.check_step_bounds(tiny, 1e38) == (tiny, 1e38)
    for bad, shown in [(1e-50, r"1e-50 \(0 in float32\)"), (1e-40, r"1e-40 \(9\.99995e-41 in float32, subnormal\)"),
                       (0.0, "0.0"), (-1.0, "-1.0"), (np.nan, "nan"), ("1", "'1'"), (True, "True")]:
        with pytest.raises(ValueError, match=rf"^step_min .*got {shown}\.$"):
            v.check_step_bounds(bad, 0.1)
    with pytest.raises(ValueError, match=r"step_max .*got 1e\+39 \(inf in float32\)"):
        v.check_step_bounds(1e-3, 1e39)
    with pytest.raises(ValueError, match=r"^step_min .*step_min=0.5, step_max=0.1"):
        v.check_step_bounds(0.5, 0.1)
    assert v.check_step_bounds(1e-300, 1e-3, np.float64) == (1e-300, 1e-3)  # another dtype


def test_check_finite_at_names_the_value_before_the_cast():
    original = np.array([[0.0, 1e39]])
    with np.errstate(over="ignore"):
        cast = original.astype(np.float32)
    with pytest.raises(ValueError, match=r"^u .*1e\+39 .*inf in float32.*\(time 0, channel 1\)"):
        v.check_finite_at("u", cast, ("time", "channel"), original=original)
