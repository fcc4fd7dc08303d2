"""The layer contract (annotated_ssm/layers/base.py), checked for every layer in ``LAYERS``
and for the skeleton layer written out in base.py's docstring: the one place for the checks
every layer shares (shapes, transformations, recurrence = call, the dtype policy, the
checks at the door and their messages, hostile inputs found by adversarial runs).

A layer added to ``LAYERS`` is tested here automatically. Layer-specific correctness (the
kernels against float64 references, the parameterisations, options other than the
defaults) stays in test_<layer>.py.

An error test asserts what a user needs from the message, the argument's name and the
offending value (``message(...)``), not the sentence around them.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import message, relative_error, run_examples

from annotated_ssm.layers import LAYERS, SSMLayer, SSMParam, base, get_layer
from annotated_ssm.scan import linear_recurrence

H, N, L = 3, 8, 40


def skeleton_layer() -> type[SSMLayer]:
    """The example layer of base.py's docstring, from running its examples (a reader who
    copies it gets a layer that keeps the contract)."""
    return run_examples(base, "layers/base.py")["RealDiagonalLayer"]


CLASSES = {**LAYERS, "skeleton": skeleton_layer()}
NAMES = list(CLASSES)


def make(name, **kwargs):
    options = {"d_model": H, "state_size": N, "rngs": nnx.Rngs(0)}
    options.update(kwargs)
    return CLASSES[name](**options)



def test_registered_layers_are_found_by_name():
    assert all(get_layer(name) is cls for name, cls in LAYERS.items())
    with pytest.raises(ValueError, match=message("layer", "lstm")):
        get_layer("lstm")


@pytest.mark.parametrize("cls", list(LAYERS.values()), ids=list(LAYERS))
def test_docstring_example_runs(cls):
    """Each layer class's docstring example runs as a doctest, as a reader would type it."""
    run_examples(cls, cls.__name__)


def inputs(shape=(2, L, H), seed=1, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def step_sizes_for(shape, seed=9):
    """Per-observation step sizes (0.5 to 2, in units of the training interval)."""
    return jax.random.uniform(jax.random.key(seed), shape, minval=0.5, maxval=2.0)


@pytest.fixture(params=NAMES)
def name(request):
    return request.param


# --- shapes and the shared parameters ------------------------------------------------------


def test_batched_and_single_sequences(name):
    layer = make(name)
    u = inputs()
    y = layer(u)
    assert y.shape == u.shape and y.dtype == jnp.float32
    assert relative_error(layer(u[1]), y[1]) < 1e-6
    # Not the identity or the skip term alone: the SSM part contributes.
    assert relative_error(y, layer.D[...] * u) > 1e-2
    # Host float64 without x64 is computed and returned in float32 (the default float dtype).
    y64 = layer(np.asarray(u, np.float64))
    assert y64.dtype == jnp.float32 and relative_error(y64, y) < 1e-6


def test_shared_parameters(name):
    layer = make(name)
    assert layer.d_model == H and layer.state_size == N and layer.bidirectional is False
    assert isinstance(layer.log_step_size, SSMParam)
    assert layer.D.shape == (H,)
    step = np.asarray(layer.step_sizes())
    np.testing.assert_allclose(step, np.exp(np.asarray(layer.log_step_size[...])), rtol=1e-6)
    assert np.all((step >= 1e-3 * (1 - 1e-6)) & (step <= 1e-1 * (1 + 1e-6)))


# --- transformations -------------------------------------------------------------------------


def test_jit_and_vmap_equal_eager(name):
    layer = make(name)
    u = inputs()
    eager = layer(u)
    assert relative_error(nnx.jit(lambda m, x: m(x))(layer, u), eager) < 1e-6
    per_sequence = nnx.vmap(lambda m, x: m(x), in_axes=(None, 0))(layer, u)
    assert relative_error(per_sequence, eager) < 1e-6
    if layer.takes_step_sizes:  # and with a step size per observation
        s = step_sizes_for(u.shape[:-1])
        eager = layer(u, step_sizes=s)
        assert relative_error(nnx.jit(lambda m, x, s: m(x, step_sizes=s))(layer, u, s), eager) < 1e-6
        per_sequence = nnx.vmap(lambda m, x, s: m(x, step_sizes=s), in_axes=(None, 0, 0))(layer, u, s)
        assert relative_error(per_sequence, eager) < 1e-6


def test_gradients_match_finite_differences_float64(name):
    """Every parameter gets a gradient, and the directional derivative wrt all parameters and
    the input matches central differences, in float64 (x64). Bidirectional, so that the
    backward parameters are included; a layer that takes step sizes is differentiated with
    and without them (two code paths, one loss)."""
    with jax.enable_x64(True):
        layer = make(name, bidirectional=True)
        graphdef, params = nnx.split(layer)
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), params)
        u = np.asarray(inputs((2, 20, H)), np.float64)
        s = np.asarray(step_sizes_for((2, 20)), np.float64) if layer.takes_step_sizes else None

        @jax.jit
        def loss(params, u):
            model = nnx.merge(graphdef, params)
            value = jnp.mean(jnp.sin(model(u)))
            if s is not None:
                value = value + jnp.mean(jnp.sin(model(u, step_sizes=s)))
            return value

        keys = iter(jax.random.split(jax.random.key(2), 100))
        dp = jax.tree.map(lambda x: jax.random.normal(next(keys), x.shape, jnp.float64), params)
        du = jax.random.normal(next(keys), u.shape, jnp.float64)
        g_params, g_u = jax.jit(jax.grad(loss, argnums=(0, 1)))(params, u)
        for path, g in jax.tree_util.tree_leaves_with_path(g_params):
            assert np.all(np.isfinite(g)) and np.any(g != 0), jax.tree_util.keystr(path)
        predicted = sum(jnp.sum(a * b) for a, b in zip(jax.tree.leaves(g_params), jax.tree.leaves(dp)))
        predicted = float(predicted + jnp.sum(g_u * du))
        eps = 1e-5
        shift = lambda s: (jax.tree.map(lambda p, d: p + s * d, params, dp), u + s * du)
        fd = (loss(*shift(eps)) - loss(*shift(-eps))) / (2 * eps)
        assert abs(predicted - float(fd)) < 1e-6 * abs(float(fd)), (predicted, float(fd))


# --- the recurrence ----------------------------------------------------------------------------


def test_recurrent_equals_call_float32(name):
    layer = make(name)
    u = inputs()  # the shapes of the other tests: their compiled call is reused
    y = layer(u)
    r = layer.recurrent(u)
    assert r.shape == y.shape and r.dtype == jnp.float32
    assert relative_error(r, y) < 1e-5
    assert relative_error(layer.recurrent(u[0]), y[0]) < 1e-5
    if layer.takes_step_sizes:  # irregular sampling: one step size per observation
        s = step_sizes_for(u.shape[:-1])
        assert relative_error(layer.recurrent(u, step_sizes=s), layer(u, step_sizes=s)) < 1e-5


def test_recurrent_equals_call_under_x64(name):
    with jax.enable_x64(True):
        layer = make(name)
        u = np.asarray(inputs(), np.float64)
        y = layer(u)
        r = layer.recurrent(u)
        assert y.dtype == jnp.float64 and r.dtype == jnp.float64
        # float64 end to end: float32 anywhere would leave errors of 1e-7 or more.
        assert relative_error(r, y) < 1e-10
        state = layer.init_state(2, dtype=jnp.float64)
        # Real or complex states (the layer's choice), of float64 precision.
        assert jax.tree.leaves(state)[0].dtype in (jnp.float64, jnp.complex128)


def test_recurrent_equals_call_at_small_step_sizes(name):
    """At small Δ, Ā = I + (a small increment): S4's float32 recurrence, written as
    A1 (A0 x) and I - Ā^L, drifted from its convolution by up to 1.9e-3 at Δ = 1e-5, L = 16,
    N = 64 (S4 now forms Ā - I directly). Also under jit, and its gradient is finite."""
    u = inputs((2, 16, H), seed=3)
    for step in (1e-4, 1e-5):
        layer = make(name, state_size=64, step_min=step, step_max=step)
        y = layer(u)
        assert relative_error(layer.recurrent(u), y) < 1e-5, step

    def loss(m, x):
        r = m.recurrent(x)
        return jnp.sum(r**2), r

    (_, r), grads = nnx.jit(nnx.value_and_grad(loss, has_aux=True))(layer, u)  # one compilation
    assert relative_error(r, y) < 1e-5
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(nnx.state(grads)))


def test_step_by_step_equals_call(name):
    """step() with the system of discrete_system(L), and without one (the unbounded system,
    for generating past any length; a layer that needs L refuses it in both places)."""
    layer = make(name)
    u = inputs()
    y = layer(u)
    step = nnx.jit(lambda m, state, u_t, system: m.step(state, u_t, system))
    try:
        unbounded = layer.discrete_system(None)
    except ValueError as error:
        assert re.search(message("length"), str(error)), error
        with pytest.raises(ValueError, match=message("length")):
            layer.step(layer.init_state((2,)), u[:, 0])
        unbounded = None
    systems = [layer.discrete_system(L)] + ([None] if unbounded is not None else [])
    for system in systems:
        state = layer.init_state((2,))
        outputs = []
        for t in range(L):
            state, y_t = step(layer, state, u[:, t], system)
            outputs.append(y_t)
        assert relative_error(jnp.stack(outputs, axis=1), y) < 1e-5, system is None


def test_init_state_batch_shapes(name):
    layer = make(name)
    as_int = jax.tree.leaves(layer.init_state(5))[0]
    as_tuple = jax.tree.leaves(layer.init_state((5,)))[0]
    assert as_int.shape == as_tuple.shape and as_int.shape[0] == 5
    assert jax.tree.leaves(layer.init_state())[0].shape == as_tuple.shape[1:]
    for bad in ("a", (-1,), (2.5,), None):
        with pytest.raises(ValueError, match=message("batch_shape", bad)):
            layer.init_state(bad)


# --- the bidirectional policy ------------------------------------------------------------------


def test_causal_layer_is_causal_bidirectional_is_not(name):
    u = inputs((L, H))
    t0 = 25
    u2 = u.at[t0].add(1.0)
    causal = make(name)
    change = jnp.abs(causal(u2) - causal(u))
    assert float(jnp.max(change[:t0])) < 1e-5 * float(jnp.max(change[t0:]))
    both = make(name, bidirectional=True)
    assert both.bidirectional is True
    change = jnp.abs(both(u2) - both(u))
    assert float(jnp.max(change[:t0])) > 1e-3 * float(jnp.max(change[t0:]))


def test_bidirectional_layer_has_no_recurrence(name):
    layer = make(name, bidirectional=True)
    u = inputs()
    with pytest.raises(ValueError, match=message("discrete_system", "bidirectional=True")):
        layer.discrete_system(L)
    with pytest.raises(ValueError, match=message("init_state", "bidirectional=True")):
        layer.init_state((2,))
    causal_state = make(name).init_state((2,))
    with pytest.raises(ValueError, match=message("step", "bidirectional=True")):
        layer.step(causal_state, u[:, 0])
    with pytest.raises(ValueError, match=message("recurrent", "bidirectional=True")):
        layer.recurrent(u)


# --- dtypes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.bool_])
def test_integer_and_bool_inputs_are_computed_in_floating_point(name, dtype):
    layer = make(name)
    u = jnp.asarray(np.array([1, 2, 3, 0, 1, 1, 1, 1]) % (2 if dtype == jnp.bool_ else 4))
    u = jnp.broadcast_to(u[:, None], (8, H)).astype(dtype)
    y = layer(u)
    assert y.dtype == jnp.float32
    expected = layer(u.astype(jnp.float32))
    assert relative_error(y, expected) < 1e-6
    # The memory of the SSM survives: with the same input (1) at steps 4 and 7, the outputs
    # differ by what the state remembers of the past, not truncated to an integer.
    assert float(jnp.max(jnp.abs(y[4] - y[7]))) > 1e-4
    assert relative_error(layer.recurrent(u), expected) < 1e-5


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_low_precision_is_computed_in_float32_and_returned_in_its_dtype(name, dtype):
    layer = make(name)
    u = inputs().astype(dtype)
    y = layer(u)
    assert y.dtype == dtype
    expected = layer(u.astype(jnp.float32))
    # Only the final rounding to the low-precision dtype differs (bf16: 8 bits of mantissa).
    assert relative_error(y.astype(jnp.float32), expected) < 1e-2
    assert relative_error(y.astype(jnp.float32), expected.astype(dtype).astype(jnp.float32)) < 1e-6
    r = layer.recurrent(u)
    assert r.dtype == dtype and relative_error(r.astype(jnp.float32), expected) < 1e-2


def test_parameters_are_float32_under_x64(name):
    """The parameters are stored in float32 whatever jax_enable_x64 says (a float64 NumPy
    scalar in an initialiser made S4's and S4D's C float64 under x64); computations cast them."""
    with jax.enable_x64(True):
        layer = make(name, bidirectional=True)
    assert {str(x.dtype) for x in jax.tree.leaves(nnx.state(layer))} == {"float32"}


def test_kernel_dtype_rule(name):
    """kernel() follows one rule for every convolutional layer: the dtype asked for (default:
    the default float dtype), float64 end to end under x64; 16-bit kernels are computed in
    float32 and rounded at the end. DSS returned float32 under x64 where S4 and S4D gave float64."""
    layer = make(name)
    if not isinstance(layer, base.ConvolutionalSSMLayer):
        pytest.skip("not a convolutional layer: no kernel()")
    K32 = layer.kernel(L)
    assert K32.dtype == jnp.float32 and K32.shape == (H, L)
    assert relative_error(layer.kernel(L, dtype=jnp.float64), K32) == 0  # float64 is float32 without x64
    for dtype in (jnp.bfloat16, jnp.float16):
        K = layer.kernel(L, dtype=dtype)
        assert K.dtype == dtype and relative_error(K.astype(jnp.float32), K32.astype(dtype).astype(jnp.float32)) == 0
    with jax.enable_x64(True):
        K64 = layer.kernel(L)
        assert K64.dtype == jnp.float64 and layer.kernel(L, dtype=jnp.float64).dtype == jnp.float64
        assert layer.kernel(L, dtype=jnp.float32).dtype == jnp.float32
        assert relative_error(layer.kernel(L, dtype=jnp.float32), K32) < 1e-6
        # Computed in float64, not float32 widened: it differs from the float32 kernel by
        # float32's rounding, and agrees with it to float32 precision.
        assert 1e-9 < relative_error(K32, K64) < 1e-5


def test_dtype_arguments_follow_the_dtype_policy(name):
    """discrete_system/init_state take a floating dtype and compute in its computation dtype
    (float32 for the 16-bit dtypes); the state's precision follows."""
    layer = make(name)
    for dtype in (jnp.float16, jnp.bfloat16, jnp.float32):
        state = layer.init_state(2, dtype=dtype)
        assert {jnp.dtype(x.dtype) for x in jax.tree.leaves(state)} <= {jnp.dtype(jnp.float32),
                                                                        jnp.dtype(jnp.complex64),
                                                                        jnp.dtype(jnp.int32)}
        system = layer.discrete_system(L, dtype=dtype)
        assert all(x.dtype in (jnp.float32, jnp.complex64, jnp.int32, jnp.bool_) for x in jax.tree.leaves(system))
    with jax.enable_x64(True):
        leaves = jax.tree.leaves(layer.init_state(2)) + jax.tree.leaves(layer.discrete_system(L))
        assert any(x.dtype in (jnp.float64, jnp.complex128) for x in leaves)
        assert not any(x.dtype in (jnp.float32, jnp.complex64) for x in leaves)
    # complex64 names a state's dtype directly, for a layer whose state is complex.
    if any(jnp.iscomplexobj(x) for x in jax.tree.leaves(layer.init_state())):
        state = layer.init_state(2, dtype=jnp.complex64)
        expected = layer.init_state(2, dtype=jnp.float32)
        assert [x.dtype for x in jax.tree.leaves(state)] == [x.dtype for x in jax.tree.leaves(expected)]
    else:
        with pytest.raises(ValueError, match=message("dtype", "complex64")):
            layer.init_state(2, dtype=jnp.complex64)


@pytest.mark.parametrize(("dtype", "spelled"), [("int32", "int32"), (bool, "bool"), ("uint8", "uint8"),
                                                ("foo", "foo"), (jnp.complex64, "complex64")])
def test_dtype_arguments_must_be_floating(name, dtype, spelled):
    """An integer dtype truncated S6's A = -(1, 2, 3, 4) to -(1, 1, e, e) and step() went on
    with it; the other layers raised a JAX TypeError from deep inside."""
    layer = make(name)
    with pytest.raises(ValueError, match=message("dtype", spelled)):
        layer.discrete_system(6, dtype=dtype)
    if spelled != "complex64":  # allowed for complex states (above)
        with pytest.raises(ValueError, match=message("dtype", spelled)):
            layer.init_state(2, dtype=dtype)
    if isinstance(layer, base.ConvolutionalSSMLayer):
        with pytest.raises(ValueError, match=message("dtype", spelled)):
            layer.kernel(6, dtype=dtype)


def test_complex_input_is_rejected(name):
    layer = make(name)
    u = inputs().astype(jnp.complex64)
    with pytest.raises(ValueError, match=message("u", "complex64")):
        layer(u)
    with pytest.raises(ValueError, match=message("u", "complex64")):
        layer.recurrent(u)


# --- non-finite input --------------------------------------------------------------------------


@pytest.mark.parametrize(("bad", "spelled"), [(np.nan, "nan"), (np.inf, "inf"), (1e39, "1e+39")])
def test_non_finite_input_is_rejected_with_its_position(name, bad, spelled):
    """A NaN or inf is named with its first position: in a jax.Array (checked on its device)
    and in host float64 input, checked after the cast to the float32 it is computed in
    (1e39, finite in float64, is inf there)."""
    layer = make(name)
    u = inputs()
    if bad == 1e39:  # host input
        u = np.asarray(u, np.float64)
        u[1, 7, 2] = u[1, 9, 0] = bad
    else:  # a jax.Array
        u = u.at[1, 7, 2].set(bad).at[1, 9, 0].set(bad)
    with pytest.raises(ValueError, match=message("u", spelled, "batch 1, time 7, channel 2")):
        layer(u)
    with pytest.raises(ValueError, match=message("u", spelled, "time 7, channel 2")):
        layer(u[1])
    with pytest.raises(ValueError, match=message("u", spelled, "batch 1, time 7, channel 2")):
        layer.recurrent(u)
    with pytest.raises(ValueError, match=message("u_t", spelled, "batch 1, channel 2")):
        layer.step(layer.init_state((2,)), u[:, 7], layer.discrete_system(L))
    if bad == 1e39:  # under x64 the same input is computed in float64, where it is finite
        with jax.enable_x64(True):
            assert np.all(np.isfinite(np.asarray(layer(u))))


def test_non_finite_input_under_jit_is_not_checked(name):
    """Documented behaviour: under jit the values are tracers; no device-to-host check runs."""
    layer = make(name)
    u = inputs().at[0, 7, 2].set(np.nan)
    y = nnx.jit(lambda m, x: m(x))(layer, u)
    assert not np.all(np.isfinite(np.asarray(y[0])))
    assert np.all(np.isfinite(np.asarray(y[1])))  # the other sequence is untouched


# --- step(): the state and the system must be this layer's ---------------------------------------


def test_step_refuses_a_state_for_another_batch_shape(name):
    layer = make(name)
    system = layer.discrete_system(L)
    u_t = jnp.zeros((2, H))
    with pytest.raises(ValueError, match=message("state", "(2,)", "(3,)")):
        layer.step(layer.init_state(3), u_t, system)  # was: TypeError from broadcasting
    with pytest.raises(ValueError, match=message("state", "(2,)", "()")):
        layer.step(layer.init_state(), u_t, system)  # was: silently broadcast
    with pytest.raises(ValueError, match=message("state", "NoneType")):
        layer.step(None, u_t, system)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_step_refuses_a_non_finite_state(name, bad):
    layer = make(name)
    system = layer.discrete_system(L)
    state = layer.init_state(2)
    poisoned = jax.tree.map(lambda x: x.at[(1,) + (0,) * (x.ndim - 1)].set(bad) if x.ndim else x, state)
    u_t = jnp.ones((2, H))
    with pytest.raises(ValueError, match=message("state", "finite", "1 non-finite")):
        layer.step(poisoned, u_t, system)
    single = jax.tree.map(lambda x: x[1] if x.ndim else x, poisoned)  # one sequence, no batch axis
    with pytest.raises(ValueError, match=message("state", "finite")):
        layer.step(single, u_t[1], system)
    # Under jit the state is a tracer: nothing to look at, as for u (documented).
    _, y = nnx.jit(lambda m, s, u, system: m.step(s, u, system))(layer, poisoned, u_t, system)
    assert not np.all(np.isfinite(np.asarray(y[1]))) and np.all(np.isfinite(np.asarray(y[0])))


def test_step_refuses_a_state_of_another_dtype(name):
    layer = make(name)
    system = layer.discrete_system(L)
    state = layer.init_state(2)
    as_int = jax.tree.map(lambda x: x.real.astype(jnp.int32), state)
    with pytest.raises(ValueError, match=message("state", "int32")):
        layer.step(as_int, jnp.ones((2, H)), system)
    with jax.enable_x64(True):  # float32 and float64 states both pass there (the step promotes)
        for dtype in (jnp.float32, jnp.float64):
            new_state, y = layer.step(layer.init_state(2, dtype=dtype), np.ones((2, H)), system)
            assert y.dtype == jnp.float64


def test_step_refuses_a_system_that_is_not_this_layers(name):
    layer = make(name)
    state, u_t = layer.init_state(2), jnp.ones((2, H))
    with pytest.raises(TypeError, match=message("system", "tuple", "(1, 2)")):
        layer.step(state, u_t, (1, 2))
    # the same structure with other shapes (e.g. another d_model's, or heads' for SSD)
    doubled = jax.tree.map(lambda x: jnp.stack([x, x]), layer.discrete_system(L))
    with pytest.raises(ValueError, match=message("system", f"d_model={H}", "shapes")):
        layer.step(state, u_t, doubled)
    other = NAMES[(NAMES.index(name) + 1) % len(NAMES)]
    with pytest.raises((TypeError, ValueError), match=message("system")):
        layer.step(state, u_t, make(other).discrete_system(L))


# --- step sizes per observation ------------------------------------------------------------------


def test_step_sizes_are_checked_after_the_cast(name):
    """S5 checked step sizes before the cast: 1e39 (finite in float64) is inf in float32,
    and the layer returned NaN. The time-invariant layers refuse step sizes altogether."""
    layer = make(name)
    u = inputs()
    if not layer.takes_step_sizes:
        with pytest.raises(ValueError, match=message("step_sizes", type(layer).__name__)):
            layer(u, step_sizes=np.ones(L))
        return
    huge = np.ones(L)
    huge[7] = 1e39
    with pytest.raises(ValueError, match=message("step_sizes", "1e+39", "(7,)")):
        layer(u, step_sizes=huge)
    with pytest.raises(ValueError, match=message("step_sizes", "1e+39", "(7,)")):
        layer.recurrent(u, step_sizes=huge)
    tiny = np.ones((2, L))
    tiny[1, 7] = 1e-50
    with pytest.raises(ValueError, match=message("step_sizes", "1e-50", "(1, 7)")):
        layer(u, step_sizes=tiny)
    for bad, spelled in ((0.0, "0.0"), (-1.0, "-1.0"), (np.nan, "nan")):
        with pytest.raises(ValueError, match=message("step_sizes", spelled)):
            layer(u, step_sizes=np.full(L, bad))
    with pytest.raises(ValueError, match=message("step_sizes", "1e+39")):
        layer.discrete_system(step_sizes=1e39)
    with pytest.raises(ValueError, match=message("step_sizes", "(4,)")):
        layer.discrete_system(L, step_sizes=np.ones(4))  # a scalar there
    for shape in [(L - 1,), (3, L)]:
        with pytest.raises(ValueError, match=message("step_sizes", shape)):
            layer(u, step_sizes=np.ones(shape))
    with pytest.raises(ValueError, match=message("step_sizes", (2, L))):
        layer(u[0], step_sizes=np.ones((2, L)))
    with jax.enable_x64(True):  # a float64 device array, cast to u's float32 on its device
        with pytest.raises(ValueError, match=message("step_sizes", "1e+39", "(7,)")):
            layer(u, step_sizes=jnp.asarray(huge, jnp.float64))
        # In float64 the same step sizes are finite and accepted.
        assert layer(np.asarray(u, np.float64), step_sizes=np.full(L, 1e3)).dtype == jnp.float64
    # The largest step size finite in float32 is accepted.
    assert np.all(np.isfinite(np.asarray(layer(u, step_sizes=np.full(L, 1e3)))))


# --- bad arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, -3, 2.5, True, "8"])
def test_bad_lengths(name, length):
    layer = make(name)
    with pytest.raises(ValueError, match=message("length", length)):
        layer.discrete_system(length)
    if isinstance(layer, base.ConvolutionalSSMLayer):
        with pytest.raises(ValueError, match=message("length", length)):
            layer.kernel(length)


BAD_CONSTRUCTOR_ARGUMENTS = [
    ("bidirectional", "no"),
    ("bidirectional", 1),
    ("bidirectional", None),
    ("d_model", 0),
    ("d_model", 2.5),
    ("d_model", "3"),
    ("d_model", True),
    ("state_size", 0),
    ("state_size", -8),
    ("state_size", 8.0),
    ("step_min", 0.0),
    ("step_min", -1e-3),
    ("step_min", 0.5),  # > step_max
    ("step_max", np.inf),
    ("step_max", np.nan),
    ("step_max", "0.1"),
    # Range checks in float32, where log Δ is computed:
    ("step_min", 1e-50),  # 0 in float32 (was: a NaN log step size)
    ("step_max", 1e39),  # inf in float32 (was: a NaN log step size)
    ("step_min", 1e-40),  # subnormal in float32 (2/Δ overflowed in S4)
]


@pytest.mark.parametrize(("option", "value"), BAD_CONSTRUCTOR_ARGUMENTS)
def test_bad_constructor_arguments(name, option, value):
    with pytest.raises(ValueError, match=message(option, value)):
        make(name, **{option: value})


def test_constructor_argument_extremes(name):
    """The extreme step sizes that are allowed give a finite log Δ; rngs must be an nnx.Rngs
    (was: "'int' object has no attribute 'params'")."""
    tiny, huge = float(np.finfo(np.float32).tiny), 1e38
    layer = make(name, step_min=tiny, step_max=huge)
    assert np.all(np.isfinite(np.asarray(layer.log_step_size[...])))
    for rngs, spelled in ((0, "int"), (None, "None"), (jax.random.key(0), "key")):
        with pytest.raises(TypeError, match=message("rngs", spelled)):
            make(name, rngs=rngs)


def test_bad_input_shapes(name):
    layer = make(name)
    with pytest.raises(ValueError, match=message("u", f"{H} channels", (L, H + 1))):
        layer(jnp.zeros((L, H + 1)))
    for shape in [(L,), (1, 2, L, H)]:
        with pytest.raises(ValueError, match=message("u", "dimensions", shape)):
            layer(jnp.zeros(shape))
    with pytest.raises(ValueError, match=message("u", "length", (2, 0, H))):
        layer(jnp.zeros((2, 0, H)))
    with pytest.raises(ValueError, match=message("u_t", (H + 1,))):
        layer.step(layer.init_state(), jnp.zeros(H + 1), layer.discrete_system(L))
