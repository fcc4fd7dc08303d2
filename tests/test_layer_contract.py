"""The layer contract (annotated_ssm/layers/base.py), checked for every layer in ``LAYERS``
and for the skeleton layer written out in base.py's docstring.

A layer added to ``LAYERS`` is tested here automatically. Layer-specific correctness (the
kernels against float64 references, the parameterisations) stays in test_<layer>.py.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import relative_error

from annotated_ssm.layers import LAYERS, SSMLayer, SSMParam, base, get_layer
from annotated_ssm.scan import linear_recurrence

H, N, L = 3, 8, 40


SKELETON = re.search(r"::\n\n(    class RealDiagonalLayer.*?)\n\n\S", base.__doc__, re.S).group(1)


def skeleton_layer() -> type[SSMLayer]:
    """The example layer of base.py's docstring, executed as written there."""
    source = SKELETON
    namespace = {"SSMLayer": SSMLayer, "jax": jax, "jnp": jnp, "np": np, "nnx": nnx,
                 "linear_recurrence": linear_recurrence}
    exec(compile("\n".join(line[4:] for line in source.splitlines()), "base.py docstring", "exec"), namespace)
    return namespace["RealDiagonalLayer"]


CLASSES = {**LAYERS, "skeleton": skeleton_layer()}
NAMES = list(CLASSES)


def make(name, **kwargs):
    options = {"d_model": H, "state_size": N, "rngs": nnx.Rngs(0)}
    options.update(kwargs)
    return CLASSES[name](**options)


def test_skeleton_is_short_and_registered_layers_are_found_by_name():
    assert len(SKELETON.splitlines()) <= 40
    assert all(get_layer(name) is cls for name, cls in LAYERS.items())


def inputs(shape=(2, L, H), seed=1, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


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


def test_gradients_match_finite_differences_float64(name):
    """Every parameter gets a gradient, and the directional derivative wrt all parameters and
    the input matches central differences, in float64 (x64). Bidirectional, so that the
    backward parameters are included."""
    with jax.enable_x64(True):
        layer = make(name, bidirectional=True)
        graphdef, params = nnx.split(layer)
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), params)
        u = np.asarray(inputs((2, 20, H)), np.float64)

        @jax.jit
        def loss(params, u):
            return jnp.mean(jnp.sin(nnx.merge(graphdef, params)(u)))

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
    u = inputs((2, 100, H))
    y = layer(u)
    r = layer.recurrent(u)
    assert r.shape == y.shape and r.dtype == jnp.float32
    assert relative_error(r, y) < 1e-5
    assert relative_error(layer.recurrent(u[0]), y[0]) < 1e-5


def test_recurrent_equals_call_under_x64(name):
    with jax.enable_x64(True):
        layer = make(name)
        u = np.asarray(inputs((2, 100, H)), np.float64)
        y = layer(u)
        r = layer.recurrent(u)
        assert y.dtype == jnp.float64 and r.dtype == jnp.float64
        # float64 end to end: float32 anywhere would leave errors of 1e-7 or more.
        assert relative_error(r, y) < 1e-10
        state = layer.init_state(2, dtype=jnp.float64)
        # Real or complex states (the layer's choice), of float64 precision.
        assert jax.tree.leaves(state)[0].dtype in (jnp.float64, jnp.complex128)


def test_step_by_step_equals_call(name):
    layer = make(name)
    u = inputs((2, 30, H))
    y = layer(u)
    system = layer.discrete_system(30)
    state = layer.init_state((2,))
    step = nnx.jit(lambda m, state, u_t, system: m.step(state, u_t, system))
    outputs = []
    for t in range(30):
        state, y_t = step(layer, state, u[:, t], system)
        outputs.append(y_t)
    assert relative_error(jnp.stack(outputs, axis=1), y) < 1e-5


def test_init_state_batch_shapes(name):
    layer = make(name)
    as_int = jax.tree.leaves(layer.init_state(5))[0]
    as_tuple = jax.tree.leaves(layer.init_state((5,)))[0]
    assert as_int.shape == as_tuple.shape and as_int.shape[0] == 5
    assert jax.tree.leaves(layer.init_state())[0].shape == as_tuple.shape[1:]
    for bad in ("a", (-1,), (2.5,), None):
        with pytest.raises(ValueError, match="batch_shape"):
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
    with pytest.raises(ValueError, match="discrete_system needs a causal layer.*bidirectional=True"):
        layer.discrete_system(L)
    with pytest.raises(ValueError, match="init_state needs a causal layer"):
        layer.init_state((2,))
    causal_state = make(name).init_state((2,))
    with pytest.raises(ValueError, match="step needs a causal layer"):
        layer.step(causal_state, u[:, 0])
    with pytest.raises(ValueError, match="recurrent needs a causal layer"):
        layer.recurrent(u)


# --- dtypes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int8, jnp.bool_])
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


def test_complex_input_is_rejected(name):
    layer = make(name)
    u = inputs().astype(jnp.complex64)
    with pytest.raises(ValueError, match=r"u must be real .*got dtype complex64"):
        layer(u)
    with pytest.raises(ValueError, match="u must be real"):
        layer.recurrent(u)


# --- non-finite input --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_rejected_with_its_position(name, bad):
    layer = make(name)
    u = inputs()
    u = u.at[1, 7, 2].set(bad).at[1, 9, 0].set(bad)
    with pytest.raises(ValueError, match=r"u must be finite; got .* at \(batch 1, time 7, channel 2\), the first of 2"):
        layer(u)
    with pytest.raises(ValueError, match=r"\(time 7, channel 2\)"):
        layer(u[1])
    with pytest.raises(ValueError, match=r"\(batch 1, time 7, channel 2\)"):
        layer.recurrent(u)
    with pytest.raises(ValueError, match=r"u_t must be finite; got .* at \(batch 1, channel 2\)"):
        layer.step(layer.init_state((2,)), u[:, 7], layer.discrete_system(L))


def test_non_finite_input_under_jit_is_not_checked(name):
    """Documented behaviour: under jit the values are tracers; no device-to-host check runs."""
    layer = make(name)
    u = inputs().at[0, 7, 2].set(np.nan)
    y = nnx.jit(lambda m, x: m(x))(layer, u)
    assert not np.all(np.isfinite(np.asarray(y[0])))
    assert np.all(np.isfinite(np.asarray(y[1])))  # the other sequence is untouched


# --- bad arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, -3, 2.5, True, "8"])
def test_bad_lengths(name, length):
    with pytest.raises(ValueError, match=r"length must be an integer >= 1"):
        make(name).discrete_system(length)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("bidirectional", "no"),
        ("bidirectional", 1),
        ("bidirectional", None),
        ("d_model", 0),
        ("d_model", 2.5),
        ("d_model", "3"),
        ("state_size", 0),
        ("state_size", -8),
        ("state_size", 8.0),
        ("step_min", 0.0),
        ("step_min", -1e-3),
        ("step_min", 0.5),  # > step_max
        ("step_max", np.inf),
        ("step_max", np.nan),
        ("step_max", "0.1"),
    ],
)
def test_bad_constructor_arguments(name, option, value):
    with pytest.raises(ValueError, match=option):
        make(name, **{option: value})


def test_bad_input_shapes(name):
    layer = make(name)
    with pytest.raises(ValueError, match=r"u must have 3 channels on its last axis"):
        layer(jnp.zeros((L, H + 1)))
    for shape in [(L,), (1, 2, L, H)]:
        with pytest.raises(ValueError, match=r"u must have 2 or 3 dimensions"):
            layer(jnp.zeros(shape))
    with pytest.raises(ValueError, match=r"u must have length L >= 1"):
        layer(jnp.zeros((2, 0, H)))
    with pytest.raises(ValueError, match=r"u_t must have shape \(\.\.\., 3\)"):
        layer.step(layer.init_state(), jnp.zeros(H + 1), layer.discrete_system(L))
