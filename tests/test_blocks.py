"""The Mamba and Mamba-2 blocks (annotated_ssm/blocks.py): each block's call against its own
recurrent step, and both against a plain float64 NumPy statement of the block written here
from the block's parameters (projections, causal convolution, SSM loop, gate, RMSNorm), so
that a wrong padding, gate, norm or split fails; shapes, causality, jit and grad.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import message, relative_error

from annotated_ssm.blocks import Mamba2Block, MambaBlock
from annotated_ssm.layers import SSMParam

H, L, N, BATCH = 8, 13, 4, 2
# Δ large enough that the SSM, not the skip D x, carries the output (at Mamba's default
# Δ ∈ [1e-3, 1e-1] a wrong state would hide below a float32 tolerance).
STEPS = dict(step_min=0.05, step_max=0.5)


def make(kind, seed=0, **options):
    """A block of H = 8 channels, N = 4, with every parameter moved off its initial value by
    0.2 N(0, 1), so that D = 1 and a norm weight of 1 do not hide a missing factor."""
    if kind == "mamba":
        block = MambaBlock(H, state_size=N, rngs=nnx.Rngs(seed), **STEPS, **options)
    else:  # 4 heads of 4 channels in 2 groups; chunks of 5 do not divide L = 13
        options = dict(dict(head_dim=4, n_groups=2, chunk_size=5), **options)
        block = Mamba2Block(H, state_size=N, rngs=nnx.Rngs(seed), **STEPS, **options)
    params = nnx.state(block, nnx.Param)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed + 100), len(leaves))
    moved = [p + 0.2 * jax.random.normal(k, p.shape, p.dtype) for p, k in zip(leaves, keys)]
    nnx.update(block, jax.tree.unflatten(tree, moved))
    return block


def as_float64(block):
    """The same block with float64 parameters (use inside jax.enable_x64)."""
    nnx.update(block, jax.tree.map(lambda p: jnp.asarray(p, jnp.float64), nnx.state(block)))
    return block


def inputs(shape=(BATCH, L, H), seed=1):
    return jax.random.normal(jax.random.key(seed), shape)


# --- the float64 NumPy statements of the blocks -------------------------------------------


def _np(x):
    return np.asarray(x, np.float64)


def silu(x):
    return x / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def causal_conv(x, weight, bias):
    """x (B, L, C); weight (W, C), the last tap on the current input; zeros before t = 0."""
    W = weight.shape[0]
    y = np.zeros_like(x) + bias
    for t in range(x.shape[1]):
        for lag in range(W):  # input t - lag meets tap W - 1 - lag
            if t - lag >= 0:
                y[:, t] += weight[W - 1 - lag] * x[:, t - lag]
    return y


def mamba_reference(block, u):
    """mamba_simple.py's forward, written out: u (B, L, H) -> (B, L, H)."""
    u = _np(u)
    E, R, Ns = block.d_inner, block.dt_rank, block.state_size
    s6 = block.ssm
    A = -np.exp(_np(s6.log_A_real[...]))  # (E, N)
    dt0 = np.exp(_np(s6.log_step_size[...]))
    dt_bias = dt0 + np.log(-np.expm1(-dt0))  # softplus⁻¹
    xz = u @ _np(block.in_proj.kernel[...])
    x, z = xz[..., :E], xz[..., E:]
    x = silu(causal_conv(x, _np(block.conv_weight[...]), _np(block.conv_bias[...])))
    h = np.zeros((u.shape[0], E, Ns))
    y = np.zeros_like(x)
    for t in range(u.shape[1]):
        proj = x[:, t] @ _np(s6.x_proj.kernel[...])
        dt = softplus(proj[:, :R] @ _np(s6.dt_proj.kernel[...]) + dt_bias)  # (B, E)
        B_t, C_t = proj[:, R:R + Ns], proj[:, R + Ns:]
        h = np.exp(dt[:, :, None] * A) * h + (dt * x[:, t])[:, :, None] * B_t[:, None, :]
        y[:, t] = np.einsum("ben,bn->be", h, C_t) + _np(s6.D[...]) * x[:, t]
    return (y * silu(z)) @ _np(block.out_proj.kernel[...])


def mamba2_reference(block, u):
    """mamba2_simple.py's forward (with Mamba2.step's recurrence), written out per head."""
    u = _np(u)
    E, G, Ns, heads, P = block.d_inner, block.n_groups, block.state_size, block.n_heads, block.head_dim
    proj = u @ _np(block.in_proj.kernel[...])
    z, xBC, dt = proj[..., :E], proj[..., E:2 * E + 2 * G * Ns], proj[..., 2 * E + 2 * G * Ns:]
    dt = softplus(dt + _np(block.dt_bias[...]))  # (B, L, heads)
    xBC = silu(causal_conv(xBC, _np(block.conv_weight[...]), _np(block.conv_bias[...])))
    x = xBC[..., :E].reshape(u.shape[:2] + (heads, P))
    B = xBC[..., E:E + G * Ns].reshape(u.shape[:2] + (G, Ns))
    C = xBC[..., E + G * Ns:].reshape(u.shape[:2] + (G, Ns))
    A = -np.exp(_np(block.log_A_real[...]))
    D = _np(block.D[...])
    h = np.zeros((u.shape[0], heads, P, Ns))
    y = np.zeros(x.shape)
    for i in range(u.shape[0]):
        for k in range(heads):
            g = k // (heads // G)
            for t in range(u.shape[1]):
                h[i, k] = np.exp(dt[i, t, k] * A[k]) * h[i, k] + dt[i, t, k] * np.outer(x[i, t, k], B[i, t, g])
                y[i, t, k] = h[i, k] @ C[i, t, g] + D[k] * x[i, t, k]
    gated = y.reshape(u.shape[:2] + (E,)) * silu(z)
    normed = gated / np.sqrt(np.mean(gated ** 2, axis=-1, keepdims=True) + 1e-5) * _np(block.norm_weight[...])
    return normed @ _np(block.out_proj.kernel[...])


REFERENCE = {"mamba": mamba_reference, "mamba2": mamba2_reference}
KINDS = ["mamba", "mamba2"]


def stepped(block, u):
    """Run the public step over u (B, L, H) from init_state: (B, L, H), and the last state."""
    state = block.init_state(u.shape[:-2], dtype=u.dtype)
    ys = []
    for t in range(u.shape[-2]):
        state, y_t = block.step(state, u[..., t, :])
        ys.append(y_t)
    return jnp.stack(ys, axis=-2), state


# --- initialisation -----------------------------------------------------------------------


def test_mamba_block_initialised_as_mamba_simple():
    block = MambaBlock(40, rngs=nnx.Rngs(0))
    E = 80
    assert (block.d_inner, block.dt_rank, block.state_size, block.d_conv) == (E, 3, 16, 4)  # R = ⌈40/16⌉
    assert block.in_proj.kernel.shape == (40, 2 * E) and block.in_proj.bias is None
    assert block.out_proj.kernel.shape == (E, 40) and block.out_proj.bias is None
    assert block.conv_weight.shape == (4, E) and block.conv_bias.shape == (E,)
    assert np.max(np.abs(block.conv_weight[...])) <= 0.5 and np.max(np.abs(block.in_proj.kernel[...])) <= 40 ** -0.5
    assert np.max(np.abs(block.ssm.x_proj.kernel[...])) <= E ** -0.5  # PyTorch's Linear bound
    assert block.ssm.x_proj.kernel.shape == (E, 3 + 2 * 16) and block.ssm.dt_proj.kernel.shape == (3, E)
    np.testing.assert_array_equal(block.ssm.D[...], np.ones(E))
    np.testing.assert_allclose(block.ssm.eigenvalues(), -np.broadcast_to(np.arange(1, 17), (E, 16)), rtol=1e-6)
    steps = block.ssm.step_sizes()
    assert steps.shape == (E,) and 1e-3 * (1 - 1e-6) <= steps.min() and steps.max() <= 1e-1 * (1 + 1e-6)
    assert MambaBlock(8, dt_rank=5, rngs=nnx.Rngs(0)).ssm.dt_proj.kernel.shape == (5, 16)


def test_mamba2_block_initialised_as_mamba2_simple():
    block = Mamba2Block(64, rngs=nnx.Rngs(0))  # E = 128: two heads of 64, N = 64, one group
    assert (block.d_inner, block.n_heads, block.head_dim, block.state_size, block.n_groups) == (128, 2, 64, 64, 1)
    assert block.in_proj.kernel.shape == (64, 2 * 128 + 2 * 64 + 2) and block.in_proj.bias is None
    assert block.conv_weight.shape == (4, 128 + 2 * 64)
    big = Mamba2Block(8, head_dim=1, state_size=2, rngs=nnx.Rngs(1))  # 16 heads: the ranges
    minus_A = -big.eigenvalues()
    assert 1.0 <= minus_A.min() and minus_A.max() <= 16.0 and minus_A.std() > 1.0
    dt = jax.nn.softplus(big.dt_bias[...])
    assert 1e-3 * (1 - 1e-5) <= dt.min() and dt.max() <= 1e-1 * (1 + 1e-5)
    assert isinstance(big.dt_bias, SSMParam) and isinstance(big.log_A_real, SSMParam)
    np.testing.assert_array_equal(big.D[...], np.ones(16))
    np.testing.assert_array_equal(big.norm_weight[...], np.ones(16))


# --- call = step, and both = the NumPy statement --------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_float32_call_equals_step_and_numpy_reference(kind):
    block, u = make(kind), inputs()
    y = block(u)
    assert y.shape == u.shape and y.dtype == jnp.float32
    y_step, _ = stepped(block, u)
    reference = REFERENCE[kind](block, u)
    errors = relative_error(y_step, y), relative_error(block.recurrent(u), y), relative_error(y, reference)
    print(f"{kind} float32: step {errors[0]:.1e}, recurrent {errors[1]:.1e}, NumPy {errors[2]:.1e}")
    assert max(errors) < 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_float64_call_equals_step_and_numpy_reference(kind):
    block, u = make(kind), inputs()
    with jax.enable_x64(True):
        block = as_float64(block)
        u64 = jnp.asarray(u, jnp.float64)
        y = block(u64)
        assert y.dtype == jnp.float64
        y_step = block.recurrent(u64)
        errors = relative_error(y_step, y), relative_error(y, REFERENCE[kind](block, u64))
    print(f"{kind} float64: step {errors[0]:.1e}, NumPy {errors[1]:.1e}")
    assert max(errors) < 1e-10


@pytest.mark.parametrize("chunk_size", [1, 64])
def test_mamba2_chunk_sizes_agree_with_reference(chunk_size):
    """One step per chunk, and one chunk longer than the sequence."""
    block, u = make("mamba2", chunk_size=chunk_size), inputs()
    assert relative_error(block(u), mamba2_reference(block, u)) < 1e-5


def test_numpy_reference_sees_a_shifted_convolution():
    """The reference is sharp: the Mamba-2 block with its taps reversed (an anti-causal
    alignment of the same filter) is far from it."""
    block, u = make("mamba2"), inputs()
    reference = mamba2_reference(block, u)
    block.conv_weight[...] = block.conv_weight[...][::-1]
    assert relative_error(block(u), reference) > 1e-2


# --- shapes, causality, transformations ----------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_and_batch_axes(kind):
    block, u = make(kind), inputs()
    y = block(u)
    np.testing.assert_allclose(block(u[1]), y[1], rtol=0, atol=1e-6)  # one unbatched sequence
    u4 = jnp.stack([u, u[::-1]])  # (2, B, L, H): any batch axes
    np.testing.assert_allclose(block(u4)[1, 0], y[1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(block(u[:, :2]), y[:, :2], rtol=0, atol=1e-6)  # L < d_conv - 1
    conv_state, ssm_state = block.init_state((2, BATCH))
    conv_channels = block.d_inner if kind == "mamba" else block.d_inner + 2 * block.n_groups * N
    assert conv_state.shape == (2, BATCH, block.d_conv - 1, conv_channels)
    if kind == "mamba":
        assert ssm_state.shape == (2, BATCH, block.d_inner, N)
    else:
        assert ssm_state.shape == (2, BATCH, block.n_heads, block.head_dim, N)
    state, y_t = block.step(block.init_state(BATCH), u[:, 0])
    assert y_t.shape == (BATCH, H) and jax.tree.map(jnp.shape, state) == jax.tree.map(
        jnp.shape, block.init_state(BATCH))
    assert block(u.astype(jnp.bfloat16)).dtype == jnp.bfloat16  # computed in float32


@pytest.mark.parametrize("kind", KINDS)
def test_causal(kind):
    """Changing u at step t leaves every output before t as it was, and changes step t."""
    block, u = make(kind), inputs()
    t = 6
    y = block(u)
    y_changed = block(u.at[:, t].add(3.0))
    # Exactly equal on a CPU (the later steps enter only through exact zeros of the mask);
    # a tolerance far below any leak, for other backends' reductions.
    np.testing.assert_allclose(y_changed[:, :t], y[:, :t], rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(y))))
    assert np.min(np.max(np.abs(y_changed[:, t] - y[:, t]), axis=-1)) > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_jit_and_grad(kind):
    block, u = make(kind), inputs()
    graphdef, state = nnx.split(block)

    @jax.jit
    def loss(state, u):
        return jnp.mean(nnx.merge(graphdef, state)(u) ** 2)

    value, grads = jax.value_and_grad(loss)(state, u)
    np.testing.assert_allclose(value, jnp.mean(block(u) ** 2), rtol=1e-5)
    for path, g in nnx.to_flat_state(grads):
        g = np.asarray(g[...])
        assert np.all(np.isfinite(g)) and np.any(g != 0), path
    # The step under jit and grad too (through the state).
    step_loss = jax.jit(jax.grad(lambda u_t: jnp.sum(block.step(block.init_state(BATCH), u_t)[1])))
    assert np.all(np.isfinite(step_loss(u[:, 0])))


# --- errors ----------------------------------------------------------------------------------


def test_bad_arguments():
    with pytest.raises(ValueError, match=message("head_dim", "5")):
        Mamba2Block(8, head_dim=5, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message("n_groups", "3")):
        Mamba2Block(8, head_dim=4, n_groups=3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message("dt_rank", 0)):
        MambaBlock(8, dt_rank=0, rngs=nnx.Rngs(0))
    with pytest.raises(TypeError, match=message("rngs", "int")):
        MambaBlock(8, rngs=0)
    block = make("mamba")
    with pytest.raises(ValueError, match=message("u", "8 channels", (3, 7))):
        block(jnp.zeros((3, 7)))
    with pytest.raises(ValueError, match=message("u", "nan", "time 2, channel 1")):
        block(jnp.zeros((4, 8)).at[2, 1].set(jnp.nan))
    with pytest.raises(ValueError, match=message("state", "(2,)", "(3,)")):
        block.step(block.init_state(3), jnp.zeros((2, 8)))
    with pytest.raises(ValueError, match=message("state", "pair", "another structure")):
        block.step(jnp.zeros(3), jnp.zeros(8))
