"""S4D: the Vandermonde kernel (annotated_ssm.kernels) and the S4D layer (chapter 6)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import direct_causal_conv, message, relative_error

from annotated_ssm import discretize, kernels
from annotated_ssm.initialization import DIAGONAL_ABLATIONS, DIAGONAL_INITS, diagonal_init
from annotated_ssm.layers.s4d import S4DLayer
from annotated_ssm.model import CausalSequenceModel


# One step size per channel across the usual initialisation range [1e-3, 1e-1].
STEPS = np.array([[1e-3], [1e-2], [1e-1]], np.float32)


def naive_reference(A, B, C, step, L, method, conjugate=True):
    """float64 kernel of the same float32 parameters: discretise in float64, then C Ā^ℓ B̄."""
    A, B, C, step = (np.asarray(x).astype(np.result_type(x, np.float64)) for x in (A, B, C, step))
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize.discretize_diagonal(A, B, step, method))
    K = kernels.naive_kernel(A_bar, B_bar, np.broadcast_to(C, A_bar.shape), L, diagonal=True).real
    return 2 * K if conjugate else K


def float32_inputs(A, seed=0, channels=3):
    rng = np.random.default_rng(seed)
    M = A.shape[-1]
    if np.iscomplexobj(A):
        C = (rng.standard_normal((channels, M)) + 1j * rng.standard_normal((channels, M))) / np.sqrt(2)
        return A.astype(np.complex64), np.ones(M, np.complex64), C.astype(np.complex64)
    return A.astype(np.float32), np.ones(M, np.float32), rng.standard_normal((channels, M)).astype(np.float32)


# float32 tolerance. The phase of Ā_n^ℓ is ℓ·θ_n with θ_n rounded to float32, so at ℓ = 4096
# it is off by up to ~4096·π·6e-8 ≈ 8e-4 rad whatever the algorithm; weighted by the small
# B̄_n of the fast modes this gives the measured 4e-5 (S4D-Quad, bilinear) at worst, 1e-5 for
# most initialisations. A real bug (a wrong power, a missing factor) gives errors of order 1.
TOL = 5e-5


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
@pytest.mark.parametrize("name", DIAGONAL_INITS)
def test_matches_naive_kernel_every_init(name, method):
    A = diagonal_init(name, 64, key=jax.random.key(1))
    A, B, C = float32_inputs(A)
    conjugate = name != "real"
    K = kernels.vandermonde_kernel(A, B, C, STEPS, 4096, method=method, conjugate=conjugate)
    assert K.shape == (3, 4096) and K.dtype == jnp.float32
    expected = naive_reference(A, B, C, STEPS, 4096, method, conjugate)
    for h in range(3):
        assert relative_error(K[h], expected[h]) < TOL, (name, method, h)


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
@pytest.mark.parametrize("label", list(DIAGONAL_ABLATIONS))
def test_matches_naive_kernel_ablations(label, method):
    name, options = DIAGONAL_ABLATIONS[label]
    A, B, C = float32_inputs(diagonal_init(name, 64, key=jax.random.key(2), **options))
    K = kernels.vandermonde_kernel(A, B, C, STEPS, 4096, method=method)
    expected = naive_reference(A, B, C, STEPS, 4096, method)
    # Imaginary parts × 100 reach 1.3e5: the float32 phase error above is 100 times larger
    # per step (measured 7e-5), so that one ablation gets three times the tolerance.
    tol = 3 * TOL if options.get("imag_scale", 1) > 1 else TOL
    for h in range(3):
        assert relative_error(K[h], expected[h]) < tol, (label, method, h)


def test_euler_and_float64():
    A, B, C = float32_inputs(diagonal_init("lin", 16))
    with jax.enable_x64(True):
        for method in ("euler", "bilinear", "zoh"):
            K = kernels.vandermonde_kernel(A.astype(np.complex128), B, C.astype(np.complex128),
                                           STEPS.astype(np.float64), 500, method=method)
            assert K.dtype == jnp.float64
            assert relative_error(K, naive_reference(A, B, C, STEPS, 500, method)) < 1e-12


def test_conjugate_symmetry_is_twice_the_real_part():
    """Keeping one of each pair and taking 2·Re equals the full complex sum over both."""
    A, B, C = float32_inputs(diagonal_init("inv", 32), channels=1)
    with jax.enable_x64(True):
        A, B, C = (x.astype(np.complex128) for x in (A, B, C))
        half = kernels.vandermonde_kernel(A, B, C, 0.01, 300)
        full = kernels.vandermonde_kernel(np.concatenate([A, A.conj()]), np.concatenate([B, B.conj()]),
                                          np.concatenate([C, C.conj()], -1), 0.01, 300, conjugate=False)
    np.testing.assert_allclose(half, full, rtol=1e-12, atol=1e-12)


def test_equals_dense_system():
    """The diagonal kernel is the kernel of the dense real SSM it diagonalises (V Λ V⁻¹)."""
    rng = np.random.default_rng(3)
    A_dense = rng.standard_normal((6, 6)) - 3 * np.eye(6)
    B, C = rng.standard_normal(6), rng.standard_normal(6)
    lam, V = np.linalg.eig(A_dense)
    B_diag, C_diag = np.linalg.solve(V, B), C @ V
    for method in ("zoh", "bilinear"):
        from reference import discretize_dense

        A_bar, B_bar = discretize_dense(A_dense, B, 0.05, method)
        expected = kernels.naive_kernel(A_bar, B_bar, C, 200)
        with jax.enable_x64(True):
            K = kernels.vandermonde_kernel(lam, B_diag, C_diag, 0.05, 200, method=method, conjugate=False)
        assert relative_error(K, expected) < 1e-10


def test_chunked_equals_single_block():
    """Cutting the time axis into chunks (bounded memory) changes nothing, including a last
    partial chunk."""
    A, B, C = float32_inputs(diagonal_init("legs", 64))
    full = kernels.vandermonde_kernel(A, B, C, STEPS, 1000)
    chunked = kernels.vandermonde_kernel(A, B, C, STEPS, 1000, max_elements=3 * 32 * 300)
    np.testing.assert_allclose(chunked, full, rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(full))))


def test_singular_bilinear_eigenvalue():
    """ΔA = -2 makes the bilinear Ā exactly 0: the kernel is B̄ C at ℓ = 0, then 0 (no NaN)."""
    one = np.ones(1, np.float32)
    K = kernels.vandermonde_kernel(np.array([-20.0], np.float32), one, one, 0.1, 4, method="bilinear",
                                   conjugate=False)
    np.testing.assert_allclose(K, [0.05, 0, 0, 0], atol=1e-7)


# --- the layer --------------------------------------------------------------------------


def make_layer(**kwargs):
    options = {"d_model": 4, "state_size": 16, "rngs": nnx.Rngs(0)}
    options.update(kwargs)
    return S4DLayer(**options)


@pytest.mark.parametrize(("init", "discretization"),
                         [("lin", "zoh"), ("real", "bilinear"), ("rand", "zoh"),
                          ("real", "euler")])  # Euler is stable here: |1 + ΔA| < 1 for A = -1..-16, Δ <= 0.1
def test_recurrent_step_reproduces_full_call(init, discretization):
    """The options other than the default (legs, bilinear), which test_layer_contract.py runs."""
    layer = make_layer(init=init, discretization=discretization)
    u = jax.random.normal(jax.random.key(1), (2, 300, 4), jnp.float32)
    y = layer(u)
    assert y.shape == u.shape and y.dtype == jnp.float32
    assert relative_error(layer.recurrent(u), y) < 1e-5


def test_layer_equals_direct_convolution():
    """layer(u) = K̄ * u + D u with the causal convolution done by direct float64 sums."""
    layer = make_layer(init="inv", step_min=0.01, step_max=0.1)
    u = np.asarray(jax.random.normal(jax.random.key(2), (100, 4), jnp.float32))
    K = np.asarray(layer.kernel(100), np.float64)
    expected = direct_causal_conv(u.T, K).T + np.asarray(layer.D[...]) * u
    assert relative_error(layer(u), expected) < 1e-5


def test_layer_parameterisation():
    layer = make_layer(init="legs", state_size=32)
    A = layer.eigenvalues()
    assert A.shape == (4, 16)
    np.testing.assert_allclose(A.real, -0.5, rtol=1e-6)
    np.testing.assert_allclose(A.imag[0], diagonal_init("legs", 32).imag, rtol=1e-6)
    soft = make_layer(init="legs", state_size=32, real_transform="softplus")
    np.testing.assert_allclose(soft.eigenvalues(), A, rtol=1e-6)
    free = make_layer(init="legs", state_size=32, real_transform="none")
    np.testing.assert_allclose(free.eigenvalues(), A, rtol=1e-6)
    np.testing.assert_array_equal(layer.B[...][..., 0], 1.0)
    C = layer.C[...]
    assert C.shape == (4, 16, 2)
    assert 0.7 < float(jnp.mean(jnp.sum(C**2, -1))) < 1.3  # E|C|² = 1
    real = make_layer(init="real", state_size=7)
    np.testing.assert_allclose(real.eigenvalues()[0], -np.arange(1, 8), rtol=1e-6)
    # The SSM parameters are tagged for the training loop; freezing B removes it from them.
    from annotated_ssm.layers import SSMParam

    names = {path[-1] for path, _ in nnx.to_flat_state(nnx.state(layer, SSMParam))}
    assert names == {"log_A_real", "A_imag", "B", "log_step_size"}
    frozen = make_layer(train_B=False)
    assert "B" not in {path[-1] for path, _ in nnx.to_flat_state(nnx.state(frozen, nnx.Param))}


def test_bidirectional():
    layer = make_layer(bidirectional=True)
    assert layer.kernel(50).shape == (2, 4, 50)
    u = jax.random.normal(jax.random.key(4), (50, 4), jnp.float32)
    # y = K̄₀ * u + flip(K̄₁ * flip(u)) + D u, with direct float64 convolutions.
    K = np.asarray(layer.kernel(50), np.float64)
    ut = np.asarray(u, np.float64).T
    expected = direct_causal_conv(ut, K[0]) + direct_causal_conv(ut[:, ::-1], K[1])[:, ::-1]
    expected = expected.T + np.asarray(layer.D[...], np.float64) * ut.T
    assert relative_error(layer(u), expected) < 1e-5


def test_layer_bad_input():
    """S4D's own checks (the shared ones are in test_layer_contract.py): the message names the
    argument and the value."""
    with pytest.raises(ValueError, match=message("state_size", "even", 15)):
        make_layer(state_size=15)
    make_layer(state_size=15, init="real")  # N real states: odd is fine
    for option, value in [("init", "hippo"), ("discretization", "rk4"), ("real_transform", "relu6"),
                          ("train_B", "no")]:
        with pytest.raises(ValueError, match=message(option, value)):
            make_layer(**{option: value})


def test_init_options_are_checked():
    """A key the initialisation does not take, a flag that is not a bool (``bool("no")`` is
    True: "no" must be refused, not read as yes), a number that is not a real number: each
    names the option and the value (was: TypeError, or a flag silently on)."""
    with pytest.raises(ValueError, match=message("init_options", "x", "real_part")):
        make_layer(init_options={"x": b"yes"})
    with pytest.raises(ValueError, match=message("init_options", "key")):
        make_layer(init_options={"key": 1})
    with pytest.raises(TypeError, match=message("init_options", "list")):
        make_layer(init_options=[("real_part", -1.0)])
    for flag in ("random_real", "random_imag"):
        for value in ("no", "False", 0, 1, None):
            with pytest.raises(ValueError, match=message(flag, value)):
                make_layer(init="inv", init_options={flag: value})
    for option, value in [("real_part", "-0.5"), ("real_part", True), ("imag_scale", "1"), ("imag_scale", None)]:
        with pytest.raises(ValueError, match=message(option, value)):
            make_layer(init="inv", init_options={option: value})
    with pytest.raises(ValueError, match=message("init_options", "x")):  # and through a model
        CausalSequenceModel("s4d", 1, 1, init_options={"x": 1}, d_model=8, n_layers=1, state_size=8,
                            rngs=nnx.Rngs(0))
    layer = make_layer(init="inv", init_options={"random_real": True, "imag_scale": 2.0})
    assert np.all(np.asarray(layer.eigenvalues().real) < 0)


@pytest.mark.parametrize("name", ["legs", "lin"])
def test_equals_s4_kernel_without_low_rank_term(name):
    """S4D is S4 with P = 0: S4's Cauchy/Woodbury kernel (bilinear) with the low-rank part set
    to zero equals the Vandermonde kernel. S4 learns C̃ = C (I - Ā^L), so pass that."""
    A, B, C = float32_inputs(diagonal_init(name, 64))
    L = 1024
    with jax.enable_x64(True):
        A64, B64, C64, step = A.astype(np.complex128), B.astype(np.complex128), C.astype(np.complex128), STEPS
        A_bar, _ = discretize.discretize_diagonal(A64, B64, step.astype(np.float64), "bilinear")
        C_tilde = C64 * (1 - np.asarray(A_bar) ** L)
        K_s4 = kernels.s4_kernel(A64, np.zeros_like(A64), B64, C_tilde, step[:, 0].astype(np.float64), L)
        K_s4d = kernels.vandermonde_kernel(A64, B64, C64, step.astype(np.float64), L, method="bilinear")
        assert relative_error(K_s4, K_s4d) < 1e-9
    # And in float32, the two fast algorithms agree to float32 accuracy.
    A_bar32 = np.asarray(discretize.discretize_diagonal(A, B, STEPS, "bilinear")[0])
    K32 = kernels.s4_kernel(A, np.zeros_like(A), B, (C * (1 - A_bar32.astype(np.complex128) ** L)).astype(np.complex64),
                            STEPS[:, 0], L)
    assert relative_error(K32, K_s4d) < 1e-4
