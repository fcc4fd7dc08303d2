"""SSD (Mamba-2): the recurrence, the quadratic (masked attention) form and the chunked
algorithm of ``annotated_ssm.scan`` against a plain float64 NumPy loop and against each
other; the layer's call against its own step and a NumPy statement of its maths.

The layer contract itself is checked for "ssd" by tests/test_layer_contract.py.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import relative_error

from annotated_ssm.layers import SSMParam, get_layer
from annotated_ssm.layers.ssd import SSDLayer, default_head_dim
from annotated_ssm.scan import segment_sum, ssd_quadratic, ssd_recurrence, ssd_scan, ssd_step

BATCH, HEADS, HEAD_DIM, STATE = 2, 3, 4, 5


def ssd_loop(x, log_a, b, c, initial_state=None):
    """The SSD recurrence written out in float64 NumPy, one head and one step at a time:
    h_t = exp(log_a_t) h_{t-1} + x_t b_tᵀ, y_t = h_t c_t. Returns (y, final state)."""
    x, log_a, b, c = (np.asarray(z, np.float64) for z in (x, log_a, b, c))
    batch, length, heads, head_dim = x.shape
    h = (np.zeros((batch, heads, head_dim, b.shape[-1])) if initial_state is None
         else np.array(initial_state, np.float64))
    y = np.zeros(x.shape)
    for i in range(batch):
        for k in range(heads):
            for t in range(length):
                h[i, k] = np.exp(log_a[i, t, k]) * h[i, k] + np.outer(x[i, t, k], b[i, t, k])
                y[i, t, k] = h[i, k] @ c[i, t, k]
    return y, h


def problem(length, seed=0, dtype=np.float64, heads=HEADS):
    """Random inputs of a discretised SSD: x, log_a = Δ·A <= 0, b, c, an initial state."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(BATCH, length, heads, HEAD_DIM))
    # Decays from 0.37 to 0.999 per step: the memory spans chunks.
    log_a = -r.uniform(1e-3, 1.0, size=(BATCH, length, heads))
    b = r.normal(size=(BATCH, length, heads, STATE))
    c = r.normal(size=(BATCH, length, heads, STATE))
    h0 = r.normal(size=(BATCH, heads, HEAD_DIM, STATE))
    return tuple(z.astype(dtype) for z in (x, log_a, b, c, h0))


# One compiled program per shape (eagerly, each small operation would compile on its own).
scan_jit = jax.jit(ssd_scan, static_argnames=("chunk_size", "chunks_per_group"))
recurrence_jit = jax.jit(ssd_recurrence)
quadratic_jit = jax.jit(ssd_quadratic)

LENGTHS = [1, 37, 40]  # one step, a prime, a multiple of the chunk of 8
CHUNKS = [1, 8, 64]  # one step per chunk, a divisor of 40 (not of 37), longer than every length
# The most chunks at once: None, all (one program); 2, groups of at most 2 chunks in a loop
# (37 steps in chunks of 1: 19 groups of 2 chunks, padded to 38 steps; of 8: 3 groups of 2).
GROUPS = [None, 2]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-10}


def check(name, got, expected, dtype):
    error = relative_error(np.asarray(got, np.float64), expected)
    assert got.dtype == dtype, (name, got.dtype)
    assert error <= TOLERANCE[dtype], (name, error)
    return error


# --- each algorithm against the float64 loop -------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("chunk_size", CHUNKS)
@pytest.mark.parametrize("chunks_per_group", GROUPS)
def test_chunked_scan_equals_the_loop_with_a_state_in_and_out(length, chunk_size, chunks_per_group, dtype):
    x, log_a, b, c, h0 = problem(length, seed=length + chunk_size, dtype=dtype)
    y_ref, final_ref = ssd_loop(x, log_a, b, c, h0)
    run = functools.partial(scan_jit, chunk_size=chunk_size, chunks_per_group=chunks_per_group)
    with jax.enable_x64(dtype == np.float64):
        y, final = run(x, log_a, b, c, initial_state=h0)
        assert y.shape == x.shape and final.shape == h0.shape
        check("y", y, y_ref, dtype)
        check("final state", final, final_ref, dtype)
        # Without an initial state: the state starts at zero.
        y0, final0 = run(x, log_a, b, c)
        y0_ref, final0_ref = ssd_loop(x, log_a, b, c)
        check("y from zero", y0, y0_ref, dtype)
        check("final from zero", final0, final0_ref, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("length", [1, 37])
def test_recurrence_and_quadratic_form_equal_the_loop(length, dtype):
    x, log_a, b, c, h0 = problem(length, seed=10 + length, dtype=dtype)
    y_ref, final_ref = ssd_loop(x, log_a, b, c, h0)
    with jax.enable_x64(dtype == np.float64):
        y, final = recurrence_jit(x, log_a, b, c, initial_state=h0)
        check("recurrence y", y, y_ref, dtype)
        check("recurrence final state", final, final_ref, dtype)
        check("quadratic y", quadratic_jit(x, log_a, b, c), ssd_loop(x, log_a, b, c)[0], dtype)


def test_the_three_algorithms_agree_in_float32():
    x, log_a, b, c, _ = problem(37, seed=3, dtype=np.float32)
    y_rec, final_rec = recurrence_jit(x, log_a, b, c)
    y_quad = quadratic_jit(x, log_a, b, c)
    for chunk_size in CHUNKS:
        y, final = scan_jit(x, log_a, b, c, chunk_size=chunk_size)
        assert relative_error(y, y_rec) < 1e-5 and relative_error(y, y_quad) < 1e-5
        assert relative_error(final, final_rec) < 1e-5
    assert relative_error(y_quad, y_rec) < 1e-5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_groups_of_heads_share_b_and_c(dtype):
    """b, c of shape (batch, length, groups, state): head k reads group k // (heads / groups),
    the same as per-head vectors repeated (Mamba-2's order), in each algorithm and the step."""
    x, log_a, b, c, h0 = problem(37, seed=12, dtype=dtype, heads=4)
    b, c = b[:, :, :2], c[:, :, :2]  # 2 groups of 2 heads
    y_ref, final_ref = ssd_loop(x, log_a, np.repeat(b, 2, axis=2), np.repeat(c, 2, axis=2), h0)
    with jax.enable_x64(dtype == np.float64):
        y, final = scan_jit(x, log_a, b, c, chunk_size=8, initial_state=h0)
        check("scan y", y, y_ref, dtype)
        check("scan final", final, final_ref, dtype)
        y, final = recurrence_jit(x, log_a, b, c, initial_state=h0)
        check("recurrence y", y, y_ref, dtype)
        check("recurrence final", final, final_ref, dtype)
        y0_ref = ssd_loop(x, log_a, np.repeat(b, 2, axis=2), np.repeat(c, 2, axis=2))[0]
        check("quadratic y", quadratic_jit(x, log_a, b, c), y0_ref, dtype)
        state, y_t = ssd_step(h0, x[:, 0], log_a[:, 0], b[:, 0], c[:, 0])
        check("one step", y_t, ssd_loop(x[:, :1], log_a[:, :1], np.repeat(b[:, :1], 2, axis=2),
                                        np.repeat(c[:, :1], 2, axis=2), h0)[0][:, 0], dtype)


@pytest.mark.parametrize("chunks_per_group", GROUPS)
def test_padding_leaves_the_final_state_unchanged(chunks_per_group):
    """37 steps in chunks of 8 are padded with 3 steps (log_a = 0, b = 0), with 11 in 3 groups
    of 2 chunks: the final state is that of step 36, not of a decayed or driven step 39 (or
    47). Large decays make a wrong padding visible (exp(-1) per padded step)."""
    with jax.enable_x64(True):
        x, log_a, b, c, h0 = problem(37, seed=4)
        log_a = np.full_like(log_a, -1.0)
        _, final = scan_jit(x, log_a, b, c, chunk_size=8, initial_state=h0, chunks_per_group=chunks_per_group)
        assert relative_error(final, ssd_loop(x, log_a, b, c, h0)[1]) < 1e-12


@pytest.mark.parametrize("algorithm", ["scan", "recurrence"])
def test_two_pieces_with_the_state_carried_equal_one_pass(algorithm):
    with jax.enable_x64(True):
        x, log_a, b, c, h0 = problem(37, seed=5)
        run = (functools.partial(scan_jit, chunk_size=8) if algorithm == "scan" else recurrence_jit)
        y, final = run(x, log_a, b, c, initial_state=h0)
        cut = 13  # inside a chunk
        y1, state = run(*(z[:, :cut] for z in (x, log_a, b, c)), initial_state=h0)
        y2, final2 = run(*(z[:, cut:] for z in (x, log_a, b, c)), initial_state=state)
        assert relative_error(jnp.concatenate([y1, y2], axis=1), y) < 1e-12
        assert relative_error(final2, final) < 1e-12


@pytest.mark.parametrize("chunks_per_group", [None, 1, 2])
def test_gradients_of_the_chunked_scan_match_central_differences_float64(chunks_per_group):
    """The directional derivative wrt every input (x, log_a, b, c, the initial state) against
    central differences, 11 steps in chunks of 4 (two full chunks and a padded one): in one
    program, in 3 groups of 1 chunk, in 2 groups of 2 chunks (padded to 16 steps)."""
    with jax.enable_x64(True):
        inputs = problem(11, seed=6)
        weights = jnp.asarray(np.random.default_rng(7).normal(size=inputs[0].shape))

        @jax.jit
        def loss(*inputs):
            y, final = ssd_scan(*inputs[:4], chunk_size=4, initial_state=inputs[4],
                                chunks_per_group=chunks_per_group)
            return jnp.sum(weights * jnp.sin(y)) + jnp.sum(final ** 2)

        grads = jax.grad(loss, argnums=tuple(range(5)))(*inputs)
        r = np.random.default_rng(8)
        directions = [r.normal(size=z.shape) for z in inputs]
        for g in grads:
            assert np.all(np.isfinite(g)) and np.any(g != 0)
        predicted = sum(float(jnp.sum(g * d)) for g, d in zip(grads, directions))
        eps = 1e-5
        shifted = lambda s: [z + s * d for z, d in zip(inputs, directions)]  # noqa: E731
        fd = (float(loss(*shifted(eps))) - float(loss(*shifted(-eps)))) / (2 * eps)
        assert abs(predicted - fd) < 1e-7 * abs(fd), (predicted, fd)


def test_segment_sum_is_accurate_where_a_difference_of_cumulative_sums_is_not():
    """Strong decay for 32 steps, then weak: float32 cumulative sums reach -3200, where their
    spacing (2.4e-4) is larger than the weak steps' sums (1e-3 per step). The segment sums of
    the weak steps are their own few terms: float32-accurate."""
    log_a = np.concatenate([np.full(32, -100.0), np.full(32, -1e-3)])
    exact = np.full((64, 64), -np.inf)
    for t in range(64):
        for s in range(t + 1):
            exact[t, s] = np.sum(log_a[s + 1:t + 1])
    stable = np.asarray(segment_sum(jnp.asarray(log_a, jnp.float32)), np.float64)
    lower = np.tril(np.ones((64, 64), bool))
    assert np.all(stable[~lower] == -np.inf)
    weak = np.ix_(range(32, 64), range(32, 64))
    weak_lower = np.tril(np.ones((32, 32), bool))
    assert relative_error(np.exp(stable[weak])[weak_lower], np.exp(exact[weak])[weak_lower]) < 1e-6
    cumulative = np.cumsum(log_a.astype(np.float32))
    naive = np.exp((cumulative[32:, None] - cumulative[None, 32:]).astype(np.float64))
    assert relative_error(naive[weak_lower], np.exp(exact[weak])[weak_lower]) > 1e-5
    with jax.enable_x64(True):
        assert relative_error(np.exp(segment_sum(jnp.asarray(log_a))), np.exp(exact)) < 1e-14


def test_chunked_scan_is_float32_accurate_after_a_strong_decay():
    """The segment sums inside ssd_scan: 32 steps of log_a = -100, then 32 of -1e-3, in one
    chunk. A difference of float32 cumulative sums (-3200 and less) would put errors of
    1e-4 on the weak steps' decays; the stable segment sums keep float32 accuracy."""
    x, log_a, b, c, _ = problem(64, seed=11, dtype=np.float32)
    log_a[:, :32], log_a[:, 32:] = -100.0, -1e-3
    y, final = scan_jit(x, log_a, b, c, chunk_size=64)
    y_ref, final_ref = ssd_loop(x, log_a, b, c)
    check("y", y, y_ref, np.float32)
    check("final state", final, final_ref, np.float32)


def test_shapes_are_checked():
    x, log_a, b, c, h0 = problem(5)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, length, heads, head_dim\)"):
        ssd_scan(x[0], log_a, b, c, chunk_size=4)
    with pytest.raises(ValueError, match="log_a must have shape"):
        ssd_scan(x, log_a[..., :1], b, c, chunk_size=4)
    with pytest.raises(ValueError, match=r"groups dividing heads = 3"):
        ssd_scan(x, log_a, b[:, :, :2], c[:, :, :2], chunk_size=4)
    with pytest.raises(ValueError, match="c must have b's shape"):
        ssd_quadratic(x, log_a, b, c[..., :2])
    with pytest.raises(ValueError, match="initial_state must have shape"):
        ssd_recurrence(x, log_a, b, c, initial_state=h0[0])
    with pytest.raises(ValueError, match="chunk_size"):
        ssd_scan(x, log_a, b, c, chunk_size=0)
    for value in (0, 2.0, True):
        with pytest.raises(ValueError, match=f"chunks_per_group must be an integer >= 1 or None; got {value!r}"):
            ssd_scan(x, log_a, b, c, chunk_size=4, chunks_per_group=value)


# --- groups of chunks: the long-sequence path ---------------------------------------------------


def test_groups_of_chunks_equal_one_program_values_and_gradients_float32():
    """The loop over groups of chunks computes what the one program does: y, the final state
    and the gradient wrt every input, to float32 rounding (~1e-6 relative), for groups that
    divide the chunks (6 chunks of 8 in groups of 2 and 3) and that do not (4: 2 groups of
    3, padded by a chunk), with b and c shared by 2 groups of heads."""
    x, log_a, b, c, h0 = problem(48, seed=13, dtype=np.float32, heads=4)
    b, c = b[:, :, :2], c[:, :, :2]
    weights = jnp.asarray(np.random.default_rng(14).normal(size=x.shape), jnp.float32)

    def outputs(chunks_per_group):
        def loss(*inputs):
            y, final = ssd_scan(*inputs[:4], chunk_size=8, initial_state=inputs[4],
                                chunks_per_group=chunks_per_group)
            return jnp.sum(weights * jnp.sin(y)) + jnp.sum(final ** 2), (y, final)

        grads, (y, final) = jax.jit(jax.grad(loss, argnums=tuple(range(5)), has_aux=True))(x, log_a, b, c, h0)
        return (y, final) + grads

    one_program = outputs(None)
    for chunks_per_group in (2, 3, 4):
        for name, got, expected in zip(["y", "final", "dx", "dlog_a", "db", "dc", "dh0"],
                                       outputs(chunks_per_group), one_program):
            assert got.dtype == jnp.float32
            assert relative_error(got, expected) < 2e-6, (chunks_per_group, name, relative_error(got, expected))


def test_loop_only_above_chunks_per_group():
    """At most chunks_per_group chunks: one program without a loop (chapter 10 counts its
    FLOPs with XLA's cost analysis, which counts a loop's body once); more: a loop."""
    x, log_a, b, c, _ = problem(64, dtype=np.float32)

    def text(**options):
        return jax.jit(lambda *a: ssd_scan(*a, **options)[0]).lower(x, log_a, b, c).as_text(dialect="hlo")

    assert " while(" not in text(chunk_size=8, chunks_per_group=8)
    assert " while(" not in text(chunk_size=8, chunks_per_group=None)
    assert " while(" in text(chunk_size=8, chunks_per_group=7)
    assert " while(" not in text(chunk_size=2)  # 32 chunks: the default, SSD_CHUNKS_PER_GROUP
    assert " while(" in text(chunk_size=1)


def test_groups_of_chunks_plan_less_memory():
    """XLA's plan (temporaries + outputs of the compiled fwd+bwd, nothing run) of 4096 steps in
    256 chunks of 16: in groups of 16 chunks, each recomputed in the backward pass, well under
    half of the one program's, whose blocks of every chunk are kept for the backward pass."""
    shapes = [(1, 4096, 2, 16), (1, 4096, 2), (1, 4096, 1, 16), (1, 4096, 1, 16)]
    inputs = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes]

    def plan(chunks_per_group):
        loss = lambda *a: jnp.sum(ssd_scan(*a, chunk_size=16, chunks_per_group=chunks_per_group)[0] ** 2)  # noqa: E731
        analysis = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3))).lower(*inputs).compile().memory_analysis()
        if analysis is None:
            pytest.skip("this backend gives no memory analysis")
        return analysis.temp_size_in_bytes + analysis.output_size_in_bytes

    assert plan(16) < 0.5 * plan(None), (plan(16), plan(None))


# --- the layer ---------------------------------------------------------------------------------

D_MODEL = 8


def make(**options):
    options = {"head_dim": 2, "n_groups": 2, "chunk_size": 8, "rngs": nnx.Rngs(0), **options}
    return SSDLayer(D_MODEL, 4, **options)


def layer_loop(layer, u):
    """The layer's maths in float64 NumPy from its parameters: heads of P channels, group g
    serving heads g·(heads/G) … (g+1)·(heads/G) - 1 (Mamba-2's order)."""
    u = np.asarray(u, np.float64)
    W = np.asarray(layer.x_proj.kernel[...], np.float64)
    G, N, P, heads = layer.n_groups, layer.state_size, layer.head_dim, layer.n_heads
    A = -np.exp(np.asarray(layer.log_A_real[...], np.float64))
    step0 = np.exp(np.asarray(layer.log_step_size[...], np.float64))
    bias = np.log(np.expm1(step0))
    D = np.asarray(layer.D[...], np.float64)
    y = np.zeros(u.shape)
    h = np.zeros(u.shape[:1] + (heads, P, N))
    for t in range(u.shape[1]):
        projected = u[:, t] @ W
        B, C = projected[:, :G * N].reshape(-1, G, N), projected[:, G * N:2 * G * N].reshape(-1, G, N)
        step = np.logaddexp(0, projected[:, 2 * G * N:] + bias)  # softplus, (batch, heads)
        for k in range(heads):
            g = k // (heads // G)
            x = u[:, t, k * P:(k + 1) * P]
            h[:, k] = (np.exp(step[:, k] * A[k])[:, None, None] * h[:, k]
                       + (step[:, k, None] * x)[:, :, None] * B[:, g, None, :])
            y[:, t, k * P:(k + 1) * P] = np.einsum("bpn,bn->bp", h[:, k], C[:, g]) + D[k * P:(k + 1) * P] * x
    return y


def test_layer_equals_its_maths_in_float64():
    with jax.enable_x64(True):
        layer = make()
        u = np.random.default_rng(9).normal(size=(2, 37, D_MODEL))
        y = layer(u)
        assert y.dtype == jnp.float64
        assert relative_error(y, layer_loop(layer, u)) < 1e-10


def test_layer_call_equals_stepping_from_init_state_float32():
    layer = make()
    u = jax.random.normal(jax.random.key(1), (2, 37, D_MODEL))
    y = layer(u)
    A = layer.discrete_system()
    step = nnx.jit(lambda m, state, u_t, A: m.step(state, u_t, A))
    state = layer.init_state(2)
    assert state.shape == (2, layer.n_heads, layer.head_dim, layer.state_size)
    outputs = []
    for t in range(u.shape[1]):
        state, y_t = step(layer, state, u[:, t], A)
        outputs.append(y_t)
    assert relative_error(jnp.stack(outputs, axis=1), y) < 1e-5


def test_bidirectional_adds_the_same_ssm_backwards():
    causal, both = make(), make(bidirectional=True)
    u = jax.random.normal(jax.random.key(2), (2, 37, D_MODEL))
    skip = causal.D[...] * u
    backwards = jnp.flip(causal(jnp.flip(u, axis=1)), axis=1) - skip
    assert relative_error(both(u), causal(u) + backwards) < 1e-5


def test_parameters_and_initialisation():
    assert get_layer("ssd") is SSDLayer
    layer = SSDLayer(128, 16, rngs=nnx.Rngs(0))
    assert (layer.head_dim, layer.n_heads, layer.n_groups, layer.chunk_size) == (64, 2, 1, 64)
    assert isinstance(layer.log_A_real, SSMParam) and isinstance(layer.log_step_size, SSMParam)
    assert layer.log_A_real.shape == layer.log_step_size.shape == (2,)
    assert not isinstance(layer.x_proj.kernel, SSMParam) and not isinstance(layer.D, SSMParam)
    many = SSDLayer(256, 4, head_dim=1, rngs=nnx.Rngs(1))  # 256 heads: the ranges are filled
    A = -np.asarray(many.eigenvalues())
    assert np.all((A >= 1) & (A <= 16)) and A.min() < 2 and A.max() > 15
    # Where the projection is zero, Δ is exp(log_step_size), log-uniform in [step_min, step_max].
    step, B, C = many.selection(jnp.zeros(256))
    np.testing.assert_allclose(step, many.step_sizes(), rtol=1e-5)
    assert B.shape == C.shape == (1, 4)  # one group


def test_head_dim_default_and_errors():
    assert [default_head_dim(d) for d in (3, 64, 100, 128, 192, 67)] == [3, 64, 50, 64, 64, 1]
    with pytest.raises(ValueError, match="head_dim must divide d_model = 8"):
        SSDLayer(8, 4, head_dim=3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="n_groups must divide the number of heads, 4"):
        SSDLayer(8, 4, head_dim=2, n_groups=3, rngs=nnx.Rngs(0))
    for option, value in [("head_dim", 0), ("n_groups", 0), ("chunk_size", 0), ("chunk_size", 2.5)]:
        with pytest.raises(ValueError, match=option):
            SSDLayer(8, 4, **{option: value}, rngs=nnx.Rngs(0))


def test_groups_of_chunks_keep_every_contraction_at_full_precision():
    """tests/test_precision.py walks ssd_scan's one program; the loop over groups (a scan of a
    checkpointed body), forward and backward, is walked here."""
    from test_precision import assert_full_precision

    x, log_a, b, c, h0 = problem(37, dtype=np.float32)

    def loss(*inputs):
        y, final = ssd_scan(*inputs[:4], chunk_size=4, initial_state=inputs[4], chunks_per_group=3)
        return jnp.sum(y ** 2) + jnp.sum(final ** 2)

    assert_full_precision(lambda *a: ssd_scan(*a, chunk_size=4, chunks_per_group=3), x, log_a, b, c)
    assert_full_precision(jax.grad(loss, argnums=tuple(range(5))), x, log_a, b, c, h0)
