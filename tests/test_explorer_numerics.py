"""The explorers' and Figure 3's numbers (annotated_ssm.book.explorer_numerics, chapters 6, 7)."""

import jax
import numpy as np
import pytest

from annotated_ssm import discretize, hippo, kernels
from annotated_ssm.book import explorer_numerics as numerics
from annotated_ssm.initialization import block_hippo_n, diagonal_init, s5_init


@pytest.mark.parametrize("N, real_part, imag_scale", [(64, -0.5, 1.0), (256, -2.0, 0.1)])
def test_s4d_explorer_legs_is_diagonal_init(N, real_part, imag_scale):
    """The S4D explorer's S4D-LegS is diagonal_init's."""
    A = numerics.diagonal_kernel("legs", N, real_part, imag_scale, "zoh", 0.01).A
    expected = diagonal_init("legs", N, real_part=real_part, imag_scale=imag_scale)
    np.testing.assert_array_equal(A.real, real_part)
    np.testing.assert_array_equal(A, expected)
    with pytest.raises(ValueError, match="real_part.*0.5"):
        numerics.diagonal_kernel("legs", N, 0.5, imag_scale, "zoh", 0.01)


@pytest.mark.parametrize("N", [8, 64, 256])
def test_closed_form_legs_n_eigenvectors(N):
    """The closed-form eigenvectors of HiPPO-N give the same weights V_nk (V*B)_k as the
    Hermitian eigensolver (the products do not depend on each eigenvector's phase)."""
    Lambda, B_tilde, V_rows = numerics.legs_eigenvectors(N, 4)
    Lambda_ref, _, B_ref, V_ref = hippo.dplr_legs(N)
    half = N // 2
    np.testing.assert_allclose(Lambda, Lambda_ref[:half], rtol=1e-10)
    np.testing.assert_allclose(V_rows * B_tilde, V_ref[:4, :half] * B_ref[:half], atol=1e-11)


def test_theorem3_convergence():
    """S4D paper, Theorem 3: the basis of (A^(N), B/2) approaches the LegS basis as N grows
    (checked on the discretised kernels, t in [0.05, 1], Δ = 0.002)."""
    errors = numerics.figure3_errors([64, 256, 1024], methods=("bilinear",))
    early = [errors[N, "bilinear"][0] for N in (64, 256, 1024)]
    assert early[0] > early[1] > early[2]
    assert early[2] < 0.05


def test_legs_n_basis_padding_changes_nothing():
    plain = numerics.legs_n_basis(64, 300)
    padded = numerics.legs_n_basis(64, 300, slots=512)
    np.testing.assert_allclose(padded, plain, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="slots.*slots=16"):
        numerics.legs_n_basis(64, 300, slots=16)


def test_legs_n_basis_against_dense_reference():
    """S4D-LegS's basis from the eigenbasis equals the dense float64 ZOH kernel of
    (A^(N), B/2), A^(N) = HiPPO-N."""
    N, L, step = 16, 200, 0.01
    A, _, B = hippo.normal_legs(N)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_dense(A, B / 2, step, "zoh"))
    reference = kernels.naive_kernel(A_bar, B_bar, np.eye(N)[:4], L) / step
    np.testing.assert_allclose(numerics.legs_n_basis(N, L, step), reference, rtol=1e-9, atol=1e-9)


def test_legs_exact_basis_ssm_kernel_close_to_closed_form():
    """The ZOH kernel / Δ samples the basis at t + Δ/2 (to O(Δ²)): against the closed form
    at t + Δ/2 it agrees to 1e-4 (Δ²·f''/24); at t only to O(Δ) (> 1e-3)."""
    step, L = 0.002, 500
    closed, ssm_kernel = numerics.legs_exact_basis(L, step)
    np.testing.assert_allclose(closed, hippo.legs_basis(4, step * np.arange(L)), rtol=1e-14)
    midpoint = hippo.legs_basis(4, step * (np.arange(L) + 0.5))
    assert np.max(np.abs(ssm_kernel - midpoint)) < 1e-4
    assert np.max(np.abs(ssm_kernel - closed)) > 1e-3


@pytest.mark.parametrize("name, N, method", [("legs", 64, "zoh"), ("lin", 16, "bilinear"), ("real", 8, "zoh")])
def test_diagonal_kernel_against_float64_reference(name, N, method):
    """The padded float32 kernel of the S4D explorer equals the naive float64 kernel of the
    unpadded system (B = 1, the same C) to float32 accuracy."""
    step = 0.02
    data = numerics.diagonal_kernel(name, N, -0.5, 1.0, method, step)
    A = data.A
    rng = np.random.default_rng(0)
    C = (rng.standard_normal(len(A)) + 1j * rng.standard_normal(len(A))) / np.sqrt(2)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_diagonal(A, np.ones_like(A), step, method))
    K = kernels.naive_kernel(A_bar, B_bar, C, numerics.DIAGONAL_KERNEL_LENGTH)
    K = K.real if name == "real" else 2 * K.real
    assert np.max(np.abs(data.kernel - K)) < 1e-4 * np.max(np.abs(K))
    np.testing.assert_allclose(data.A_bar, A_bar, rtol=1e-5)  # float32 phase of ΔA up to ~30 rad
    assert data.basis.shape == (4, numerics.DIAGONAL_KERNEL_LENGTH)


def test_diagonal_kernel_bad_input():
    with pytest.raises(ValueError, match="N .*<= 512.*1024"):
        numerics.diagonal_kernel("inv", 1024, -0.5, 1.0, "zoh", 0.01)
    with pytest.raises(ValueError, match="discretization.*'euler'"):
        numerics.diagonal_kernel("inv", 64, -0.5, 1.0, "euler", 0.01)
    with pytest.raises(ValueError, match="step .*got 0.0"):
        numerics.diagonal_kernel("inv", 64, -0.5, 1.0, "zoh", 0.0)


@pytest.mark.parametrize("P, J", [(16, 1), (32, 4), (64, 8)])
def test_s5_responses_with_one_step_are_the_real_block_system(P, J):
    """With step_min = step_max every state has the same Δ, and the impulse responses must be
    the ZOH kernel of the real system the layer's initialisation stands for (dense matrix
    powers in float64): A = 2·Re(V diag(Λ) V*), B = 2·Re(V B̃) and C = 2·Re(C̃ V*), V from
    block_hippo_n. This checks the conjugate halving and the discretisation; Λ, B̃, C̃ are
    s5_init's for the same key."""
    H, L, step = 3, 60, 0.05
    system = numerics.s5_responses(H, P, J, step, step, L, seed=3)
    key_init, _ = jax.random.split(jax.random.key(3))
    expected = s5_init(key_init, H, P, J)
    for got, want in zip(system.init, expected):
        np.testing.assert_array_equal(got, want)
    _, V = block_hippo_n(P, J)
    B_tilde, C_tilde = (np.asarray(x, np.complex128) for x in system.init[1:])
    B = 2 * (V @ B_tilde).real
    C = 2 * (C_tilde @ V.conj().T).real
    # log_step_size draws float32 log Δ: one Δ for every state, equal to step to float32 rounding
    assert system.step.shape == system.Lambda_bar.shape == (P // 2,)
    np.testing.assert_array_equal(system.step, system.step[0])
    np.testing.assert_allclose(system.step[0], step, rtol=1e-6)
    # The layer's Λ is complex64: the real system's A = 2·Re(V diag(Λ) V*) is J blocks of
    # HiPPO-N up to that rounding (checked), and exactly what the layer starts from.
    Lambda = np.asarray(system.init.Lambda, np.complex128)
    A = 2 * (V @ np.diag(Lambda) @ V.conj().T).real
    A_block, _, _ = hippo.normal_legs(P // J)
    np.testing.assert_allclose(A, np.kron(np.eye(J), A_block), atol=1e-5)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_dense(A, B, system.step[0],
                                                                           "zoh"))
    reference = np.stack([C @ np.linalg.matrix_power(A_bar, ell) @ B_bar for ell in range(L)])
    np.testing.assert_allclose(system.responses, reference, rtol=1e-9, atol=1e-11)


def test_s5_responses_bad_input():
    with pytest.raises(ValueError, match="step_min.*0.1"):
        numerics.s5_responses(3, 32, 4, 0.1, 0.01, 10)
    with pytest.raises(ValueError, match="blocks.*blocks=3"):
        numerics.s5_responses(3, 32, 3, 0.01, 0.1, 10)
    with pytest.raises(ValueError, match="state_size.*256"):
        numerics.s5_responses(3, 256, 1, 0.01, 0.1, 10)


def test_figure3_data():
    """Figure 3's arrays: the times ℓΔ on [0, t_max], S4-LegS's bases and one S4D-LegS basis
    per panel, each the function that computes it."""
    data = numerics.figure3_data(step=0.01, t_max=1.0, panels=((16, "zoh"), (32, "bilinear")))
    np.testing.assert_allclose(data.t, 0.01 * np.arange(101))
    exact, ssm_kernel = numerics.legs_exact_basis(101, 0.01)
    np.testing.assert_array_equal(data.exact, exact)
    np.testing.assert_array_equal(data.ssm_kernel, ssm_kernel)
    assert list(data.panels) == [(16, "zoh"), (32, "bilinear")]
    np.testing.assert_array_equal(data.panels[32, "bilinear"],
                                  numerics.legs_n_basis(32, 101, 0.01, "bilinear"))
    assert list(numerics.figure3_data(step=0.05, t_max=0.5).panels) == list(numerics.FIGURE3_PANELS)

