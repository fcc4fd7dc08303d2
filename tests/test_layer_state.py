"""State in, state out (issue 41): ``layer(u, state=..., return_state=True)`` for every causal
layer in ``LAYERS``.

A sequence cut into pieces of any sizes, with the state carried from piece to piece, gives the
output and the final state of one pass; the final state is the one ``step`` reaches; a given
state is continued as the stepped recurrence continues it; bad states are refused by name;
bidirectional layers refuse. Small sizes: the whole file runs in about a minute on one core.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from reference import run_examples

from annotated_ssm.layers import LAYERS, base

H, N, L = 3, 8, 40
#: Pieces of the sequence: one step, a prime, and one longer than the others together.
CHUNKS = (1, 7, 32)
#: Options that make the fast paths do their interesting work at these small sizes: S4 calls
#: longer than its reference length (C̃ converted by doubling), S6 and SSD in several chunks
#: with a padded last one. DSS-softmax refuses states (tested below); its exp variant streams.
OPTIONS = {"s4": {"kernel_length": 16}, "dss": {"variant": "exp"}, "s6": {"chunk_size": 6},
           "ssd": {"chunk_size": 6}}
NAMES = list(LAYERS)


def skeleton_layer():
    """The example layer of base.py's docstring, from running its examples."""
    return run_examples(base, "layers/base.py")["RealDiagonalLayer"]


CLASSES = {**LAYERS, "skeleton": skeleton_layer()}


def make(name, **kwargs):
    return CLASSES[name](H, N, rngs=nnx.Rngs(0), **{**OPTIONS.get(name, {}), **kwargs})


def error(got, expected) -> float:
    """max |got - expected| / max |expected| over every leaf of two pytrees (integers exact)."""
    worst = 0.0
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
        if np.issubdtype(e.dtype, np.integer):
            assert np.array_equal(g, e)
            continue
        worst = max(worst, float(np.max(np.abs(g - e)) / max(np.max(np.abs(e)), 1e-30)))
    return worst


def random_state(layer, batch_shape, dtype, seed=7):
    """A state of init_state's structure with random entries (a time index, if any, of 5)."""
    zero = layer.init_state(batch_shape, dtype=dtype)
    leaves, tree = jax.tree.flatten(zero)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    filled = []
    for key, leaf in zip(keys, leaves):
        if jnp.issubdtype(leaf.dtype, jnp.integer):
            filled.append(jnp.full(leaf.shape, 5, leaf.dtype))
        elif jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            real = jax.random.normal(key, leaf.shape + (2,), jnp.finfo(leaf.dtype).dtype)
            filled.append(jax.lax.complex(real[..., 0], real[..., 1]))
        else:
            filled.append(jax.random.normal(key, leaf.shape, leaf.dtype))
    return jax.tree.unflatten(tree, filled)


def stepped(layer, state, u):
    """The recurrence from ``state``, one ``step`` after another: (y, final state)."""
    system = layer.discrete_system(u.shape[-2], dtype=u.dtype)

    @nnx.jit
    def run(layer, state, u, system):
        final, y = jax.lax.scan(lambda s, u_t: layer.step(s, u_t, system), state, jnp.moveaxis(u, -2, 0))
        return jnp.moveaxis(y, 0, -2), final

    return run(layer, state, u, system)


def chunked(layer, state, u, sizes=CHUNKS):
    """The sequence in pieces of ``sizes``, the state carried: (y, final state)."""
    pieces, start = [], 0
    for size in sizes:
        y, state = layer(u[..., start:start + size, :], state=state, return_state=True)
        pieces.append(y)
        start += size
    assert start == u.shape[-2]
    return jnp.concatenate(pieces, axis=-2), state


def same_kind(a, b) -> bool:
    """Same structure, shapes and dtypes."""
    kind = lambda tree: (jax.tree.structure(tree), [(np.shape(x), np.asarray(x).dtype)  # noqa: E731
                                                     for x in jax.tree.leaves(tree)])
    return kind(a) == kind(b)


def check_streaming(name, dtype, tolerance, *, full: bool):
    """Pieces, one pass and steps, from the zero state and from a random one; ``full`` adds
    the call without a state and one unbatched sequence (float32 only: fewer compilations)."""
    layer = make(name)
    u = jax.random.normal(jax.random.key(1), (2, L, H), dtype)
    zero = layer.init_state(2, dtype=dtype)
    errors = {}
    for label, start in (("zero", zero), ("given", random_state(layer, (2,), dtype))):
        y, final = layer(u, state=start, return_state=True)
        assert same_kind(final, zero)
        y_c, final_c = chunked(layer, start, u)
        y_r, final_r = stepped(layer, start, u)
        errors.update({f"{label}: chunked y": error(y_c, y), f"{label}: chunked final": error(final_c, final),
                       f"{label}: stepped y": error(y_r, y), f"{label}: stepped final": error(final_r, final)})
        if label == "zero":
            y_zero, final_zero = y, final
    assert error(y, y_zero) > 100 * tolerance  # the given state is used
    if full:
        y_none, final_none = layer(u, return_state=True)  # state=None is the zero state
        errors["no state: y"], errors["no state: final"] = error(y_none, y_zero), error(final_none, final_zero)
        one = jax.tree.map(lambda x: x[0] if x.ndim else x, start)
        y_one, final_one = layer(u[0], state=one, return_state=True)
        errors["unbatched y"] = error(y_one, y[0])
        errors["unbatched final"] = error(final_one, jax.tree.map(lambda x: x[0] if x.ndim else x, final))
    print(name, np.dtype(dtype).name, {k: f"{v:.1e}" for k, v in errors.items()})
    assert max(errors.values()) < tolerance, errors


@pytest.mark.parametrize("name", NAMES + ["skeleton"])
def test_pieces_equal_one_pass_and_steps_float32(name):
    check_streaming(name, jnp.float32, 1e-5, full=True)


@pytest.mark.parametrize("name", NAMES)
def test_pieces_equal_one_pass_and_steps_float64(name):
    with jax.enable_x64(True):
        check_streaming(name, jnp.float64, 1e-10, full=False)


@pytest.mark.parametrize("name", NAMES)
def test_state_dtypes_follow_steps_rules(name):
    """A float64 state with float32 input is accepted (as step accepts it) and the final state
    comes back in init_state's dtypes for u's computation dtype; 16-bit input computes in float32."""
    with jax.enable_x64(True):
        layer = make(name)
        u = jax.random.normal(jax.random.key(1), (2, 5, H), jnp.float32)
        state64 = layer.init_state(2, dtype=jnp.float64)
        y, final = layer(u, state=state64, return_state=True)
        assert y.dtype == jnp.float32
        expected = layer.init_state(2, dtype=jnp.float32)
        assert [x.dtype for x in jax.tree.leaves(final)] == [x.dtype for x in jax.tree.leaves(expected)]
        y16, final16 = layer(u.astype(jnp.bfloat16), state=expected, return_state=True)
        assert y16.dtype == jnp.bfloat16
        assert [x.dtype for x in jax.tree.leaves(final16)] == [x.dtype for x in jax.tree.leaves(expected)]


@pytest.mark.parametrize("name", NAMES)
def test_bad_states_are_refused_by_name(name):
    layer = make(name)
    u = jnp.ones((2, 5, H))
    good = layer.init_state(2)
    wrong_batch = layer.init_state(3)
    leaves, tree = jax.tree.flatten(good)
    wrong_dtype = jax.tree.unflatten(tree, [jnp.real(x).astype(jnp.int8) if jnp.issubdtype(x.dtype, jnp.inexact)
                                            else x for x in leaves])
    not_finite = jax.tree.unflatten(tree, [x.at[(0,) * x.ndim].set(jnp.nan) if jnp.issubdtype(x.dtype, jnp.inexact)
                                           else x for x in leaves])
    for bad in (wrong_batch, wrong_dtype, not_finite, (good, good), "state", jax.tree.leaves(good)[0][..., :1]):
        with pytest.raises(ValueError, match="state"):
            layer(u, state=bad)
    with pytest.raises(ValueError, match="return_state"):
        layer(u, return_state="yes")


@pytest.mark.parametrize("name", NAMES)
def test_bidirectional_layers_refuse_state(name):
    layer = make(name, bidirectional=True)
    u = jnp.ones((2, 5, H))
    assert not layer.accepts_state and make(name).accepts_state
    for kwargs in ({"state": None, "return_state": True}, {"state": make(name).init_state(2)}):
        with pytest.raises(ValueError, match="bidirectional=True") as info:
            layer(u, **kwargs)
        assert str(info.value).count(". ") == 0  # one sentence
    layer(u)  # the plain call still works


def test_dss_softmax_refuses_state():
    """The softmax kernel is normalised over the call's length: a piece is another model."""
    layer = make("dss", variant="softmax")
    assert not layer.accepts_state
    with pytest.raises(ValueError, match="variant='exp'"):
        layer(jnp.ones((2, 5, H)), return_state=True)


def test_selective_scan_and_linear_recurrence_carry_a_state():
    """The scans' own state arguments: pieces equal one pass, forwards and backwards."""
    from annotated_ssm.scan import linear_recurrence
    from annotated_ssm.scan import selective_scan as eager

    # One compiled program per configuration (op by op, each call would compile dozens).
    selective_scan = jax.jit(eager, static_argnames=("chunk_size", "reverse", "return_state"))
    key = jax.random.split(jax.random.key(3), 5)
    u = jax.random.normal(key[0], (2, 23, 3))
    step = jax.nn.softplus(jax.random.normal(key[1], (2, 23, 3)))
    A = -jnp.arange(1.0, 5.0) * jnp.ones((3, 1))
    B, C = (jax.random.normal(k, (2, 23, 4)) for k in key[2:4])
    for reverse in (False, True):
        for chunk_size in (None, 5):
            y, final = selective_scan(u, step, A, B, C, chunk_size=chunk_size, reverse=reverse, return_state=True)
            cut = 9
            parts = [slice(0, cut), slice(cut, None)]
            state, pieces = None, {}
            for part in (parts[::-1] if reverse else parts):  # the scan's own order
                pieces[part.start], state = selective_scan(
                    u[:, part], step[:, part], A, B[:, part], C[:, part], chunk_size=chunk_size,
                    reverse=reverse, initial_state=state, return_state=True)
            y_pieces = jnp.concatenate([pieces[0], pieces[cut]], axis=1)
            assert error(y_pieces, y) < 1e-5 and error(state, final) < 1e-5
    a = jnp.exp(-step)
    x = linear_recurrence(a, u, axis=1)
    x0 = linear_recurrence(a[:, :9], u[:, :9], axis=1)
    x1 = linear_recurrence(a[:, 9:], u[:, 9:], axis=1, initial_state=x0[:, -1])
    assert error(jnp.concatenate([x0, x1], axis=1), x) < 1e-5
    with pytest.raises(ValueError, match="initial_state"):
        eager(u, step, A, B, C, initial_state=jnp.zeros((3, 4)))


# --- the streaming example of layers/base.py's docstring -------------------------------------


def test_streaming_example_in_base_docstring_runs():
    """The examples of layers/base.py's docstring (the skeleton layer, "State in, state out")
    run as doctests, as a reader would type them."""
    namespace = run_examples(base, "layers/base.py")
    assert {"RealDiagonalLayer", "pieces", "final"} <= set(namespace)


def test_s5_with_step_sizes_streams_too():
    """Irregular sampling: each piece takes its own observations' step sizes."""
    layer = make("s5")
    u = jax.random.normal(jax.random.key(1), (2, 20, H))
    step_sizes = jax.random.uniform(jax.random.key(2), (2, 20), minval=0.5, maxval=2.0)
    y, final = layer(u, step_sizes, return_state=True)
    y_first, state = layer(u[:, :7], step_sizes[:, :7], return_state=True)
    y_second, state = layer(u[:, 7:], step_sizes[:, 7:], state=state, return_state=True)
    assert error(jnp.concatenate([y_first, y_second], axis=1), y) < 1e-5 and error(state, final) < 1e-5
    assert error(layer.recurrent(u, step_sizes), y) < 1e-5
