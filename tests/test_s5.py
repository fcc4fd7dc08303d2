"""S5: initialisation, the layer against float64 references, recurrent mode, per-observation step sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from flax import nnx
from reference import discretize_dense, message, relative_error

from annotated_ssm.hippo import dplr_legs, normal_legs
from annotated_ssm.initialization import block_hippo_n, s5_init
from annotated_ssm.layers.s5 import S5Layer

H = 3


def make(P=8, J=2, **kwargs):
    return S5Layer(H, P, blocks=J, rngs=nnx.Rngs(0), **kwargs)



def inputs(shape=(2, 40, H), seed=1):
    return jax.random.normal(jax.random.key(seed), shape)


def complex_params(layer):
    """The layer's parameters as float64/complex128 NumPy arrays."""
    c = lambda x: np.asarray(x[..., 0], np.float64) + 1j * np.asarray(x[..., 1], np.float64)
    return (c(layer.Lambda[...]), c(layer.B_tilde[...]), c(layer.C_tilde[...]),
            np.asarray(layer.D[...], np.float64), np.exp(np.asarray(layer.log_step_size[...], np.float64)))


def reference_s5(layer, u, step_sizes=None, method="zoh"):
    """float64 loop over time of the diagonal S5 recurrence, one sequence u (L, H)."""
    Lam, B, C, D, delta = complex_params(layer)
    u = np.asarray(u, np.float64)
    L = len(u)
    step_sizes = np.ones(L) if step_sizes is None else np.broadcast_to(np.asarray(step_sizes, np.float64),
                                                                       (L,))
    P = len(Lam)
    scale = 2.0 if layer.conj_sym else 1.0

    def run(order, step_of):
        x = np.zeros(P, complex)
        out = np.zeros((L, H))
        for ell in order:
            dt = delta * step_of(ell)
            if method == "zoh":
                a, f = np.exp(Lam * dt), (np.exp(Lam * dt) - 1) / Lam
            elif method == "euler":
                a, f = 1 + Lam * dt, dt
            else:
                a, f = (1 + Lam * dt / 2) / (1 - Lam * dt / 2), dt / (1 - Lam * dt / 2)
            x = a * x + f * (B @ u[ell])
            out[ell] = out[ell] + scale * (C_part @ x).real
        return out

    C_part = C[:, :P]
    y = run(range(L), lambda ell: step_sizes[ell])
    if layer.bidirectional:
        C_part = C[:, P:]
        y = y + run(range(L - 1, -1, -1), lambda ell: step_sizes[min(ell + 1, L - 1)])
    return y + D * u


# --- initialisation ---------------------------------------------------------------------

@pytest.mark.parametrize("P,J", [(16, 1), (16, 4), (24, 3)])
def test_block_eigenvalues_match_dplr_legs(P, J):
    R = P // J
    Lam, V = block_hippo_n(P, J)
    per_block = dplr_legs(R)[0][: R // 2]
    np.testing.assert_allclose(Lam.reshape(J, R // 2), np.tile(per_block, (J, 1)), atol=1e-12)
    # Columns of V are eigenvectors of the block-diagonal HiPPO-N matrix.
    A = scipy.linalg.block_diag(*[normal_legs(R)[0]] * J)
    assert np.max(np.abs(A @ V - V * Lam)) < 1e-12 * np.max(np.abs(Lam))
    # The layer starts from exactly these eigenvalues (complex64).
    layer = S5Layer(H, P, blocks=J, rngs=nnx.Rngs(0))
    assert relative_error(layer.eigenvalues(), Lam) < 1e-6
    assert np.all(np.asarray(layer.eigenvalues().real) == -0.5)


def test_conj_sym_keeps_half_of_the_full_diagonalisation():
    full = s5_init(jax.random.key(0), H, 12, 2, conj_sym=False)
    half = s5_init(jax.random.key(0), H, 12, 2, conj_sym=True)
    keep = np.r_[0:3, 6:9]  # first R/2 = 3 states of each of the two blocks
    np.testing.assert_allclose(half.Lambda, full.Lambda[keep], rtol=1e-6)
    np.testing.assert_allclose(half.B_tilde, full.B_tilde[keep], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(half.C_tilde, full.C_tilde[:, keep], rtol=1e-5, atol=1e-6)
    # B̃ = V⁻¹B and C̃ = CV with B, C real: V B̃ and C̃ V⁻¹ are real matrices.
    _, V = block_hippo_n(12, 2, conj_sym=False)
    B = V @ np.asarray(full.B_tilde, np.complex128)
    C = np.asarray(full.C_tilde, np.complex128) @ V.conj().T
    assert np.max(np.abs(B.imag)) < 1e-6 * np.max(np.abs(B))
    assert np.max(np.abs(C.imag)) < 1e-6 * np.max(np.abs(C))


def test_layer_at_init_is_the_real_block_hippo_n_system():
    # With one Δ for every state, the diagonal conj-symmetric layer computes exactly the real
    # SSM (blockdiag(HiPPO-N), B, C) it was diagonalised from: check against dense float64 ZOH.
    P, J, delta = 12, 3, 0.05
    layer = make(P, J)
    layer.log_step_size[...] = jnp.full_like(layer.log_step_size[...], np.log(delta))
    _, V = block_hippo_n(P, J)
    _, B_t, C_t, D, _ = complex_params(layer)
    B, C = 2 * (V @ B_t).real, 2 * (C_t @ V.conj().T).real
    A = scipy.linalg.block_diag(*[normal_legs(P // J)[0]] * J)
    A_bar, B_bar = discretize_dense(A, B, delta, "zoh")
    u = np.asarray(inputs((60, H)), np.float64)
    x, y = np.zeros(P), []
    for u_l in u:
        x = A_bar @ x + B_bar @ u_l
        y.append(C @ x + D * u_l)
    assert relative_error(layer(u.astype(np.float32)), np.array(y)) < 1e-5


# --- the layer against float64 references ---------------------------------------------

@pytest.mark.parametrize(("method", "bidirectional"),
                         [("zoh", False), ("bilinear", False), ("euler", False), ("zoh", True)])
def test_layer_matches_float64_reference(method, bidirectional):
    """Each discretisation, and the backward pass (the same for every discretisation)."""
    layer = make(discretization=method, bidirectional=bidirectional)
    u = inputs((2, 50, H))
    y = layer(u)
    assert y.shape == u.shape and y.dtype == u.dtype
    for b in range(2):
        assert relative_error(y[b], reference_s5(layer, u[b], method=method)) < 1e-5
    assert relative_error(layer(u[0]), y[0]) < 1e-6  # unbatched (L, H) input


@pytest.mark.parametrize(("method", "activation"),
                         [("zoh", "half_glu"), ("bilinear", "none"), ("bilinear", "half_glu")])
def test_call_equals_recurrent(method, activation):
    """The options other than the default (zoh, none), which test_layer_contract.py runs
    (recurrent() is the loop of step())."""
    layer = make(16, 4, discretization=method, activation=activation)
    u = inputs((2, 200, H))
    assert relative_error(layer.recurrent(u), layer(u)) < 1e-5


@pytest.mark.parametrize("activation", ["gelu", "half_glu", "full_glu"])
def test_activation_is_applied_to_the_ssm_output(activation):
    plain, active = make(), make(activation=activation)
    u = inputs()
    g = jax.nn.gelu(plain(u))  # same key, so the same SSM parameters
    if activation == "gelu":
        expected = g
    elif activation == "half_glu":
        expected = g * jax.nn.sigmoid(active.gate(g))
    else:
        expected = active.value(g) * jax.nn.sigmoid(active.gate(g))
    assert relative_error(active(u), expected) < 1e-6


# --- per-observation step sizes -------------------------------------------------------------

def test_constant_steps_equal_fixed_step():
    """(Bidirectional step sizes: test_irregular_steps_bidirectional_reference.)"""
    layer = make()
    u = inputs()
    y = layer(u)
    assert relative_error(layer(u, step_sizes=jnp.ones(40)), y) < 1e-6
    assert relative_error(layer(u, step_sizes=jnp.ones((2, 40))), y) < 1e-6
    # step_sizes ≡ c is the same model with every Δ multiplied by c (the zero-shot rate change).
    c = 2.5
    scaled = layer(u, step_sizes=jnp.full(40, c))
    layer.log_step_size[...] = layer.log_step_size[...] + np.log(c)
    assert relative_error(scaled, layer(u)) < 1e-5
    assert relative_error(layer(u, step_sizes=1.0), layer(u)) < 1e-6


def test_irregular_steps_match_reference():
    layer = make(16, 2)
    u = inputs((2, 80, H))
    step_sizes = jax.random.uniform(jax.random.key(7), (2, 80), minval=0.2, maxval=5.0)
    y = layer(u, step_sizes=step_sizes)
    for b in range(2):
        assert relative_error(y[b], reference_s5(layer, u[b], step_sizes[b])) < 1e-5
    # (L,) step_sizes are shared by the batch.
    assert relative_error(layer(u, step_sizes=step_sizes[0])[1], layer(u[1], step_sizes=step_sizes[0])) < 1e-6


def test_irregular_steps_bidirectional_reference():
    layer = make(bidirectional=True)
    u = inputs((30, H))
    step_sizes = jax.random.uniform(jax.random.key(8), (30,), minval=0.5, maxval=3.0)
    assert relative_error(layer(u, step_sizes=step_sizes), reference_s5(layer, u, step_sizes)) < 1e-5


def test_parameter_shapes():
    layer = S5Layer(H, 8, rngs=nnx.Rngs(0))
    assert layer.Lambda.shape == (4, 2) and layer.C_tilde.shape == (H, 4, 2) and layer.log_step_size.shape == (4,)
    assert S5Layer(H, 8, bidirectional=True, rngs=nnx.Rngs(0)).C_tilde.shape == (H, 8, 2)
    assert S5Layer(H, 8, conj_sym=False, rngs=nnx.Rngs(0)).Lambda.shape == (8, 2)


# --- bad input ---------------------------------------------------------------------------

def test_bad_input():
    """S5's own checks (the shared ones, step sizes included, are in test_layer_contract.py):
    the message names the argument and the value."""
    with pytest.raises(ValueError, match=message("blocks", "3", "state_size", "10")):
        S5Layer(H, 10, blocks=3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=message("conj_sym", "state_size=6", "blocks=2")):  # 3 a block
        S5Layer(H, 6, blocks=2, rngs=nnx.Rngs(0))
    S5Layer(H, 6, blocks=2, conj_sym=False, rngs=nnx.Rngs(0))  # odd blocks are fine without it
    for option, value in [("activation", "relu"), ("discretization", "rk4"), ("conj_sym", "yes")]:
        with pytest.raises(ValueError, match=message(option, value)):
            make(**{option: value})


def test_impulse_response_is_the_mimo_convolution():
    # S5 is a convolution with an H×H matrix per lag: y_ℓ = Σ_j K̄_j u_{ℓ-j} + D u_ℓ.
    layer = make(16, 4)
    u = inputs((60, H))
    K = np.asarray(layer.impulse_response(60), np.float64)
    u64 = np.asarray(u, np.float64)
    expected = np.array([sum(K[j] @ u64[ell - j] for j in range(ell + 1)) for ell in range(60)])
    expected += np.asarray(layer.D[...], np.float64) * u64
    assert relative_error(layer(u), expected) < 1e-5
