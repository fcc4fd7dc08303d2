"""S4: the Cauchy kernel, the DPLR kernel (Algorithm 1), and the S4 layer.

Every fast result is compared with a float64 reference: the naive kernel C Ā^ℓ B̄ of the
dense bilinear discretisation, direct convolution, or central finite differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import direct_causal_conv, discretize_dense, message, relative_error

from annotated_ssm.hippo import dplr_legs, legs
from annotated_ssm.kernels import cauchy, naive_kernel, s4_kernel
from annotated_ssm.discretize import dplr_bilinear
from annotated_ssm.layers import SSMParam
from annotated_ssm.layers.s4 import S4Layer

STEPS = np.array([1e-3, 1e-2, 1e-1])


def pairs(x):
    x = np.asarray(x)
    return np.concatenate([x, x.conj()], axis=-1)


def dense_reference_kernel(Lambda, P, B, C_tilde, step, L, reference_length=None):
    """float64 naive kernel (length L) of A = diag(Λ) - P P* (all N states), C = C̃ (I - Ā^L₀)⁻¹
    for C̃ given at the reference length L₀ (default L₀ = L)."""
    Lambda, P, B, C_tilde = (pairs(np.asarray(a, np.complex128)) for a in (Lambda, P, B, C_tilde))
    A = np.diag(Lambda) - np.outer(P, P.conj())
    A_bar, B_bar = discretize_dense(A, B, float(step), "bilinear")
    eye = np.eye(len(Lambda))
    L0 = L if reference_length is None else reference_length
    C = np.linalg.solve((eye - np.linalg.matrix_power(A_bar, L0)).T, C_tilde)
    K = naive_kernel(A_bar, B_bar, C, L)
    assert np.max(np.abs(K.imag)) < 1e-8 * np.max(np.abs(K.real))  # a real system
    return K.real


def random_dplr(rng, M, batch=()):
    shape = batch + (M,)

    def cn(scale=1.0):
        return scale * (rng.normal(size=shape) + 1j * rng.normal(size=shape))

    Lambda = -np.exp(rng.normal(size=shape)) + 1j * 10 * rng.normal(size=shape)
    return Lambda, cn(), cn(), cn()



def as32(*arrays):
    return [jnp.asarray(a, jnp.complex64) for a in arrays]


# --- Cauchy ------------------------------------------------------------------------------


def test_cauchy_matches_direct_sum_and_conjugate_terms():
    rng = np.random.default_rng(0)
    M, F = 6, 9
    v = rng.normal(size=(4, M)) + 1j * rng.normal(size=(4, M))
    lambd = rng.normal(size=M) + 1j * rng.normal(size=M)
    z = rng.normal(size=F) + 1j * rng.normal(size=F)
    with jax.enable_x64(True):
        got = np.asarray(cauchy(v, z[None], lambd[None]))  # four rows, one shared reciprocal
        got_conj = np.asarray(cauchy(v, z[None], lambd[None], conjugate=True))
    direct = np.einsum("kn,nf->kf", v, 1 / (z[None, :] - lambd[:, None]))
    full = np.einsum("kn,nf->kf", pairs(v), 1 / (z[None, :] - pairs(lambd)[:, None]))
    assert got.shape == got_conj.shape == (4, F)
    assert relative_error(got, direct) < 1e-13
    assert relative_error(got_conj, full) < 1e-13


# --- the kernel --------------------------------------------------------------------------


@pytest.mark.parametrize("L", [4096, 4095])
def test_kernel_random_dplr_matches_naive_float64(L):
    rng = np.random.default_rng(1)
    Lambda, P, B, C_tilde = as32(*random_dplr(rng, 32, (3,)))  # N = 64, three channels
    step = jnp.asarray(STEPS, jnp.float32)
    K = s4_kernel(Lambda, P, B, C_tilde, step, L)
    assert K.shape == (3, L) and K.dtype == jnp.float32
    for h in range(3):
        ref = dense_reference_kernel(Lambda[h], P[h], B[h], C_tilde[h], np.float32(STEPS[h]), L)
        assert relative_error(K[h], ref) < 1e-5, h


def test_kernel_hippo_matches_naive_kernel_of_legs():
    """The LegS matrix itself (real, original basis) against S4's DPLR kernel, N = 64."""
    N, M, L = 64, 32, 4096
    rng = np.random.default_rng(2)
    A, B_legs = legs(N)
    Lambda, P, B, V = dplr_legs(N)
    C = rng.normal(size=N)  # a real output row in the original basis
    for step in STEPS:
        A_bar, B_bar = discretize_dense(A, B_legs, step, "bilinear")
        ref = naive_kernel(A_bar, B_bar, C, L)
        C_tilde = (C @ (np.eye(N) - np.linalg.matrix_power(A_bar, L))) @ V  # to the diagonal basis
        K = s4_kernel(*as32(Lambda[:M], P[:M], B[:M], C_tilde[:M]), jnp.float32(step), L)
        assert relative_error(K, ref) < 1e-5, step


@pytest.mark.parametrize("L", [1, 2, 65])
def test_kernel_conjugate_false_and_short_lengths(L):
    """All N states with conjugate=False (full FFT) equals the conjugate-symmetric kernel."""
    rng = np.random.default_rng(3)
    Lambda, P, B, C_tilde = random_dplr(rng, 4)
    with jax.enable_x64(True):
        half = np.asarray(s4_kernel(Lambda, P, B, C_tilde, 0.05, L))
        full = np.asarray(s4_kernel(pairs(Lambda), pairs(P), pairs(B), pairs(C_tilde), 0.05, L, conjugate=False))
    ref = dense_reference_kernel(Lambda, P, B, C_tilde, 0.05, L)
    assert half.shape == (L,) and np.isrealobj(half)
    assert relative_error(half, ref) < 1e-11
    assert relative_error(full.real, ref) < 1e-11
    assert np.max(np.abs(full.imag)) < 1e-11 * np.max(np.abs(ref))


def test_kernel_separate_Q():
    rng = np.random.default_rng(4)
    Lambda, P, B, C_tilde = random_dplr(rng, 3)
    Q = rng.normal(size=3) + 1j * rng.normal(size=3)
    L, step = 33, 0.1
    A = np.diag(pairs(Lambda)) - np.outer(pairs(P), pairs(Q).conj())
    A_bar, B_bar = discretize_dense(A, pairs(B), step, "bilinear")
    C = np.linalg.solve((np.eye(6) - np.linalg.matrix_power(A_bar, L)).T, pairs(C_tilde))
    ref = naive_kernel(A_bar, B_bar, C, L).real
    with jax.enable_x64(True):
        K = np.asarray(s4_kernel(Lambda, P, B, C_tilde, step, L, Q=Q))
    assert relative_error(K, ref) < 1e-11


def test_chunked_kernel_and_its_gradient_match_unchunked():
    rng = np.random.default_rng(5)
    Lambda, P, B, C_tilde = as32(*random_dplr(rng, 8, (2,)))
    step = jnp.asarray([0.01, 0.1], jnp.float32)

    def loss(C_tilde, chunk):
        return jnp.sum(jnp.sin(s4_kernel(Lambda, P, B, C_tilde, step, 1000, chunk_size=chunk)))

    full = s4_kernel(Lambda, P, B, C_tilde, step, 1000)
    chunked = s4_kernel(Lambda, P, B, C_tilde, step, 1000, chunk_size=64)
    assert relative_error(chunked, full) < 1e-6
    grad = jax.jit(jax.grad(loss), static_argnums=1)
    g_full = grad(C_tilde, None)
    g_chunked = grad(C_tilde, 64)
    assert relative_error(g_chunked, g_full) < 1e-5


def test_kernel_gradients_match_finite_differences_float64():
    """d K / d(every input) against central differences, float64, on a small case."""
    rng = np.random.default_rng(6)
    Lambda, P, B, C_tilde = random_dplr(rng, 3)
    weights = rng.normal(size=20)
    with jax.enable_x64(True):
        params = {
            "Lambda": jnp.asarray(Lambda), "P": jnp.asarray(P), "B": jnp.asarray(B),
            "C_tilde": jnp.asarray(C_tilde), "step": jnp.asarray(0.07),
        }

        @jax.jit
        def loss(p):
            K = s4_kernel(p["Lambda"], p["P"], p["B"], p["C_tilde"], p["step"], 20)
            return jnp.sum(weights * K)

        grads = jax.grad(loss)(params)
        for name, value in params.items():
            direction = rng.normal(size=np.shape(value))
            if np.iscomplexobj(value):
                direction = direction + 1j * rng.normal(size=np.shape(value))
            eps = 1e-6
            fd = (loss({**params, name: value + eps * direction}) - loss({**params, name: value - eps * direction})) / (2 * eps)
            # JAX's gradient of a real loss w.r.t. z = x + iy is ∂L/∂x - i ∂L/∂y, so the
            # directional derivative along d is Re(Σ grad · d).
            analytic = np.real(np.sum(np.asarray(grads[name]) * direction))
            assert np.isfinite(analytic), name
            assert abs(analytic - fd) < 1e-6 * max(1.0, abs(fd)), (name, analytic, fd)


# --- the recurrence (S4 Theorem 2) ------------------------------------------------------


def test_dplr_bilinear_matches_dense_bilinear():
    rng = np.random.default_rng(7)
    Lambda, P, B, _ = random_dplr(rng, 5)
    A = np.diag(Lambda) - np.outer(P, P.conj())
    ref_A, ref_B = discretize_dense(A, B, 0.3, "bilinear")
    with jax.enable_x64(True):
        A_bar, B_bar = dplr_bilinear(Lambda, P, B, 0.3)
    assert relative_error(A_bar, ref_A) < 1e-13
    assert relative_error(B_bar, ref_B) < 1e-13


def float64_layer(layer):
    """The same layer with float64 parameters (call inside jax.enable_x64)."""
    state = nnx.state(layer)
    nnx.update(layer, jax.tree.map(lambda p: jnp.asarray(p, jnp.float64), state))
    return layer


@pytest.mark.parametrize("L", [200, 50])
def test_layer_float64_matches_dense_reference(L):
    """The layer (recurrent(u) = layer(u) is in test_layer_contract.py) against a direct
    float64 convolution with the naive kernel of the dense bilinear system whose C is
    C̃ (I - Ā^L₀)⁻¹: L₀ = 32 is shorter than L = 200 (two doublings) and longer than L = 50."""
    u = jax.random.normal(jax.random.key(1), (2, L, 3))
    with jax.enable_x64(True):
        layer64 = float64_layer(S4Layer(3, 16, step_min=1e-2, step_max=1e-1, kernel_length=32, rngs=nnx.Rngs(0)))
        u64 = jnp.asarray(u, jnp.float64)
        y64 = layer64(u64)
        assert y64.dtype == jnp.float64
        Lambda, P, B, C_tilde, step = layer64.ssm_parameters()
        for h in range(3):
            K = dense_reference_kernel(Lambda[h], P[h], B[h], C_tilde[h], step[h], L, reference_length=32)
            ref = direct_causal_conv(np.asarray(u64[:, :, h]), K) + float(layer64.D[...][h]) * np.asarray(u64[:, :, h])
            assert relative_error(y64[:, :, h], ref) < 1e-11


@pytest.mark.parametrize("step", [1e-3, 1e-2, 1e-1])
def test_kernel_is_independent_of_the_call_length(step):
    """The first L taps of the kernel at 2L equal the kernel at L, below and above the
    reference length L₀ = 1024. Were C̃ re-read as C (I - Ā^L) at each length, the first 1,024
    taps at 2,048 would differ by 6.9 % at Δ = 1e-3 (3.8e-5 at 1e-2). (Several doublings past
    L₀, against a dense float64 reference: test_layer_float64_matches_dense_reference.)"""
    layer = S4Layer(4, 64, step_min=step, step_max=step, rngs=nnx.Rngs(0))
    with jax.enable_x64(True):
        kernels = {L: np.asarray(layer.kernel(L, dtype=jnp.float64)) for L in (512, 1024, 2048)}
    for L in (512, 1024):
        assert relative_error(kernels[2 * L][..., :L], kernels[L]) < 1e-10
    assert relative_error(layer.kernel(2048)[..., :1024], layer.kernel(1024)) < 1e-5  # float32


def test_recurrence_is_the_convolution_at_any_length():
    """discrete_system(None), discrete_system(L) and the convolution all use one C: the
    recurrence equals the convolution for lengths below and above L₀ = 64."""
    layer = S4Layer(2, 8, step_min=0.05, step_max=0.5, kernel_length=64, rngs=nnx.Rngs(0))
    u = jax.random.normal(jax.random.key(2), (200, 2))
    assert relative_error(layer.recurrent(u), layer(u)) < 1e-5
    assert relative_error(layer.recurrent(u[:40]), layer(u[:40])) < 1e-5
    step = nnx.jit(lambda layer, state, u_t: layer.step(state, u_t))  # system=None
    state = layer.init_state()
    ys = []
    for t in range(200):
        state, y_t = step(layer, state, u[t])
        ys.append(y_t)
    assert relative_error(jnp.stack(ys), layer(u)) < 1e-5


# --- the layer ----------------------------------------------------------------------------


def test_layer_parameters():
    layer = S4Layer(5, 8, rngs=nnx.Rngs(0))
    ssm = nnx.state(layer, SSMParam)
    assert set(ssm.keys()) == {"log_Lambda_real", "Lambda_imag", "P", "B", "log_step_size"}
    Lambda = layer.ssm_parameters()[0]
    assert np.all(np.asarray(Lambda.real) < 0)
    # HiPPO initialisation: Λ, P, B are dplr_legs' first halves in every channel
    ref_Lambda, ref_P, _, _ = dplr_legs(8)
    assert relative_error(Lambda[2], ref_Lambda[:4]) < 1e-6
    assert relative_error(layer.ssm_parameters()[1][4], ref_P[:4]) < 1e-6


def test_bidirectional_matches_direct_convolutions():
    layer = S4Layer(2, 8, bidirectional=True, rngs=nnx.Rngs(3))
    u = np.asarray(jax.random.normal(jax.random.key(4), (50, 2)))
    K = np.asarray(layer.kernel(50))
    assert K.shape == (2, 2, 50)
    y = np.asarray(layer(jnp.asarray(u)))
    for h in range(2):
        forward = direct_causal_conv(u[:, h], K[0, h])
        backward = direct_causal_conv(u[::-1, h], K[1, h])[::-1]
        ref = forward + backward + float(layer.D[...][h]) * u[:, h]
        assert relative_error(y[:, h], ref) < 1e-5


def test_layer_bad_input():
    """S4's own checks (the shared ones are in test_layer_contract.py): the message names the
    argument and the value."""
    with pytest.raises(ValueError, match=message("state_size", "even", 7)):
        S4Layer(4, 7, rngs=nnx.Rngs(0))
    for option, value in [("chunk_size", 0), ("kernel_length", 0), ("kernel_length", 2.5)]:
        with pytest.raises(ValueError, match=message(option, value)):
            S4Layer(4, 8, rngs=nnx.Rngs(0), **{option: value})


@pytest.mark.parametrize("step", [1e-4, 1e-5])
def test_float32_recurrence_and_convolution_match_float64_at_small_steps(step):
    """At small Δ, Ā = I + (a small increment): the float32 recurrence forms that increment
    directly (Ā - I = diag(a) - v w*) and powers Ā^L - I as a difference from I. Written as
    A1 (A0 x) and I - Ā^L it drifted by 5.6e-5 at Δ = 1e-4 and 1.6e-4 at Δ = 1e-5 here. Both
    float32 outputs against the float64 layer, at L = 1024 (that each layer's recurrence
    equals its call at small Δ is in test_layer_contract.py)."""
    layer = S4Layer(4, 64, step_min=step, step_max=step, rngs=nnx.Rngs(0))
    u = np.asarray(jax.random.normal(jax.random.key(5), (2, 1024, 4)))
    y_conv, y_rec = layer(u), layer.recurrent(u)
    with jax.enable_x64(True):
        ref = np.asarray(layer(u.astype(np.float64)))
        assert relative_error(layer.recurrent(u.astype(np.float64)), ref) < 1e-12
    assert relative_error(y_conv, ref) < 1e-5
    assert relative_error(y_rec, ref) < 1e-5
