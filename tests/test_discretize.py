"""Discretisation: dense and diagonal, against dense float64 references (scipy expm for ZOH)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from flax import nnx
from reference import discretize_dense as reference_dense, relative_error

from annotated_ssm import hippo
from annotated_ssm.discretize import METHODS, discretize, discretize_diagonal
from annotated_ssm.layers import get_layer


def random_stable(N, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, N)) / np.sqrt(N) - 1.5 * np.eye(N), rng.standard_normal(N)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("step", [1e-3, 0.1, 0.7])
def test_dense_matches_reference_float64(method, step):
    A, B = random_stable(8)
    with jax.enable_x64(True):
        A_bar, B_bar = discretize(A, B, step, method)
        A_ref, B_ref = reference_dense(A, B, step, method)
        assert A_bar.dtype == jnp.float64
        assert relative_error(A_bar, A_ref) < 1e-12
        assert relative_error(B_bar, B_ref) < 1e-12


def test_zoh_is_scipy_expm():
    A, B = hippo.legs(16)
    step = 0.05
    with jax.enable_x64(True):
        A_bar, B_bar = discretize(A, B, step, "zoh")
    assert relative_error(A_bar, scipy.linalg.expm(step * A)) < 1e-12
    # B̄ = A⁻¹ (e^{ΔA} - I) B, the textbook formula (LegS is invertible).
    assert relative_error(B_bar, np.linalg.solve(A, (scipy.linalg.expm(step * A) - np.eye(16)) @ B)) < 1e-11


@pytest.mark.parametrize("method", METHODS)
def test_dense_float32(method):
    A, B = random_stable(16)
    A_bar, B_bar = discretize(jnp.float32(A), jnp.float32(B), 0.1, method)
    A_ref, B_ref = reference_dense(A, B, 0.1, method)
    assert A_bar.dtype == jnp.float32
    assert relative_error(A_bar, A_ref) < 1e-5
    assert relative_error(B_bar, B_ref) < 1e-5


@pytest.mark.parametrize("method", METHODS)
def test_diagonal_equals_dense_complex(method):
    rng = np.random.default_rng(1)
    N = 6
    Lambda = -rng.uniform(0.1, 2, N) + 1j * rng.uniform(-10, 10, N)
    B = rng.standard_normal(N) + 1j * rng.standard_normal(N)
    with jax.enable_x64(True):
        A_bar, B_bar = discretize(Lambda, B, 0.2, method)
    A_ref, B_ref = reference_dense(np.diag(Lambda), B, 0.2, method)
    assert relative_error(A_bar, np.diag(A_ref)) < 1e-12
    assert relative_error(B_bar, B_ref) < 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_batched_over_channels_and_per_step(method):
    rng = np.random.default_rng(2)
    H, N = 3, 4
    Lambda = -rng.uniform(0.1, 2, (H, N)) + 1j * rng.uniform(-5, 5, (H, N))
    B = rng.standard_normal(N)
    steps = np.array([1e-3, 1e-2, 1e-1])
    with jax.enable_x64(True):
        A_bar, B_bar = discretize(Lambda, B, steps[:, None], method, diagonal=True)
        assert A_bar.shape == B_bar.shape == (H, N)
        for h in range(H):
            A_ref, B_ref = reference_dense(np.diag(Lambda[h]), B, steps[h], method)
            assert relative_error(A_bar[h], np.diag(A_ref)) < 1e-12
            assert relative_error(B_bar[h], B_ref) < 1e-12
        # Dense batch: one step per matrix, B broadcast to the batch.
        A_dense = np.stack([np.diag(l) for l in Lambda])
        A_bar_d, B_bar_d = discretize(A_dense, B.astype(complex), steps, method)
        assert A_bar_d.shape == (H, N, N) and B_bar_d.shape == (H, N)
        assert relative_error(B_bar_d, B_bar) < 1e-12
        # Per-time steps for a diagonal system: (L, 1) steps give (L, N).
        A_bar_t, B_bar_t = discretize(Lambda[0], B, steps[:, None], method)
        assert A_bar_t.shape == B_bar_t.shape == (3, N)
        for ell in range(3):
            A_ref, B_ref = reference_dense(np.diag(Lambda[0]), B, steps[ell], method)
            assert relative_error(A_bar_t[ell], np.diag(A_ref)) < 1e-12
            assert relative_error(B_bar_t[ell], B_ref) < 1e-12


def test_dense_matrix_input_B():
    A, _ = random_stable(5)
    Bm = np.random.default_rng(3).standard_normal((5, 2))
    with jax.enable_x64(True):
        for method in METHODS:
            _, B_bar = discretize(A, Bm, 0.3, method)
            assert relative_error(B_bar, reference_dense(A, Bm, 0.3, method)[1]) < 1e-12


def test_zoh_diagonal_small_and_zero_eigenvalue():
    # (e^{ΔA}-1)/(ΔA) -> 1 as ΔA -> 0: no 0/0, and values stay accurate near 0.
    with jax.enable_x64(True):
        A = jnp.array([0.0, 1e-9, -1e-7, -1.0])
        _, B_bar = discretize_diagonal(A, jnp.ones(4), 0.5, "zoh")
        expected = np.array([0.5, np.expm1(0.5e-9) / 1e-9, np.expm1(-0.5e-7) / -1e-7, 1 - np.exp(-0.5)])
        assert relative_error(B_bar, expected) < 1e-14
        grad = jax.grad(lambda a: discretize_diagonal(a, jnp.ones(4), 0.5, "zoh")[1].sum())(A)
        assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("method", METHODS)
def test_jit_grad_vmap(method):
    A, B = random_stable(4)
    Lambda = jnp.array([-0.5 + 1j, -0.5 - 1j, -2.0 + 0j])
    with jax.enable_x64(True):
        jitted = jax.jit(discretize, static_argnames=("method", "diagonal"))
        for a, b in ((A, B), (Lambda, jnp.ones(3))):
            out, ref = jitted(a, b, 0.1, method=method), discretize(a, b, 0.1, method)
            assert relative_error(out[0], ref[0]) < 1e-14

        # Gradient with respect to the step against a central finite difference.
        def loss(step):
            A_bar, B_bar = discretize(A, B, step, method)
            return jnp.sum(A_bar**2) + jnp.sum(jnp.sin(B_bar))

        h = 1e-6
        fd = (loss(0.1 + h) - loss(0.1 - h)) / (2 * h)
        assert abs(jax.grad(loss)(0.1) - fd) < 1e-7 * max(1.0, abs(fd))

        def loss_diag(lam_re):
            A_bar, B_bar = discretize(lam_re + 1j * jnp.array([1.0, -1.0, 0.0]), jnp.ones(3), 0.1, method)
            return jnp.sum(jnp.abs(A_bar) ** 2 + jnp.real(B_bar))

        x0 = jnp.array([-0.5, -0.5, -2.0])
        g = jax.grad(loss_diag)(x0)
        fd = np.array([(loss_diag(x0.at[i].add(h)) - loss_diag(x0.at[i].add(-h))) / (2 * h) for i in range(3)])
        assert np.max(np.abs(g - fd)) < 1e-7

        steps = jnp.array([0.01, 0.1, 1.0])
        A_v, B_v = jax.vmap(lambda s: discretize(A, B, s, method))(steps)
        for i, s in enumerate(steps):
            A_ref, B_ref = reference_dense(A, B, float(s), method)
            assert relative_error(A_v[i], A_ref) < 1e-12 and relative_error(B_v[i], B_ref) < 1e-12


def test_bilinear_stable_for_any_step_euler_not():
    A, B = hippo.legs(16)
    with jax.enable_x64(True):
        for step in (0.01, 1.0, 100.0):
            A_bar, _ = discretize(A, B, step, "bilinear")
            assert np.max(np.abs(np.linalg.eigvals(A_bar))) < 1
        A_bar, _ = discretize(A, B, 1.0, "euler")
        assert np.max(np.abs(np.linalg.eigvals(A_bar))) > 1


def test_layers_offer_the_methods_of_discretize():
    for name in ("s4d", "s5"):
        for method in METHODS:
            assert get_layer(name)(2, 4, discretization=method, rngs=nnx.Rngs(0)).discretization == method


# --- the matrix exponential of dense ZOH --------------------------------------------------


def expm_extended(A):
    """e^A in extended precision (np.longdouble): Taylor series of A / 2^s with ‖A / 2^s‖₁ <= 1/4,
    40 terms, squared s times; an independent reference more accurate than float64."""
    dtype = np.clongdouble if np.iscomplexobj(A) else np.longdouble
    A = np.asarray(A).astype(dtype)
    s = max(0, int(np.ceil(np.log2(float(np.abs(A).sum(axis=0).max()) / 0.25))))
    X = A / dtype(2) ** s
    term = result = np.eye(len(A), dtype=dtype)
    for k in range(1, 40):
        term = term @ X / dtype(k)
        result = result + term
    for _ in range(s):
        result = result @ result
    return result.astype(np.complex128 if np.iscomplexobj(A) else np.float64)


def expm_cases(norm):
    """A 2x2 rotation, a random non-normal matrix, HiPPO-LegS (N = 8, 64) and a complex
    matrix, each scaled to ‖A‖₁ = norm."""
    rng = np.random.default_rng(0)
    non_normal = 3 * np.triu(rng.normal(size=(6, 6)), 1) - np.diag(rng.uniform(0, 1, 6))
    cases = {"rotation": np.array([[0.0, -1.0], [1.0, 0.0]]), "non-normal": non_normal,
             "legs8": hippo.legs(8)[0], "legs64": hippo.legs(64)[0],
             "complex": rng.normal(size=(5, 5)) + 1j * rng.normal(size=(5, 5))}
    return {name: A * norm / np.abs(A).sum(axis=0).max() for name, A in cases.items()}


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs an extended-precision longdouble")
@pytest.mark.parametrize("norm", [0.5, 5.0, 8.0, 20.0, 50.0])
def test_expm_matches_extended_precision_and_scipy(norm):
    """Scaling to ‖A / 2^s‖₁ <= θ₁₃ before the Padé-13 step: rounding level up to ‖A‖₁ = 50.
    jax.scipy.linalg.expm rounded s down (rotation by 8: 1.2e-11, by 20: 6.8e-9). SciPy 1.17's
    own error is up to 9.7e-14 here (the rotation by 8), so the comparison with SciPy allows
    for it."""
    from annotated_ssm.discretize import expm

    with jax.enable_x64(True):
        for name, A in expm_cases(norm).items():
            exact = expm_extended(A)
            got = np.asarray(expm(A))
            assert relative_error(got, exact) < 1e-14, name
            scipy_error = relative_error(scipy.linalg.expm(A), exact)
            assert relative_error(got, scipy.linalg.expm(A)) < 1e-14 + scipy_error, name


def test_expm_batched_jit_grad_float32_and_overflow():
    from annotated_ssm.discretize import expm

    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    with jax.enable_x64(True):
        batch = np.stack([0.1 * rotation, 8 * rotation, 50 * rotation])  # s = 0, 1 and 4
        got = np.asarray(jax.jit(expm)(batch))
        for A, E in zip(batch, got):
            assert relative_error(E, expm_extended(A)) < 1e-14
        d_sin = jax.grad(lambda t: expm(t * rotation)[1, 0])(8.0)  # d/dθ sin θ
        assert abs(d_sin - np.cos(8.0)) < 1e-13
        assert np.all(np.isnan(np.asarray(expm(1e25 * rotation))))  # beyond 64 squarings
    got32 = expm(np.float32(20) * rotation.astype(np.float32))
    assert got32.dtype == jnp.float32
    assert relative_error(got32, expm_extended(20 * rotation)) < 1e-5


def test_dense_zoh_of_a_diagonal_matrix_equals_the_diagonal_path():
    """HiPPO-N's eigenvalues, Δ = 0.1 (‖ΔΛ‖ = 8.1): chapter 3's check, 1.6e-11 with jax's expm."""
    Lambda, _, B, _ = hippo.dplr_legs(16)
    with jax.enable_x64(True):
        A_diag, B_diag = discretize(Lambda, B, 0.1, "zoh")
        A_dense, B_dense = discretize(np.diag(Lambda), B, 0.1, "zoh")
        assert max(relative_error(np.diag(A_dense), A_diag), relative_error(B_dense, B_diag)) < 1e-14
