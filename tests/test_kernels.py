"""The fast kernels' algorithms against plain float64 references: the blocked-power
Vandermonde kernel (S4D), the real-arithmetic conjugate Cauchy sum and the chunked S4
kernel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import relative_error

from annotated_ssm.kernels import cauchy, naive_kernel, s4_kernel, vandermonde_kernel

# --- S4D: the blocked Vandermonde kernel ---------------------------------------------------


def s4d_lin(H, N, rng, dtype=np.complex64):
    """S4D-Lin eigenvalues -1/2 + iπn (N states kept), random C, Δ log-uniform [1e-3, 1e-1]."""
    A = np.broadcast_to(-0.5 + 1j * np.pi * np.arange(N), (H, N)).astype(dtype)
    C = (rng.standard_normal((H, N)) + 1j * rng.standard_normal((H, N))).astype(dtype)
    step = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), (H, 1))).astype(np.finfo(dtype).dtype)
    return A, C, step


def reference_kernel(A, B, C, step, L, method, conjugate=True):
    """Float64 Ā, B̄ by the textbook formulas, then the kernel by repeated multiplication."""
    A, B, C, step = (np.asarray(x).astype(np.result_type(x, np.float64)) for x in (A, B, C, step))
    dtA = step * A
    if method == "zoh":
        A_bar, B_bar = np.exp(dtA), np.expm1(dtA) / dtA * step * B
    elif method == "bilinear":
        A_bar, B_bar = (1 + dtA / 2) / (1 - dtA / 2), step * B / (1 - dtA / 2)
    else:
        A_bar, B_bar = 1 + dtA, step * B
    K = np.real(naive_kernel(A_bar, np.broadcast_to(B_bar, np.broadcast_shapes(A_bar.shape, B_bar.shape)), C, L, diagonal=True))
    return 2 * K if conjugate else K


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_vandermonde_float32_long_kernel_matches_float64_reference(method):
    # L = 65536: every power is taken from its exponent, so float32 stays near 1e-6
    # (a chain of 65536 products would drift far beyond that).
    rng = np.random.default_rng(0)
    A, C, step = s4d_lin(2, 16, rng)
    L = 65536
    K = vandermonde_kernel(A, np.complex64(1), C, step, L, method=method)
    assert K.dtype == jnp.float32 and K.shape == (2, L)
    assert relative_error(K, reference_kernel(A, 1.0, C, step, L, method)) < 1e-5


@pytest.mark.parametrize("method", ["zoh", "bilinear", "euler"])
@pytest.mark.parametrize(
    ("L", "options"),
    [(1, {}), (7, {}), (1000, {}), (1000, {"block_size": 1}), (1000, {"block_size": 999}),
     (1000, {"block_size": 5000}), (1000, {"max_elements": 3000}), (4096, {"max_elements": 1, "block_size": 64})],
)
def test_vandermonde_float64_end_to_end(method, L, options):
    # Every block size and grouping of rows (lax.map + checkpoint) gives the same kernel,
    # to float64 rounding.
    rng = np.random.default_rng(L)
    A, C, step = s4d_lin(3, 8, rng, np.complex128)
    B = rng.standard_normal(8)  # (N,): broadcast against the channels
    if method == "euler":
        step = step / 100  # Euler's Ā = 1 + ΔA leaves the unit disc unless Δ|A| is small
    with jax.enable_x64(True):
        K = vandermonde_kernel(A, B, C, step, L, method=method, **options)
        assert K.dtype == jnp.float64
    assert relative_error(K, reference_kernel(A, B, C, step, L, method)) < 1e-10


def straightforward(A, B, C, step, L):
    """The plain ZOH Vandermonde product: exp(ΔA·ℓ) for every ℓ, one einsum."""
    dtA = step * A
    powers = jnp.exp(dtA[..., None] * jnp.arange(L))
    return 2 * jnp.real(jnp.einsum("...n,...nl->...l", C * (jnp.expm1(dtA) / dtA * step * B), powers))


def test_vandermonde_gradients_match_straightforward_float64_and_float32():
    rng = np.random.default_rng(1)
    A, C, step = s4d_lin(3, 8, rng, np.complex128)
    B = (rng.standard_normal((3, 8)) + 1j * rng.standard_normal((3, 8)))
    L = 3000
    weights = rng.standard_normal(L)

    def loss(kernel):
        return lambda A, B, C, step: jnp.sum(jnp.sin(kernel(A, B, C, step, L)) * weights)

    fast = loss(lambda *x: vandermonde_kernel(*x, max_elements=500))  # grouped rows too
    with jax.enable_x64(True):
        expected = jax.grad(loss(straightforward), argnums=(0, 1, 2, 3))(A, B, C, step)
        got = jax.jit(jax.grad(fast, argnums=(0, 1, 2, 3)))(A, B, C, step)
        for g, e in zip(got, expected):
            assert relative_error(g, e) < 1e-10
    got32 = jax.jit(jax.grad(fast, argnums=(0, 1, 2, 3)))(*(x.astype(np.complex64) for x in (A, B, C)), step.astype(np.float32))
    for g, e in zip(got32, expected):
        assert g.dtype in (jnp.float32, jnp.complex64)
        assert relative_error(g, e) < 1e-4


def test_vandermonde_broadcasting_bidirectional_and_real():
    rng = np.random.default_rng(2)
    A, C, step = s4d_lin(3, 8, rng)
    C2 = np.stack([C, C[::-1]])  # (2, H, N): two output vectors, shared A, B, Δ
    K = vandermonde_kernel(A, 2.0, C2, step, 500)
    assert K.shape == (2, 3, 500)
    for k in range(2):
        assert relative_error(K[k], reference_kernel(A, 2.0, C2[k], step, 500, "zoh")) < 1e-5
    # A real SSM (S4D-Real) without conjugate pairs: the kernel is the plain sum.
    A_real = -np.arange(1, 9, dtype=np.float32) * np.ones((3, 1), np.float32)
    K = vandermonde_kernel(A_real, 1.0, np.real(C), step, 500, conjugate=False)
    assert relative_error(K, reference_kernel(A_real, 1.0, np.real(C), step, 500, "zoh", conjugate=False)) < 1e-5


def test_vandermonde_bilinear_eigenvalue_zero_is_exact_with_finite_gradient():
    # ΔA = -2 makes the bilinear Ā exactly 0: K_0 = C B̄ and every later entry is 0.
    A = np.array([[-20.0 + 0j, -1 + 3j]], np.complex64)
    C = np.array([[1.0 + 0j, 0.5 - 1j]], np.complex64)
    step = np.array([[0.1]], np.float32)
    K = vandermonde_kernel(A, 1.0, C, step, 100, method="bilinear")
    assert relative_error(K, reference_kernel(A, 1.0, C, step, 100, "bilinear")) < 1e-5
    grad = jax.grad(lambda C: jnp.sum(vandermonde_kernel(A, 1.0, C, step, 100, method="bilinear") ** 2))(jnp.asarray(C))
    assert np.all(np.isfinite(np.asarray(grad)))


# --- S4: the conjugate Cauchy sum and the chunked kernel ------------------------------------


def test_conjugate_cauchy_matches_float64_sum_over_both_poles():
    rng = np.random.default_rng(4)
    M, F = 6, 50
    v = rng.standard_normal((3, M)) + 1j * rng.standard_normal((3, M))
    lambd = -rng.uniform(0.1, 1, M) + 1j * rng.uniform(-5, 5, M)
    z = rng.standard_normal(F) + 1j * rng.standard_normal(F) * 5  # general complex points
    expected = np.sum(v[:, :, None] / (z - lambd[:, None]) + np.conj(v)[:, :, None] / (z - np.conj(lambd)[:, None]), axis=1)
    with jax.enable_x64(True):
        got = cauchy(v, z[None], lambd[None], conjugate=True)
        assert got.dtype == jnp.complex128
        assert relative_error(got, expected) < 1e-12
    got32 = cauchy(v.astype(np.complex64), z[None].astype(np.complex64), lambd[None].astype(np.complex64), conjugate=True)
    assert got32.dtype == jnp.complex64 and relative_error(got32, expected) < 1e-5


@pytest.mark.parametrize("conjugate", [True, False])
def test_cauchy_on_the_imaginary_axis_matches_float64_and_the_general_form(conjugate):
    """``imaginary=True`` takes y for the points z = iy (S4's nodes): the float64 sum, and in
    float32 exactly the numbers of the general form given 1j * y."""
    rng = np.random.default_rng(5)
    M, F = 6, 50
    v = rng.standard_normal((4, M)) + 1j * rng.standard_normal((4, M))
    lambd = -rng.uniform(0.1, 1, M) + 1j * rng.uniform(-5, 5, M)
    y = np.concatenate([[0.0], rng.standard_normal(F - 1) * 10])
    z = 1j * y
    expected = np.sum(v[:, :, None] / (z - lambd[:, None]), axis=1)
    if conjugate:
        expected = expected + np.sum(np.conj(v)[:, :, None] / (z - np.conj(lambd)[:, None]), axis=1)
    with jax.enable_x64(True):
        got = cauchy(v, y[None], lambd[None], conjugate=conjugate, imaginary=True)
        assert got.dtype == jnp.complex128 and relative_error(got, expected) < 1e-12
    v32, y32, lambd32 = v.astype(np.complex64), y.astype(np.float32), lambd.astype(np.complex64)
    got32 = cauchy(v32, y32[None], lambd32[None], conjugate=conjugate, imaginary=True)
    general = cauchy(v32, (1j * y32)[None], lambd32[None], conjugate=conjugate)
    assert got32.dtype == jnp.complex64 and relative_error(got32, expected) < 1e-5
    np.testing.assert_array_equal(np.asarray(got32), np.asarray(general))


def random_dplr(rng, H, M):
    def cplx(*shape):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)

    Lambda = -rng.uniform(0.2, 1, (H, M)) + 1j * np.pi * np.arange(M)
    return Lambda, 0.3 * cplx(H, M), cplx(H, M), cplx(H, M), rng.uniform(0.01, 0.1, H)


def s4_reference(Lambda, P, B, C_tilde, step, L):
    """Float64 S4 kernel from the dense bilinear system of all 2M states: Ā, B̄ by solves,
    C = C̃ (I - Ā^L)⁻¹, then K̄_ℓ = Re C Ā^ℓ B̄ by repeated multiplication."""
    pairs = [np.concatenate([x, np.conj(x)]) for x in (Lambda, P, B, C_tilde)]
    Lambda, P, B, C_tilde = pairs
    A = np.diag(Lambda) - np.outer(P, np.conj(P))
    eye = np.eye(len(Lambda))
    left = eye - step / 2 * A
    A_bar = np.linalg.solve(left, eye + step / 2 * A)
    B_bar = np.linalg.solve(left, step * B)
    C = np.linalg.solve((eye - np.linalg.matrix_power(A_bar, L)).T, C_tilde)
    return np.real(naive_kernel(A_bar, B_bar, C, L))


@pytest.mark.parametrize(("L", "chunk_size"), [(100, None), (100, 7), (257, 64), (1000, 1)])
def test_s4_kernel_float64_end_to_end(L, chunk_size):
    rng = np.random.default_rng(L)
    Lambda, P, B, C_tilde, step = random_dplr(rng, 2, 4)
    with jax.enable_x64(True):
        K = s4_kernel(Lambda, P, B, C_tilde, step, L, chunk_size=chunk_size)
        assert K.dtype == jnp.float64
    for h in range(2):
        expected = s4_reference(Lambda[h], P[h], B[h], C_tilde[h], step[h], L)
        assert relative_error(K[h], expected) < 1e-10


def test_s4_kernel_default_chunking_gradient_equals_unchunked_float64():
    rng = np.random.default_rng(5)
    args = random_dplr(rng, 2, 8)
    L = 3000

    def loss(chunk_size):
        return lambda *x: jnp.sum(jnp.sin(s4_kernel(*x, L, chunk_size=chunk_size)))

    with jax.enable_x64(True):
        whole = jax.grad(loss(L), argnums=(0, 1, 2, 3, 4))(*args)  # one chunk: no lax.map
        default = jax.jit(jax.grad(lambda *x: jnp.sum(jnp.sin(s4_kernel(*x, L))), argnums=(0, 1, 2, 3, 4)))(*args)
        for g, e in zip(default, whole):
            assert relative_error(g, e) < 1e-10


# --- validation policy ----------------------------------------------------------------------
