"""The checks at the package's doors: each message names the argument and what it got
(``message(...)``: the name and the offending value appear, whatever the sentence)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import message

from annotated_ssm import _validation as v


def test_check_is_the_generic_rule():
    assert v.check("n", 3, True, "be odd") == 3
    with pytest.raises(ValueError, match=message("n", "be odd", 4)):
        v.check("n", 4, False, "be odd")
    with pytest.raises(ValueError, match=message("n", "shape (2,)")):
        v.check("n", np.zeros(2), False, "be a scalar", "shape (2,)")


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "4", np.float32(2)])
def test_integers_refuse_what_is_not_an_integer_in_range(value):
    with pytest.raises(ValueError, match=message("N", value)):
        v.check_positive_int("N", value)


def test_integers_beyond_int32_are_refused_not_overflowed():
    assert v.check_positive_int("N", np.int64(4)) == 4 and v.check_positive_int("N", 2**31 - 1) == 2**31 - 1
    with pytest.raises(ValueError, match=message("N", 2**31, "2147483647")):
        v.check_positive_int("N", 2**31)
    for bad in (1.7, -1, 2**32, True):
        with pytest.raises(ValueError, match=message("seed", bad)):
            v.check_seed("seed", bad)


@pytest.mark.parametrize("value", ["no", 1, 0, None, "True"])
def test_check_bool_refuses_non_bools(value):
    with pytest.raises(ValueError, match=message("flag", value)):
        v.check_bool("flag", value)


def test_check_bool_accepts_python_and_numpy_bools():
    assert v.check_bool("flag", np.bool_(True)) is True and v.check_bool("flag", False) is False


@pytest.mark.parametrize("value", [0, -1.0, np.nan, np.inf, "1", True, None])
def test_check_real_in_refuses(value):
    with pytest.raises(ValueError, match=message("eps", value)):
        v.check_real_in("eps", value, 0.0, open_low=True)


def test_check_choice():
    assert v.check_choice("method", "zoh", ("euler", "zoh")) == "zoh"
    for bad in ("rk4", ["zoh"], None):
        with pytest.raises(ValueError, match=message("method", bad, "euler")):
            v.check_choice("method", bad, ("euler", "zoh"))


def test_check_batch_shape():
    assert v.check_batch_shape("batch_shape", 5) == (5,)
    assert v.check_batch_shape("batch_shape", np.int64(2)) == (2,)
    assert v.check_batch_shape("batch_shape", (2, 3)) == (2, 3)
    assert v.check_batch_shape("batch_shape", ()) == ()
    for bad in ("ab", (-1,), (2.5,), None, True):
        with pytest.raises(ValueError, match=message("batch_shape", bad)):
            v.check_batch_shape("batch_shape", bad)


def test_check_step_bounds_in_float32():
    assert v.check_step_bounds(1e-3, 0.1) == (1e-3, 0.1)
    tiny = float(np.finfo(np.float32).tiny)
    assert v.check_step_bounds(tiny, 1e38) == (tiny, 1e38)
    for bad, shown in [(1e-50, "1e-50 (0 in float32)"), (1e-40, "1e-40 (9.99995e-41 in float32, subnormal)"),
                       (0.0, "0.0"), (-1.0, "-1.0"), (np.nan, "nan"), ("1", "'1'"), (True, "True")]:
        with pytest.raises(ValueError, match=message("step_min", shown)):
            v.check_step_bounds(bad, 0.1)
    with pytest.raises(ValueError, match=message("step_max", "1e+39 (inf in float32)")):
        v.check_step_bounds(1e-3, 1e39)
    with pytest.raises(ValueError, match=message("step_min", "step_min=0.5, step_max=0.1")):
        v.check_step_bounds(0.5, 0.1)
    assert v.check_step_bounds(1e-300, 1e-3, np.float64) == (1e-300, 1e-3)  # another dtype


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
    for bad in (jnp.zeros(2, jnp.complex64), np.array(["a"])):
        with pytest.raises(ValueError, match=message("u", str(bad.dtype))):
            v.computation_dtypes("u", bad)


def test_computation_dtypes_of_dtype_arguments():
    assert v.computation_dtypes("dtype", None, kinds="f")[0] == np.float32
    for name in ("float16", "bfloat16", "float32", "float64"):
        assert v.computation_dtypes("dtype", name, kinds="f")[1].name == (
            "float32" if name == "float64" else name)  # float64 is float32 without x64
    assert v.computation_dtypes("dtype", jnp.complex64, kinds="fc") == (np.float32, np.float32)
    for bad, spelled in [(jnp.int32, "int32"), (bool, "bool"), ("x", "'x'"), (np.complex64, "complex64")]:
        with pytest.raises(ValueError, match=message("dtype", spelled)):
            v.computation_dtypes("dtype", bad, kinds="f")


def test_check_finite_names_the_first_bad_position():
    x = np.zeros((2, 5, 3))
    assert v.check_finite("u", x, np.float32, ("batch", "time", "channel")).dtype == np.float32
    x[1, 4, 0] = np.inf
    x[1, 2, 2] = np.nan
    with pytest.raises(ValueError, match=message("u", "nan", "batch 1, time 2, channel 2", "2 non-finite")):
        v.check_finite("u", x, np.float32, ("batch", "time", "channel"))
    with pytest.raises(ValueError, match=message("u", "inf", "time 1, channel 0")):
        v.check_finite("u", x[1, 3:], np.float32, ("batch", "time", "channel"))  # counted from the slice
    # Under jit the values are tracers: nothing is checked (no device-to-host copy).
    traced = jax.jit(lambda x: v.check_finite("u", x, np.float32, ("time",)))(jnp.array([np.nan]))
    assert np.isnan(np.asarray(traced)[0])


def test_check_finite_checks_in_the_target_dtype():
    out = v.check_finite("s", [0.5, 2.0], np.float32, positive=True)
    assert out.dtype == np.float32 and np.array_equal(out, [0.5, 2.0])
    with pytest.raises(ValueError, match=message("s", "1e+39", "inf in float32", "index (1,)")):
        v.check_finite("s", np.array([1.0, 1e39]), np.float32, positive=True)
    with pytest.raises(ValueError, match=message("s", "-1.0", "index (0, 1)")):
        v.check_finite("s", jnp.array([[1.0, -1.0], [0.0, 1.0]]), np.float32, positive=True)  # on its device
    with pytest.raises(ValueError, match=message("s", "complex128")):
        v.check_finite("s", np.array([1 + 1j]), np.float32)
    traced = jax.jit(lambda s: v.check_finite("s", s, np.float32, positive=True))(jnp.array([-1.0]))
    assert float(traced[0]) == -1.0  # a tracer: cast, not checked


def test_check_integers():
    lengths = np.array([3, 0, 5, 9])
    with pytest.raises(ValueError, match=message("lengths", "0 at index 1", "[1, 5]")):
        v.check_integers("lengths", lengths, (4,), "lengths", 1, 5)
    with pytest.raises(ValueError, match=message("lengths", "float32")):
        v.check_integers("lengths", lengths.astype(np.float32), (4,), "lengths", 1, 5)
    with pytest.raises(ValueError, match=message("lengths", "(4,)", "(3,)")):
        v.check_integers("lengths", lengths, (3,), "lengths", 1, 5)
    traced = jax.jit(lambda n: v.check_integers("lengths", n, (4,), "lengths", 1, 5))(lengths)
    assert np.array_equal(traced, lengths)  # under jit only the shape and dtype are checked


def test_check_shape():
    assert v.check_shape("u", np.zeros((2, 5, 3)), 3) == (2, 5, 3)
    for shape in [(5,), (2, 5, 4), (1, 2, 5, 3), (2, 0, 3)]:
        with pytest.raises(ValueError, match=message("u", shape, "3 channels")):
            v.check_shape("u", np.zeros(shape), 3)
    assert v.check_shape("u_t", np.zeros((4, 2, 3)), 3, None, time=False) == (4, 2, 3)
