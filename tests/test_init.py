"""Diagonal initialisations of S4D/DSS (annotated_ssm.init, chapter 6)."""

import jax
import numpy as np
import pytest

from annotated_ssm import hippo
from annotated_ssm.init import DIAGONAL_ABLATIONS, DIAGONAL_INITS, diagonal_init, legs_eigenvalues

KEY = jax.random.key(0)


@pytest.mark.parametrize("name", DIAGONAL_INITS)
def test_shapes_and_stability(name):
    A = diagonal_init(name, 64, key=KEY)
    if name == "real":
        assert A.shape == (64,) and A.dtype == np.float64
    else:
        assert A.shape == (32,) and A.dtype == np.complex128
        assert np.all(A.imag >= 0)  # one of each conjugate pair: the upper half plane
    assert np.all(A.real < 0)


@pytest.mark.parametrize("N", [2, 8, 64, 256, 1024])
def test_legs_matches_dplr_legs(N):
    """S4D-LegS: real part exactly -1/2, and (sorted) the eigenvalues of HiPPO-N."""
    A = diagonal_init("legs", N)
    np.testing.assert_array_equal(A.real, -0.5)
    Lambda = hippo.dplr_legs(N)[0][: N // 2]
    np.testing.assert_allclose(np.sort(A.imag), np.sort(Lambda.imag), rtol=1e-10)
    np.testing.assert_allclose(legs_eigenvalues(N), Lambda, rtol=1e-10)


def test_formulas():
    N = 16
    n = np.arange(8)
    np.testing.assert_allclose(diagonal_init("inv", N).imag, N / np.pi * (N / (2 * n + 1) - 1))
    np.testing.assert_allclose(diagonal_init("inv2", N).imag, N / np.pi * (N / (n + 1) - 1))
    np.testing.assert_allclose(diagonal_init("lin", N).imag, np.pi * n)
    np.testing.assert_allclose(diagonal_init("quad", N).imag, (2 * n + 1) ** 2 / np.pi)
    np.testing.assert_array_equal(diagonal_init("real", N), -(np.arange(N) + 1.0))
    # S4D-Real has the spectrum of HiPPO-LegS itself.
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(hippo.legs(N)[0]).real), np.sort(diagonal_init("real", N)))


def test_inv_approximates_legs():
    """S4D-Inv follows the inverse law of S4D-LegS: the largest frequency agrees to 0.5%, and
    the ratio stays within 25% except at the slowest few (the law is asymptotic)."""
    legs, inv = diagonal_init("legs", 256).imag, diagonal_init("inv", 256).imag
    assert abs(legs[0] - inv[0]) / legs[0] < 0.005
    assert np.max(np.abs(legs[:-8] - inv[:-8]) / legs[:-8]) < 0.25


def test_ablations():
    base = diagonal_init("inv", 32)
    for label, (name, options) in DIAGONAL_ABLATIONS.items():
        A = diagonal_init(name, 32, key=KEY, **options)
        assert A.shape == (16,), label
        assert np.all(A.real < 0) and np.all(A.real >= -1), label
    np.testing.assert_allclose(diagonal_init("inv", 32, imag_scale=0.01).imag, 0.01 * base.imag)
    np.testing.assert_allclose(diagonal_init("lin", 32, real_part=-2.0).real, -2.0)
    rand_imag = diagonal_init("lin", 32, key=KEY, random_imag=True).imag
    assert np.all((rand_imag >= 0) & (rand_imag < np.pi * 16)) and not np.allclose(rand_imag, np.pi * np.arange(16))
    # Random draws are reproducible from the key.
    np.testing.assert_array_equal(diagonal_init("rand", 32, key=KEY), diagonal_init("rand", 32, key=KEY))


def test_bad_input():
    with pytest.raises(ValueError, match="name.*'legs'"):
        diagonal_init("hippo", 64)
    with pytest.raises(ValueError, match="N must be even"):
        diagonal_init("inv", 63)
    with pytest.raises(ValueError, match="N must be an integer"):
        diagonal_init("lin", 0)
    with pytest.raises(ValueError, match="key"):
        diagonal_init("rand", 64)
    with pytest.raises(ValueError, match="real_part"):
        diagonal_init("lin", 64, real_part=0.5)
    with pytest.raises(ValueError, match="imag_scale"):
        diagonal_init("lin", 64, imag_scale=-1.0)
    with pytest.raises(ValueError, match="real"):
        diagonal_init("real", 64, imag_scale=2.0)
    with pytest.raises(ValueError, match="random_imag"):
        diagonal_init("legs", 64, key=KEY, random_imag=True)
    with pytest.raises(ValueError, match="N must be even"):
        legs_eigenvalues(7)


# --- S4D-LegS against S4-LegS (Figure 3), the explorers' numbers --------------------------

from annotated_ssm import discretize, init, kernels  # noqa: E402


@pytest.mark.parametrize("N", [8, 64, 256])
def test_closed_form_legs_n_eigenvectors(N):
    """The closed-form eigenvectors of HiPPO-N give the same weights V_nk (V*B)_k as the
    Hermitian eigensolver (the products do not depend on each eigenvector's phase)."""
    Lambda, B_tilde, V_rows = init.legs_eigenvectors(N, 4)
    Lambda_ref, _, B_ref, V_ref = hippo.dplr_legs(N)
    half = N // 2
    np.testing.assert_allclose(Lambda, Lambda_ref[:half], rtol=1e-10)
    np.testing.assert_allclose(V_rows * B_tilde, V_ref[:4, :half] * B_ref[:half], atol=1e-11)


def test_theorem3_convergence():
    """S4D paper, Theorem 3: the basis of (A^(N), B/2) approaches the LegS basis as N grows
    (checked on the discretised kernels, t in [0.05, 1], Δ = 0.002)."""
    errors = init.figure3_errors([64, 256, 1024], methods=("bilinear",))
    early = [errors[N, "bilinear"][0] for N in (64, 256, 1024)]
    assert early[0] > early[1] > early[2]
    assert early[2] < 0.05


def test_legs_n_basis_padding_changes_nothing():
    plain = init.legs_n_basis(64, 300)
    padded = init.legs_n_basis(64, 300, slots=512)
    np.testing.assert_allclose(padded, plain, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="slots"):
        init.legs_n_basis(64, 300, slots=16)


def test_legs_n_basis_against_dense_reference():
    """S4D-LegS's basis from the eigenbasis equals the dense float64 ZOH kernel of
    (A^(N), B/2), A^(N) = HiPPO-N."""
    N, L, step = 16, 200, 0.01
    A, _, B = hippo.normal_legs(N)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_dense(A, B / 2, step, "zoh"))
    reference = kernels.naive_kernel(A_bar, B_bar, np.eye(N)[:4], L) / step
    np.testing.assert_allclose(init.legs_n_basis(N, L, step), reference, rtol=1e-9, atol=1e-9)


def test_legs_exact_basis_ssm_kernel_close_to_closed_form():
    """The ZOH kernel / Δ samples the basis at t + Δ/2 (to O(Δ²)): against the closed form
    at t + Δ/2 it agrees to 1e-4 (Δ²·f''/24); at t only to O(Δ) (> 1e-3)."""
    step, L = 0.002, 500
    closed, ssm_kernel = init.legs_exact_basis(L, step)
    np.testing.assert_allclose(closed, hippo.legs_basis(4, step * np.arange(L)), rtol=1e-14)
    midpoint = hippo.legs_basis(4, step * (np.arange(L) + 0.5))
    assert np.max(np.abs(ssm_kernel - midpoint)) < 1e-4
    assert np.max(np.abs(ssm_kernel - closed)) > 1e-3


@pytest.mark.parametrize("name, N, method", [("legs", 64, "zoh"), ("lin", 16, "bilinear"), ("real", 8, "zoh")])
def test_diagonal_kernel_against_float64_reference(name, N, method):
    """The padded float32 kernel of the S4D explorer equals the naive float64 kernel of the
    unpadded system (B = 1, the same C) to float32 accuracy."""
    step = 0.02
    data = init.diagonal_kernel(name, N, -0.5, 1.0, method, step)
    A = data.A
    rng = np.random.default_rng(0)
    C = (rng.standard_normal(len(A)) + 1j * rng.standard_normal(len(A))) / np.sqrt(2)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_diagonal(A, np.ones_like(A), step, method))
    K = kernels.naive_kernel(A_bar, B_bar, C, init.DIAGONAL_KERNEL_LENGTH)
    K = K.real if name == "real" else 2 * K.real
    assert np.max(np.abs(data.kernel - K)) < 1e-4 * np.max(np.abs(K))
    np.testing.assert_allclose(data.A_bar, A_bar, rtol=1e-5)  # float32 phase of ΔA up to ~30 rad
    assert data.basis.shape == (4, init.DIAGONAL_KERNEL_LENGTH)


def test_diagonal_kernel_bad_input():
    with pytest.raises(ValueError, match="N must be <= 512"):
        init.diagonal_kernel("inv", 1024, -0.5, 1.0, "zoh", 0.01)
    with pytest.raises(ValueError, match="discretization"):
        init.diagonal_kernel("inv", 64, -0.5, 1.0, "euler", 0.01)
    with pytest.raises(ValueError, match="step"):
        init.diagonal_kernel("inv", 64, -0.5, 1.0, "zoh", 0.0)


@pytest.mark.parametrize("P, J", [(16, 1), (32, 4), (64, 8)])
def test_s5_system_with_one_step_is_the_real_block_system(P, J):
    """With step_min = step_max every state has the same Δ, and the impulse responses must be
    the ZOH kernel of the real system (J blocks of HiPPO-N, the same real B and C): this
    checks the conjugate halving, the projections B̃ = V*B, C̃ = CV and the discretisation."""
    H, L, step = 3, 60, 0.05
    system = init.s5_system(H, P, J, step, step, L, seed=3)
    rng = np.random.default_rng(3)
    B = rng.standard_normal((P, H)) / np.sqrt(H)
    C = rng.standard_normal((H, P)) / np.sqrt(P)
    A_block, _, _ = hippo.normal_legs(P // J)
    A = np.kron(np.eye(J), A_block)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_dense(A, B, step, "zoh"))
    reference = np.stack([C @ np.linalg.matrix_power(A_bar, ell) @ B_bar for ell in range(L)])
    np.testing.assert_allclose(system.responses, reference, rtol=1e-9, atol=1e-11)
    assert system.Lambda.shape == system.step.shape == system.Lambda_bar.shape == (P // 2,)


def test_s5_system_bad_input():
    with pytest.raises(ValueError, match="step_min"):
        init.s5_system(3, 32, 4, 0.1, 0.01, 10)
    with pytest.raises(ValueError, match="blocks"):
        init.s5_system(3, 32, 3, 0.01, 0.1, 10)
    with pytest.raises(ValueError, match="state_size"):
        init.s5_system(3, 256, 1, 0.01, 0.1, 10)
