"""DSS: the exp and softmax kernels against the float64 naive kernel, and the DSS layer.

The reference for both kernels is the ZOH discretisation of the diagonal system
``x' = λx + u, y = w̃ x`` (B = 1, C = w̃): ``Ā = e^{λΔ}``, ``B̄ = (e^{λΔ} - 1)/λ``, whose naive
kernel is Proposition 1(a). Proposition 1(b) is the same kernel with ``w = w̃ (e^{λLΔ} - 1)``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import direct_causal_conv, message, relative_error

from annotated_ssm import hippo, kernels
from annotated_ssm.initialization import diagonal_init
from annotated_ssm.kernels import dss_coefficients, dss_kernel, naive_kernel
from annotated_ssm.layers.dss import DSSLayer

N, L, H = 64, 4096, 4
VARIANTS = ["exp", "softmax"]


def reference_kernel(Lambda, W, step, L, variant):
    """float64 naive kernel of the ZOH system that DSS's (Λ, W, Δ) stand for: (..., H, L)."""
    W = np.asarray(W, np.complex128)
    Lambda = np.broadcast_to(np.asarray(Lambda, np.complex128), W.shape)
    dt = np.asarray(step, np.float64)[:, None]
    A_bar = np.exp(Lambda * dt)
    B_bar = (A_bar - 1) / Lambda
    w_tilde = W if variant == "exp" else W / (np.exp(Lambda * L * dt) - 1)
    return 2 * naive_kernel(A_bar, B_bar, w_tilde, L).real



def per_channel_error(actual, expected):
    """The worst of the channels' relative errors (a bad channel can't hide behind a big one)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    return max(relative_error(a, e) for a, e in zip(actual.reshape(-1, actual.shape[-1]), expected.reshape(-1, expected.shape[-1])))


def random_weights(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def random_steps(rng, H, step_min=1e-3, step_max=1e-1):
    return np.exp(rng.uniform(np.log(step_min), np.log(step_max), H)).astype(np.float32)


@pytest.fixture
def skew_hippo_system():
    rng = np.random.default_rng(0)
    Lambda = diagonal_init("legs", N).astype(np.complex64)
    return Lambda, random_weights(rng, (H, N // 2)), random_steps(rng, H)


# --- kernels ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_matches_naive_kernel_skew_hippo(skew_hippo_system, variant):
    Lambda, W, step = skew_hippo_system
    K = dss_kernel(Lambda, W, step, L, variant)
    assert K.shape == (H, L) and K.dtype == jnp.float32
    assert per_channel_error(K, reference_kernel(Lambda, W, step, L, variant)) < 1e-5


@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_matches_naive_kernel_per_channel_eigenvalues(variant):
    # Λ of shape (H, N/2), random spectrum with decay rates over two decades.
    rng = np.random.default_rng(1)
    Lambda = (-np.exp(rng.uniform(np.log(0.05), np.log(5), (H, N // 2))) + 1j * rng.uniform(0, 100, (H, N // 2)))
    Lambda = Lambda.astype(np.complex64)
    W, step = random_weights(rng, (H, N // 2)), random_steps(rng, H)
    K = dss_kernel(Lambda, W, step, L, variant)
    assert per_channel_error(K, reference_kernel(Lambda, W, step, L, variant)) < 1e-5


def test_softmax_with_positive_real_part_matches_float64_naive_kernel():
    # Re(λ) = +5: e^{λLΔ} reaches e^{600} (float32 overflows at e^{88}); Δ <= 0.03 keeps the
    # float64 naive reference itself finite.
    rng = np.random.default_rng(2)
    Lambda = (5.0 + 1j * diagonal_init("legs", N).imag).astype(np.complex64)
    W, step = random_weights(rng, (H, N // 2)), random_steps(rng, H, 1e-3, 3e-2)
    K = dss_kernel(Lambda, W, step, L, "softmax")
    assert np.all(np.isfinite(K))
    assert per_channel_error(K, reference_kernel(Lambda, W, step, L, "softmax")) < 1e-5


def test_softmax_with_positive_real_part_beyond_float64_range():
    # Δ = 0.1: e^{λLΔ} = e^{2048} overflows even float64, so the reference is the softmax
    # summed directly in float64 after subtracting the row's largest exponent.
    rng = np.random.default_rng(3)
    Lambda = np.concatenate([np.full(8, 5.0), np.full(8, -0.5)]) + 1j * rng.uniform(0, 50, 16)
    Lambda = Lambda.astype(np.complex64)
    W, step = random_weights(rng, (H, 16)), np.full(H, 0.1, np.float32)
    K = dss_kernel(Lambda, W, step, L, "softmax")
    assert np.all(np.isfinite(K))
    z = np.asarray(Lambda, np.complex128)[:, None] * 0.1 * np.arange(L)  # (N/2, L)
    z = z - z[np.arange(16), np.argmax(z.real, axis=-1)][:, None]
    softmax = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    expected = 2 * np.einsum("hn,nl->hl", W.astype(np.complex128) / Lambda.astype(np.complex128), softmax).real
    assert per_channel_error(K, expected) < 1e-5


def test_softmax_is_exact_for_small_eigenvalues():
    # |λ|LΔ from 0.01 to 1: the softmax is nearly uniform and W/λ is large, but nothing is
    # singular. The guard must not distort it (regularising λ·(e^{λLΔ} - 1) would: by ~1000x).
    Lambda = np.array([-1e-3 + 2e-3j, 2e-3 + 1e-3j, -0.05 + 0.01j, -0.5 + 3j], np.complex64)
    W, step = np.ones((2, 4), np.complex64), np.array([0.01, 0.05], np.float32)
    K = dss_kernel(Lambda, W, step, 1000, "softmax")
    assert per_channel_error(K, reference_kernel(Lambda, W, step, 1000, "softmax")) < 1e-5


def test_softmax_singular_set_is_guarded():
    # e^{λLΔ} = 1 (λ = 2πik/(LΔ) and λ = 0): Proposition 1(b) divides by zero there; the
    # kernel stays finite and so do its gradients.
    Lq, dt = 64, 0.1
    Lambda = jnp.array([0.0, 2j * np.pi / (Lq * dt), 4j * np.pi / (Lq * dt), -0.5 + 1j], jnp.complex64)
    W = jnp.ones((1, 4), jnp.complex64)
    step = jnp.array([dt], jnp.float32)
    K = dss_kernel(Lambda, W, step, Lq, "softmax")
    assert np.all(np.isfinite(K))
    grads = jax.grad(lambda lam, s: jnp.sum(dss_kernel(lam, W, s, Lq, "softmax") ** 2), argnums=(0, 1))(Lambda, step)
    assert all(np.all(np.isfinite(g)) for g in grads)


@pytest.mark.parametrize("variant", VARIANTS)
def test_chunked_kernel_equals_full_kernel_and_gradient(variant):
    rng = np.random.default_rng(4)
    Lambda = diagonal_init("legs", 16).astype(np.complex64)
    if variant == "softmax":
        Lambda[::3] += 4.0  # some positive real parts
    W, step = random_weights(rng, (3, 8)), random_steps(rng, 3)
    full = dss_kernel(Lambda, W, step, 500, variant)
    chunked = dss_kernel(Lambda, W, step, 500, variant, chunk=96)  # 500 is not a multiple of 96
    assert relative_error(chunked, full) < 1e-6

    def loss(lam, chunk):
        return jnp.sum(jnp.sin(jnp.arange(500) / 50) * dss_kernel(lam, W, step, 500, variant, chunk=chunk))

    g_full, g_chunked = jax.grad(loss)(Lambda, None), jax.grad(loss)(Lambda, 96)
    assert np.all(np.isfinite(g_chunked))
    assert relative_error(g_chunked, g_full) < 1e-5


def test_large_problem_is_chunked_automatically(monkeypatch):
    # With the threshold lowered to 2^12 entries, H·N/2·L = 3·8·500 is "large": the chunked
    # path runs (chunks of 2^12 // 24 = 170) and gives the same numbers as one block.
    monkeypatch.setattr(kernels, "_DSS_MAX_ENTRIES", 1 << 12)
    rng = np.random.default_rng(5)
    Lambda = diagonal_init("legs", 16).astype(np.complex64)
    W, step = random_weights(rng, (3, 8)), random_steps(rng, 3)
    calls = []
    real_map = jax.lax.map
    monkeypatch.setattr(jax.lax, "map", lambda f, xs: calls.append(xs.shape) or real_map(f, xs))
    auto = dss_kernel(Lambda, W, step, 500, "exp")
    assert calls == [(3, 170)]
    one_block = dss_kernel(Lambda, W, step, 500, "exp", chunk=500)
    assert relative_error(auto, one_block) < 1e-6


@pytest.mark.parametrize("variant", VARIANTS)
def test_batched_weights(skew_hippo_system, variant):
    """W with a leading axis (as a bidirectional layer uses) = one call per slice."""
    Lambda, W, step = skew_hippo_system
    W2 = np.stack([W, 2 * W[::-1]])
    K2 = dss_kernel(Lambda, W2, step, 256, variant)
    assert K2.shape == (2, H, 256)
    assert relative_error(K2[0], dss_kernel(Lambda, W, step, 256, variant)) < 1e-6
    assert relative_error(K2[1], dss_kernel(Lambda, 2 * W[::-1], step, 256, variant)) < 1e-6


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradient_matches_finite_differences_in_float64(variant):
    rng = np.random.default_rng(6)
    with jax.enable_x64(True):
        Lambda = jnp.asarray(diagonal_init("legs", 8) + (0.3 if variant == "softmax" else 0))
        W = jnp.asarray(random_weights(rng, (2, 4)), jnp.complex128)
        step = jnp.asarray(random_steps(rng, 2), jnp.float64)
        probe = jnp.asarray(rng.standard_normal((2, 200)))

        @jax.jit
        def loss(lam_re, lam_im, s):
            return jnp.sum(probe * dss_kernel(jax.lax.complex(lam_re, lam_im), W, s, 200, variant))

        args = (jnp.real(Lambda), jnp.imag(Lambda), step)
        grads = jax.grad(loss, argnums=(0, 1, 2))(*args)
        h = 1e-6
        for i, g in enumerate(grads):
            direction = jnp.asarray(rng.standard_normal(args[i].shape))
            plus = list(args)
            minus = list(args)
            plus[i] = args[i] + h * direction
            minus[i] = args[i] - h * direction
            numeric = (loss(*plus) - loss(*minus)) / (2 * h)
            assert abs(float(jnp.sum(g * direction)) - float(numeric)) <= 1e-6 * max(1.0, abs(float(numeric)))


def test_coefficients_of_exp_variant_are_zoh_weights(skew_hippo_system):
    Lambda, W, step = skew_hippo_system
    coef, shift, dtLambda = dss_coefficients(Lambda, W, step, 100, "exp")
    lam = np.asarray(Lambda, np.complex128)
    expected = W * (np.exp(lam * step[:, None].astype(np.float64)) - 1) / lam
    assert relative_error(coef, expected) < 1e-6
    assert np.all(np.asarray(shift) == 0)


# --- the layer's own checks -------------------------------------------------------------


def test_layer_bad_inputs_raise_value_error():
    """DSS's own checks (the shared ones are in test_layer_contract.py): the message names the
    argument and the value."""
    with pytest.raises(ValueError, match=message("state_size", "even", 15)):
        DSSLayer(4, 15, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message("variant", "relu")):
        DSSLayer(4, 16, rngs=nnx.Rngs(0), variant="relu")
    for eps in (-1, 0.0, np.nan, "1e-10"):
        with pytest.raises(ValueError, match=message("eps", eps)):
            DSSLayer(4, 16, rngs=nnx.Rngs(0), eps=eps)
    layer = DSSLayer(4, 16, rngs=nnx.Rngs(0))  # softmax: the kernel is normalised over L
    with pytest.raises(ValueError, match=message("length", "None")):
        layer.discrete_system(None)


# --- layer ----------------------------------------------------------------------------------


def test_skew_hippo_initialisation():
    layer = DSSLayer(3, 64, rngs=nnx.Rngs(0))
    lam = np.asarray(layer.eigenvalues())
    expected = hippo.dplr_legs(64)[0][:32]
    assert np.max(np.abs(lam - expected)) < 1e-4 * np.max(np.abs(expected))
    assert np.all(lam.imag > 0) and np.allclose(lam.real, -0.5)
    # exp variant: same spectrum, through λ = -exp(log_Lambda_real) + i Lambda_imag.
    lam_exp = np.asarray(DSSLayer(3, 64, rngs=nnx.Rngs(0), variant="exp").eigenvalues())
    assert np.max(np.abs(lam_exp - expected)) < 1e-4 * np.max(np.abs(expected))
    np.testing.assert_array_equal(lam, diagonal_init("legs", 64).astype(np.complex64))
    assert layer.step_sizes().shape == (3,)
    assert layer.W[...].shape == (3, 32, 2)


def test_exp_variant_keeps_real_part_negative():
    layer = DSSLayer(2, 8, rngs=nnx.Rngs(0), variant="exp")
    layer.log_Lambda_real[...] = jnp.full(4, 30.0)  # any value of the parameter
    assert np.all(np.real(layer.eigenvalues()) < 0)
    assert np.all(np.isfinite(layer.kernel(512)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_layer_output_matches_float64_reference(variant):
    layer = DSSLayer(3, 16, rngs=nnx.Rngs(1), variant=variant)
    u = jax.random.normal(jax.random.key(0), (2, 200, 3))
    y = layer(u)
    K = reference_kernel(layer.eigenvalues(), layer.weights(), layer.step_sizes(), 200, variant)  # (H, L)
    u64 = np.asarray(u, np.float64)
    expected = direct_causal_conv(np.swapaxes(u64, -1, -2), K)
    expected = np.swapaxes(expected, -1, -2) + np.asarray(layer.D[...], np.float64) * u64
    assert relative_error(y, expected) < 1e-5


@pytest.mark.parametrize("variant", VARIANTS)
def test_recurrent_view_reproduces_convolution(variant):
    """The default (softmax) is in test_layer_contract.py; here the exp variant, whose
    recurrence needs no length (steps without a system run unbounded), and softmax with
    growing states."""
    layer = DSSLayer(4, 16, rngs=nnx.Rngs(2), variant=variant)
    if variant == "softmax":
        # half the states with Re(λ) = +5: the plain recurrence x ← e^{λΔ}x + u would
        # reach e^{5·0.1·200} = e^{100} and overflow float32 (e^{88}); the rescaled one must not.
        layer.Lambda_real[...] = layer.Lambda_real[...].at[::2].set(5.0)
        layer.log_step_size[...] = layer.log_step_size[...].at[0].set(jnp.log(0.1))
    u = jax.random.normal(jax.random.key(1), (2, 200, 4))
    y = layer(u)
    y_rec = layer.recurrent(u)
    assert np.all(np.isfinite(y_rec))
    assert relative_error(y_rec, y) < 1e-5
    if variant == "exp":
        step = nnx.jit(lambda m, state, u_t: m.step(state, u_t))  # no system: unbounded
        state, outputs = layer.init_state(2), []
        for t in range(50):
            state, y_t = step(layer, state, u[:, t])
            outputs.append(y_t)
        assert relative_error(jnp.stack(outputs, axis=1), y[:, :50]) < 1e-5


def test_bidirectional_layer():
    layer = DSSLayer(3, 8, bidirectional=True, rngs=nnx.Rngs(4))
    assert layer.W[...].shape == (2, 3, 4, 2)
    u = jax.random.normal(jax.random.key(3), (40, 3))
    K = np.asarray(layer.kernel(40), np.float64)
    assert K.shape == (2, 3, 40)
    ut = np.asarray(u, np.float64).T
    expected = direct_causal_conv(ut, K[0]) + direct_causal_conv(ut[:, ::-1], K[1])[:, ::-1]
    expected = expected.T + np.asarray(layer.D[...], np.float64) * np.asarray(u, np.float64)
    assert relative_error(layer(u), expected) < 1e-5


def test_layer_gradients_with_growing_states_are_finite_under_jit():
    """Softmax with Re(λ) = +5 everywhere (the default spectrum's gradients are checked against
    finite differences in test_layer_contract.py)."""
    layer = DSSLayer(2, 8, rngs=nnx.Rngs(5), variant="softmax")
    layer.Lambda_real[...] = jnp.full(4, 5.0)
    u = jax.random.normal(jax.random.key(4), (300, 2))

    @nnx.jit
    def loss_and_grad(model):
        return nnx.value_and_grad(lambda m: jnp.mean(m(u) ** 2))(model)

    loss, grads = loss_and_grad(layer)
    assert np.isfinite(loss)
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
