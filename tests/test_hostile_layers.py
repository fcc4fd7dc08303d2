"""Hostile inputs to the layers and models: each cause found by an adversarial run gives a
ValueError (TypeError only for a wrong type) naming the argument, the value and
what is allowed, or works. The numerics (S4's float32 recurrence at small Δ, dense ZOH's
matrix exponential) are tested in test_s4.py and test_discretize.py; the training, checkpoint
and CLI side in test_hostile_training.py.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import relative_error

from annotated_ssm.initialization import diagonal_init, log_step_size
from annotated_ssm.layers import LAYERS, get_layer
from annotated_ssm.model import CausalSequenceModel

H, N, L = 3, 8, 24
NAMES = list(LAYERS)
SMALL = dict(d_model=8, n_layers=2, state_size=8)


def make(name, **kwargs):
    return get_layer(name)(H, N, rngs=nnx.Rngs(0), **kwargs)


def system_for(layer, length=L):
    return layer.discrete_system(length)


@pytest.fixture(params=NAMES)
def name(request):
    return request.param


# --- step sizes: range checks in the dtype log Δ is computed in (float32) ----------------


@pytest.mark.parametrize(("option", "value", "became"), [
    ("step_min", 1e-50, r"\(0 in float32\)"),  # was: a NaN log step size
    ("step_max", 1e39, r"\(inf in float32\)"),  # was: a NaN log step size
    ("step_min", 1e-40, r"\(9\.99995e-41 in float32, subnormal\)"),  # 2/Δ overflows in S4
])
def test_step_bounds_are_checked_in_float32(name, option, value, became):
    with pytest.raises(ValueError, match=rf"{option} must be a real number > 0, finite and normal in "
                                         rf"float32 .*got {re.escape(repr(value))} {became}"):
        make(name, **{option: value, "step_max" if option == "step_min" else "step_min": 1e-2})


def test_step_bounds_of_log_step_itself():
    with pytest.raises(ValueError, match=r"step_min .* got 1e-50 \(0 in float32\)"):
        log_step_size(jax.random.key(0), (3,), 1e-50, 1e-1)
    with pytest.raises(ValueError, match=r"step_max .* got 1e\+39 \(inf in float32\)"):
        log_step_size(jax.random.key(0), (3,), 1e-3, 1e39)
    # The extremes that are allowed give finite log Δ.
    tiny, huge = float(np.finfo(np.float32).tiny), 1e38
    assert np.all(np.isfinite(np.asarray(log_step_size(jax.random.key(0), (8,), tiny, huge))))


# --- inputs: finite after the cast to the dtype they are computed in ------------------------


def test_float64_input_that_overflows_float32_is_rejected(name):
    """Without x64 a float64 input is computed in float32: 1e39 would be inf there."""
    layer = make(name)
    u = np.zeros((2, L, H))
    u[1, 5, 2] = 1e39
    message = r"u must be finite; got 1e\+39 \(which is inf in float32.*\) at \(batch 1, time 5, channel 2\)"
    with pytest.raises(ValueError, match=message):
        layer(u)
    with pytest.raises(ValueError, match=message):
        layer.recurrent(u)
    with pytest.raises(ValueError, match=r"u_t must be finite; got 1e\+39 \(which is inf in float32"):
        layer.step(layer.init_state(2), u[:, 5], system_for(layer))
    # Under x64 the same input is computed in float64, where it is finite.
    with jax.enable_x64(True):
        assert np.all(np.isfinite(np.asarray(layer(u))))


def test_float64_input_without_x64_is_computed_and_returned_in_float32(name):
    layer = make(name)
    u = np.asarray(jax.random.normal(jax.random.key(1), (2, L, H)), np.float64)
    y = layer(u)
    assert y.dtype == jnp.float32
    assert relative_error(y, layer(u.astype(np.float32))) < 1e-6


# --- step() with a state of another batch size or structure --------------------------------


def test_step_with_another_batch_size_is_a_value_error(name):
    layer = make(name)
    system = system_for(layer)
    u_t = jnp.zeros((2, H))
    with pytest.raises(ValueError, match=r"state must be this layer's state for u_t's batch shape \(2,\).*"
                                         r"got one for batch shape \(3,\)"):
        layer.step(layer.init_state(3), u_t, system)  # was: TypeError from broadcasting
    with pytest.raises(ValueError, match=r"got one for batch shape \(\)"):
        layer.step(layer.init_state(), u_t, system)  # was: silently broadcast
    with pytest.raises(ValueError, match=r"got a NoneType of another structure"):
        layer.step(None, u_t, system)


def test_model_step_with_another_batch_size(name):
    model = CausalSequenceModel(name, 1, 1, rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=r"state must be this layer's state for u_t's batch shape \(2,\)"):
        model.step(model.init_state((3,)), jnp.zeros((2, 1)), model.discrete_system(L))


# --- init_options and flags -----------------------------------------------------------------


def test_unknown_init_options_key_is_a_value_error():
    S4D = get_layer("s4d")
    with pytest.raises(ValueError, match=r"unknown init_options key 'x'; choose from: 'real_part', "
                                         r"'imag_scale', 'random_real', 'random_imag'"):
        S4D(H, N, init_options={"x": b"yes"}, rngs=nnx.Rngs(0))  # was: TypeError
    with pytest.raises(ValueError, match=r"unknown init_options key 'key'"):
        S4D(H, N, init_options={"key": 1}, rngs=nnx.Rngs(0))
    with pytest.raises(TypeError, match=r"init_options must be a dict or None; got list"):
        S4D(H, N, init_options=[("real_part", -1.0)], rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"unknown init_options key 'x'"):
        CausalSequenceModel("s4d", 1, 1, init_options={"x": 1}, rngs=nnx.Rngs(0), **SMALL)


@pytest.mark.parametrize("flag", ["random_real", "random_imag"])
@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_non_bool_random_flags_are_refused(flag, value):
    """``bool("no")`` is True: a flag given "no" must be refused, not read as yes."""
    with pytest.raises(ValueError, match=rf"init_options\['{flag}'\] must be True or False; got {value!r}"):
        get_layer("s4d")(H, N, init="inv", init_options={flag: value}, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=rf"{flag} must be True or False; got {value!r}"):
        diagonal_init("inv", N, key=jax.random.key(0), **{flag: value})


@pytest.mark.parametrize(("option", "value"), [("real_part", "-0.5"), ("real_part", True),
                                               ("imag_scale", "1"), ("imag_scale", None)])
def test_non_numeric_init_options_are_value_errors(option, value):
    with pytest.raises(ValueError, match=rf"{option} must be a real number.*got {value!r}"):
        get_layer("s4d")(H, N, init="inv", init_options={option: value}, rngs=nnx.Rngs(0))


def test_valid_init_options_still_work():
    layer = get_layer("s4d")(H, N, init="inv", init_options={"random_real": True, "imag_scale": 2.0},
                             rngs=nnx.Rngs(0))
    assert np.all(np.asarray(layer.eigenvalues().real) < 0)


# --- models: empty prompts, and BatchNorm/dropout in the recurrent mode ----------------------


def test_generate_with_an_empty_prompt_is_a_value_error(name):
    model = CausalSequenceModel(name, 1, 1, rngs=nnx.Rngs(0), **SMALL)
    with pytest.raises(ValueError, match=r"prompt must have length >= 1 .*got shape \(2, 0, 1\)"):
        model.generate(jnp.zeros((2, 0, 1)), 3)  # was: IndexError
    with pytest.raises(ValueError, match=r"x must have length >= 1 .*got shape \(0, 1\)"):
        model.recurrent(jnp.zeros((0, 1)))


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_batch_norm_model_steps_and_generates_in_train_mode(name, dropout):
    """A fresh model is in train mode; its recurrence must not raise Flax's TraceContextError
    (BatchNorm updating its statistics, dropout drawing keys, inside a scan). The recurrence
    is inference: running statistics, no dropout, in either mode, and it changes nothing."""
    model = CausalSequenceModel(name, 1, 1, norm="batch", dropout=dropout, rngs=nnx.Rngs(0), **SMALL)
    x = jax.random.normal(jax.random.key(2), (2, L, 1))
    variables = (nnx.Param, nnx.BatchStat, nnx.RngCount)  # weights, statistics, dropout's counts
    before = jax.tree.map(np.asarray, nnx.state(model, variables))
    y_rec = model.recurrent(x)
    y_gen = model.generate(x[:, :5], 4)
    assert y_rec.shape == (2, L, 1) and y_gen.shape == (2, 8, 1)
    after = jax.tree.map(np.asarray, nnx.state(model, variables))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    model.eval()  # eval mode: the full-sequence call uses the same statistics
    assert relative_error(y_rec, model(x)) < 1e-5
    assert relative_error(model.recurrent(x), y_rec) < 1e-6
    assert relative_error(model.generate(x[:, :5], 4), y_gen) < 1e-6


# --- small steps: every layer's float32 recurrence against its own convolution -----------------


@pytest.mark.parametrize("step", [1e-4, 1e-5])
def test_float32_recurrence_matches_convolution_at_small_steps(name, step):
    """S4 drifted here (1.9e-3 at Δ = 1e-5 and L = 16 with N = 64); the others never did."""
    layer = get_layer(name)(H, 64, step_min=step, step_max=step, rngs=nnx.Rngs(0))
    u = jax.random.normal(jax.random.key(3), (2, 16, H))
    assert relative_error(layer.recurrent(u), layer(u)) < 1e-5


# --- dtype= of discrete_system, init_state and kernel: floating dtypes only ---------------------


NOT_FLOATING = [("int32", "dtype int32"), (bool, "dtype bool"), ("uint8", "dtype uint8"),
                ("foo", "'foo', which is not a dtype")]


@pytest.mark.parametrize(("dtype", "spelled"), NOT_FLOATING)
def test_dtype_arguments_must_be_floating(name, dtype, spelled):
    """An integer dtype truncated S6's A = -(1, 2, 3, 4) to -(1, 1, e, e) and step() went on
    with it; the other layers raised a JAX TypeError from deep inside."""
    layer = make(name)
    allowed = r"must be a floating dtype \(float16, bfloat16, float32, float64"
    got = rf"got {re.escape(spelled)}\."
    with pytest.raises(ValueError, match=rf"dtype {allowed}\); {got}"):
        layer.discrete_system(6, dtype=dtype)
    with pytest.raises(ValueError, match=rf"dtype {allowed}.*\); {got}"):
        layer.init_state(2, dtype=dtype)
    if hasattr(layer, "kernel"):
        with pytest.raises(ValueError, match=rf"dtype {allowed}\); {got}"):
            layer.kernel(6, dtype=dtype)


def test_complex_dtype_only_where_the_state_is_complex(name):
    layer = make(name)
    complex_state = any(jnp.iscomplexobj(x) for x in jax.tree.leaves(layer.init_state()))
    with pytest.raises(ValueError, match=r"dtype must be a floating dtype .*got dtype complex64"):
        layer.discrete_system(6, dtype=jnp.complex64)
    if complex_state:  # the matching complex dtype names the state's dtype directly
        state = layer.init_state(2, dtype=jnp.complex64)
        expected = layer.init_state(2, dtype=jnp.float32)
        assert [x.dtype for x in jax.tree.leaves(state)] == [x.dtype for x in jax.tree.leaves(expected)]
    else:
        with pytest.raises(ValueError, match=r"float64\); got dtype complex64"):
            layer.init_state(2, dtype=jnp.complex64)


def test_s6_system_in_a_floating_dtype_holds_the_exact_eigenvalues():
    layer = make("s6")
    expected = -np.arange(1, N + 1, dtype=np.float64)
    for dtype in (jnp.float32, jnp.float16, jnp.bfloat16):  # 16-bit dtypes compute in float32
        A = layer.discrete_system(6, dtype=dtype)
        assert A.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(A)[0], expected, rtol=1e-6)


# --- step sizes per observation: finite and > 0 after the cast to the computation dtype ---------


def test_step_sizes_are_checked_after_the_cast(name):
    """S5 checked step sizes before the cast: 1e39 (finite in float64) is inf in float32,
    and the layer returned NaN. The time-invariant layers refuse step sizes altogether."""
    layer = make(name)
    u = jax.random.normal(jax.random.key(4), (2, L, H))
    if not layer.takes_step_sizes:
        with pytest.raises(ValueError, match=rf"step_sizes is not accepted by {type(layer).__name__}"):
            layer(u, step_sizes=np.ones(L))
        return
    huge = np.ones(L)
    huge[7] = 1e39
    message = (r"step_sizes must be finite and > 0 in float32; got 1e\+39 \(which is inf in float32, "
               r"the dtype it is computed in\) at index \(7,\)\.")
    with pytest.raises(ValueError, match=message):
        layer(u, step_sizes=huge)
    with pytest.raises(ValueError, match=message):
        layer.recurrent(u, step_sizes=huge)
    tiny = np.ones((2, L))
    tiny[1, 7] = 1e-50
    with pytest.raises(ValueError, match=r"got 1e-50 \(which is 0\.0 in float32.*at index \(1, 7\)\.$"):
        layer(u, step_sizes=tiny)
    with pytest.raises(ValueError, match=r"got 1e\+39 \(which is inf in float32.*\)\.$"):
        layer.discrete_system(step_sizes=1e39)
    with jax.enable_x64(True):  # a float64 device array, cast to u's float32 on its device
        with pytest.raises(ValueError, match=message):
            layer(u, step_sizes=jnp.asarray(huge, jnp.float64))
        # In float64 the same step sizes are finite and accepted.
        assert layer(np.asarray(u, np.float64), step_sizes=np.full(L, 1e3)).dtype == jnp.float64
    # The largest step size finite in float32 is accepted.
    assert np.all(np.isfinite(np.asarray(layer(u, step_sizes=np.full(L, 1e3)))))


# --- step(): the state and the system must be this layer's --------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_step_refuses_a_non_finite_state(name, bad):
    layer = make(name)
    state = layer.init_state(2)
    poisoned = jax.tree.map(lambda x: x.at[(1,) + (0,) * (x.ndim - 1)].set(bad) if x.ndim else x, state)
    u_t = jnp.ones((2, H))
    with pytest.raises(ValueError, match=r"state must be finite; got 1 non-finite entry \(NaN or inf\)"):
        layer.step(poisoned, u_t, system_for(layer))
    single = jax.tree.map(lambda x: x[1] if x.ndim else x, poisoned)  # one sequence, no batch axis
    with pytest.raises(ValueError, match=r"state must be finite"):
        layer.step(single, u_t[1], system_for(layer))
    # Under jit the state is a tracer: nothing to look at, as for u (documented).
    _, y = nnx.jit(lambda m, s, u, system: m.step(s, u, system))(layer, poisoned, u_t, system_for(layer))
    assert not np.all(np.isfinite(np.asarray(y[1]))) and np.all(np.isfinite(np.asarray(y[0])))


def test_step_refuses_a_state_of_another_dtype(name):
    layer = make(name)
    state = layer.init_state(2)
    as_int = jax.tree.map(lambda x: x.real.astype(jnp.int32), state)
    expected = str([str(x.dtype) for x in jax.tree.leaves(state)])
    with pytest.raises(ValueError, match=rf"state must be this layer's state .*got dtypes "
                                         rf"{re.escape(str([str(x.dtype) for x in jax.tree.leaves(as_int)]))}, "
                                         rf"expected {re.escape(expected)}"):
        layer.step(as_int, jnp.ones((2, H)), system_for(layer))
    with jax.enable_x64(True):  # float32 and float64 states both pass there (the step promotes)
        for dtype in (jnp.float32, jnp.float64):
            new_state, y = layer.step(layer.init_state(2, dtype=dtype), np.ones((2, H)), system_for(layer))
            assert y.dtype == jnp.float64


def test_step_refuses_a_system_that_is_not_this_layers(name):
    layer = make(name)
    state, u_t = layer.init_state(2), jnp.ones((2, H))
    kind = "jax.Array" if name == "s6" else type(system_for(layer)).__name__
    with pytest.raises(TypeError, match=rf"system must be this layer's discrete system \(made by its "
                                        rf"discrete_system\), of type {kind}; got tuple \(1, 2\)"):
        layer.step(state, u_t, (1, 2))
    wider = get_layer(name)(H + 2, N, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=rf"system must be .*, with shapes .* \(d_model={H}, "
                                         rf"state_size={N}\); got shapes .*\({H + 2}, "):
        layer.step(state, u_t, system_for(wider))
    other = NAMES[(NAMES.index(name) + 1) % len(NAMES)]
    with pytest.raises(TypeError, match=r"system must be this layer's discrete system"):
        layer.step(state, u_t, system_for(make(other)))


@pytest.mark.parametrize("rngs", [0, None, jax.random.key(0)])
def test_rngs_must_be_an_nnx_rngs(name, rngs):
    with pytest.raises(TypeError, match=r"rngs must be an nnx.Rngs, e.g. rngs=nnx.Rngs\(0\); got "):
        get_layer(name)(H, N, rngs=rngs)  # was: "'int' object has no attribute 'params'"
