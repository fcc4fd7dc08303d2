"""Every contraction of the SSM numerics and layers computes in full float32 precision.

A GPU's default float32 matrix product is TF32 (about 10 bits of mantissa; a 1024 × 1024
product was off by 3e-4 on an H100, 4e-7 with ``precision="highest"``). The numerics are
tested against float64 references to about 1e-5, and their kernels feed long convolutions
that amplify any error, so each ``dot_general`` (and convolution) in them states
``precision=jax.lax.Precision.HIGHEST`` whatever the global ``jax_default_matmul_precision``.

CI has no GPU, so this is checked on the program, not on numbers: each function is traced
to a jaxpr (float32, nothing compiled or run), every nested jaxpr is walked (jit, scan,
while, cond, remat, custom_jvp/vjp, linear solves, ...), and each contraction's precision is
read. Covered: every public function of ``kernels``, ``scan``, ``discretize`` and ``init``
(found from their ``__all__``: a new one fails here until it has arguments below), and
every registered layer's ``__call__``, ``kernel``, ``discrete_system``, ``step`` and
``recurrent``, unidirectional and bidirectional, with their gradients (a dot's transpose
must keep its precision). The models' own dense layers (encoder, mixing, decoder) follow
the user's setting: ``test_a_model_leaves_only_its_dense_layers_to_the_default`` allows
exactly those.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax._src import source_info_util

from annotated_ssm import discretize, initialization, kernels, scan
from annotated_ssm.layers import LAYERS, ConvolutionalSSMLayer
from annotated_ssm.model import CausalSequenceModel, SequenceClassifier

HIGHEST = jax.lax.Precision.HIGHEST
FULL = (HIGHEST, HIGHEST)
CONTRACTIONS = ("dot_general", "conv_general_dilated")


# --- the walker -------------------------------------------------------------------------------


def operand_precisions(precision):
    """A contraction's ``precision`` parameter as a pair (lhs, rhs).

    JAX stores None (the global default), one Precision for both operands, a pair, or a
    dot algorithm (``DotAlgorithmPreset``), which is returned as it is (not a pair: it
    never equals ``FULL``)."""
    if precision is None or isinstance(precision, jax.lax.Precision):
        return (precision, precision)
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        return tuple(precision)
    return precision


def sub_jaxprs(value):
    """The jaxprs held in one equation parameter: a Jaxpr, a ClosedJaxpr, or any of them in
    a tuple, list or dict (cond's branches, custom_linear_solve's four jaxprs, ...)."""
    if isinstance(value, jax.extend.core.ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, jax.extend.core.Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from sub_jaxprs(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from sub_jaxprs(item)


def contractions(jaxpr):
    """Every contraction equation of a jaxpr and of the jaxprs nested in it, in order."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr's Jaxpr
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in CONTRACTIONS:
            yield eqn
        for value in eqn.params.values():
            for inner in sub_jaxprs(value):
                yield from contractions(inner)


def where(eqn) -> str:
    """file:line (function) of the code that emitted an equation."""
    return source_info_util.summarize(eqn.source_info)


def reduced_precision(jaxpr) -> list[str]:
    """One line per contraction whose precision is not HIGHEST for both operands."""
    return [f"{eqn.primitive.name} with precision={eqn.params.get('precision')} at {where(eqn)}"
            for eqn in contractions(jaxpr)
            if operand_precisions(eqn.params.get("precision")) != FULL]


def assert_full_precision(function, *args):
    """Trace ``function(*args)`` and fail naming each contraction not at full precision."""
    jaxpr = jax.make_jaxpr(function)(*args)
    offending = reduced_precision(jaxpr)
    assert not offending, (f"{len(offending)} contraction(s) not at precision HIGHEST:\n  "
                           + "\n  ".join(offending))
    return jaxpr


def test_the_walker_reports_a_default_precision_matmul_and_reads_every_form():
    x = jnp.ones((4, 4), jnp.float32)
    full = lambda a: jnp.dot(a, a, precision=HIGHEST)  # noqa: E731

    def planted(a):  # a bare product, deep inside jit, scan, cond, remat and custom_jvp
        @jax.custom_jvp
        def inner(b):
            return jnp.dot(b, b)

        inner.defjvp(lambda primals, tangents: (inner(*primals), tangents[0]))

        def body(carry, _):
            branch = jax.lax.cond(True, jax.checkpoint(inner), full, carry)
            return branch, None

        return jax.jit(lambda b: jax.lax.scan(body, b, None, length=2)[0])(a)

    with pytest.raises(AssertionError, match=r"1 contraction\(s\).*\n.*dot_general with "
                                             r"precision=None at .*test_precision\.py"):
        assert_full_precision(planted, x)
    assert_full_precision(full, x)  # HIGHEST passes
    half = lambda a: jnp.dot(a, a, precision=(HIGHEST, jax.lax.Precision.DEFAULT))  # noqa: E731
    assert len(reduced_precision(jax.make_jaxpr(half)(x))) == 1  # one operand is not enough
    assert len(reduced_precision(jax.make_jaxpr(lambda a: a @ a)(x))) == 1  # `@` takes none
    image = jnp.ones((1, 1, 8), jnp.float32)
    def conv(a, precision):
        return jax.lax.conv_general_dilated(a, a[..., :3], (1,), "SAME", precision=precision)

    assert len(reduced_precision(jax.make_jaxpr(lambda a: conv(a, None))(image))) == 1
    assert not reduced_precision(jax.make_jaxpr(lambda a: conv(a, HIGHEST))(image))
    # A gradient's transposed products are checked too: here they keep the precision.
    assert not reduced_precision(jax.make_jaxpr(jax.grad(lambda a: jnp.sum(full(a))))(x))
    bare_gradient = jax.make_jaxpr(jax.grad(lambda a: jnp.sum(a @ a)))(x)
    assert len(reduced_precision(bare_gradient)) == 3  # the product and its two transposes


# --- the public numerics ------------------------------------------------------------------------
#
# One or more argument sets per public function (float32; complex64 where complex): an
# inexact jax array argument is traced, anything else (NumPy arrays, keys, sizes, options)
# is closed over; a dict last holds keyword arguments.

#: Public functions that compute on the host in NumPy/SciPy (float64, or no arithmetic at
#: all): no JAX contraction to check, and they cannot be traced.
HOST = {
    "kernels.naive_kernel": "the float64 NumPy reference kernel",
    "kernels.s4_nodes": "float64 NumPy constants",
    "initialization.diagonal_init": "float64 NumPy eigenvalues",
    "initialization.block_hippo_n": "NumPy/SciPy eigendecomposition",
    "initialization.s5_init": "float64 NumPy products (init.s5_projection), cast to complex64 at the end",
}

H, M, N, L = 3, 4, 8, 16  # channels, kept (conjugate) states, states, length


def _real(*shape, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


def _complex(*shape, seed=0):
    return jax.lax.complex(_real(*shape, seed=seed), _real(*shape, seed=seed + 100))


def _stable(*shape, seed=0):  # complex eigenvalues with Re < 0
    return jax.lax.complex(-0.5 - jnp.abs(_real(*shape, seed=seed)), _real(*shape, seed=seed + 1))


def _step(*shape):
    return jnp.full(shape, 0.1, jnp.float32)


def _numerics_cases():
    A_dense = _real(N, N, seed=1) / N - jnp.eye(N)
    hippo_V = initialization.block_hippo_n(N)[1]
    a, b = _real(L, H, seed=2), _real(L, H, seed=3)
    cases = {
        # kernels
        "kernels.causal_conv": [(_real(H, L), _real(H, L, seed=1))],
        "kernels.bidirectional_conv": [(_real(H, L), _real(H, L, seed=1), _real(H, L, seed=2))],
        "kernels.cauchy": [
            (_complex(H, 4, M), _real(L), _stable(H, 1, M)),
            (_complex(H, 4, M), _real(L), _stable(H, 1, M), {"conjugate": True, "imaginary": True}),
            (_complex(H, M), _complex(L), _stable(H, M), {"conjugate": True}),
        ],
        "kernels.s4_kernel": [
            (_stable(H, M), _complex(H, M, seed=1), _complex(H, M, seed=2), _complex(H, M, seed=3),
             _step(H), L),
            (_stable(H, M), _complex(H, M, seed=1), _complex(H, M, seed=2), _complex(H, M, seed=3),
             _step(H), L, {"chunk_size": 2, "conjugate": False}),
        ],
        "kernels.dss_coefficients": [
            (_stable(M), _complex(H, M), _step(H), L),
            (_complex(H, M), _complex(2, H, M), _step(H), L, {"variant": "softmax"}),
        ],
        "kernels.dss_kernel": [
            (_stable(M), _complex(H, M), _step(H), L),
            (_complex(H, M), _complex(2, H, M), _step(H), L, {"variant": "softmax", "chunk": 5}),
        ],
        "kernels.vandermonde_kernel": [
            (_stable(H, M), _complex(H, M), _complex(H, M, seed=1), _step(H, 1), L),
            (_stable(H, M), _complex(H, M), _complex(2, H, M, seed=1), _step(H, 1), L,
             {"method": "bilinear", "max_elements": 64}),
            (-jnp.abs(_real(H, N)), 1.0, _real(H, N), _step(H, 1), L, {"conjugate": False}),
        ],
        # scan
        "scan.sequential_scan": [(a, b), (a, b, {"x0": _real(H), "reverse": True})],
        "scan.parallel_scan": [(a, b), (a, b, {"x0": _real(H), "reverse": True})],
        "scan.linear_recurrence": [(a[None], b[None], {"axis": 1, "reverse": True})],
        "scan.chunked_recurrence": [(a[None], b[None], {"axis": 1, "reverse": True, "chunk_size": 3,
                                                        "within_chunk": within})
                                    for within in ("sequential", "associative")],
        "scan.binary_operator": [((a, b), (b, a))],
        "scan.selective_scan": [
            (_real(2, L, H), jnp.abs(_real(2, L, H, seed=1)), -jnp.abs(_real(H, N, seed=2)),
             _real(2, L, N, seed=3), _real(2, L, N, seed=4), {"chunk_size": 4, "within_chunk": within})
            for within in ("sequential", "associative")],
        "scan.ssm_recurrence": [
            (A_dense, _real(N, 2), _real(3, N), _real(L, 2), _real(3, 2)),
            (A_dense, _real(N), _real(N), _real(L)),
            (_complex(N), _complex(N), _complex(N), _real(L)),
        ],
        # discretize
        "discretize.discretize": [(A_dense, _real(N), _step()), (_stable(M), 1.0, _step(M))],
        "discretize.discretize_diagonal": [
            (_stable(H, M), _complex(H, M), _step(H, 1), "bilinear")],
        "discretize.discretize_dense": [(A_dense, _real(N, 2), _step(), method)
                                        for method in discretize.METHODS],
        "discretize.dplr_bilinear": [(_stable(N), _complex(N), _complex(N, seed=1), _step())],
        "discretize.expm": [(3 * A_dense,)],
        # init
        "initialization.log_step_size": [(jax.random.key(0), (H,))],
        "initialization.s5_projection": [
            (hippo_V, np.ones((N, H)), np.ones((2, H, N))),
            (jnp.asarray(hippo_V, jnp.complex64), _real(N, H), _real(2, H, N)),
        ],
    }
    # Functions being added to scan (the selective system, SSD): covered once they exist.
    heads, head_dim, batch = 2, 3, 2
    x, log_a = _real(batch, L, heads, head_dim), -jnp.abs(_real(batch, L, heads, seed=1))
    b_in, c_out = _real(batch, L, heads, N, seed=2), _real(batch, L, heads, N, seed=3)
    optional = {
        "scan.selective_system": [(_step(H), -jnp.abs(_real(H, N)), _real(N, seed=1), _real(H, seed=2))],
        "scan.ssd_step": [(_real(batch, heads, head_dim, N), x[:, 0], log_a[:, 0], b_in[:, 0], c_out[:, 0])],
        "scan.segment_sum": [(log_a,)],
        "scan.ssd_recurrence": [(x, log_a, b_in, c_out)],
        "scan.ssd_quadratic": [(x, log_a, b_in, c_out)],
        "scan.ssd_scan": [(x, log_a, b_in, c_out, {"chunk_size": 4})],
    }
    cases.update({name: args for name, args in optional.items() if hasattr(scan, name.split(".")[1])})
    return cases


NUMERICS = {f"{module.__name__.rsplit('.', 1)[1]}.{name}": getattr(module, name)
            for module in (kernels, scan, discretize, initialization) for name in module.__all__
            if inspect.isfunction(inspect.unwrap(getattr(module, name)))}
CASES = _numerics_cases()


def test_every_public_numerics_function_has_arguments_here():
    missing = sorted(set(NUMERICS) - set(CASES) - set(HOST))
    assert not missing, f"add arguments for {missing} to _numerics_cases (a new public function)"
    assert set(CASES) | set(HOST) == set(NUMERICS) and not set(CASES) & set(HOST)


def _split(case):
    """(traced arrays, a function of them that calls with the whole argument list)."""
    *args, kwargs = case if isinstance(case[-1], dict) else (*case, {})
    traced = [i for i, x in enumerate(args) if _is_traced(x)]

    def call(function, *arrays):
        full = list(args)
        for i, x in zip(traced, arrays):
            full[i] = x
        return function(*full, **kwargs)

    return [args[i] for i in traced], call


def _is_traced(x):
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.inexact)


def _real_sum(tree):
    """Σ Re of every inexact leaf: a real scalar to differentiate."""
    return sum(jnp.sum(jnp.real(x)) for x in jax.tree.leaves(tree)
               if jnp.issubdtype(jnp.result_type(x), jnp.inexact))


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_numerics_compute_in_full_precision(name):
    function = NUMERICS[name]
    for case in CASES[name]:
        arrays, call = _split(case)
        assert_full_precision(lambda *xs: call(function, *xs), *arrays)
        if arrays:  # and its gradient with respect to them
            assert_full_precision(jax.grad(lambda xs: _real_sum(call(function, *xs))), arrays)


# --- the layers ---------------------------------------------------------------------------------

#: Options that take another code path (the defaults are always checked).
VARIANTS = {
    "dss": [{"variant": "exp"}],
    "s4d": [{"init": "real"}, {"discretization": "zoh"}],
    "s4": [{"chunk_size": 2}],
    "s5": [{"activation": "half_glu"}, {"activation": "full_glu", "conj_sym": False}],
}
LAYER_CASES = [(name, options, bidirectional)
               for name in LAYERS for options in [{}] + VARIANTS.get(name, [])
               for bidirectional in (False, True)]


def _layer_id(case):
    name, options, bidirectional = case
    spelled = ",".join(f"{k}={v}" for k, v in options.items())
    name += f"[{spelled}]" if spelled else ""
    return name + ("-bidirectional" if bidirectional else "")


def _gradient_checked(layer, method, *args):
    """d Σ layer.method(*args) / d (the layer's state), traced and checked."""
    graphdef, state = nnx.split(layer)

    def loss(state):
        return _real_sum(getattr(nnx.merge(graphdef, state), method)(*args))

    assert_full_precision(jax.grad(loss), state)


@pytest.mark.parametrize("case", LAYER_CASES, ids=_layer_id)
def test_layers_compute_in_full_precision(case):
    name, options, bidirectional = case
    layer = LAYERS[name](H, N, bidirectional=bidirectional, rngs=nnx.Rngs(0), **options)
    u = _real(2, L, H)
    assert_full_precision(layer, u)
    _gradient_checked(layer, "__call__", u)
    if isinstance(layer, ConvolutionalSSMLayer):
        assert_full_precision(lambda: layer.kernel(L))
    steps = [None, jnp.linspace(0.5, 2.0, L, dtype=jnp.float32)] if layer.takes_step_sizes else [None]
    for s in steps[1:]:
        assert_full_precision(lambda x: layer(x, step_sizes=s), u)
        _gradient_checked(layer, "__call__", u, s)
    if bidirectional:
        return
    for s in steps:
        assert_full_precision(lambda x: layer.recurrent(x, step_sizes=s), u)
        _gradient_checked(layer, "recurrent", u, s)
    for system_steps in [None, 2.0] if layer.takes_step_sizes else [None]:
        assert_full_precision(lambda: layer.discrete_system(L, step_sizes=system_steps))
    state = layer.init_state((2,))
    assert_full_precision(lambda x: layer.step(state, x, layer.discrete_system(L)), u[:, 0])
    if options.get("variant", "softmax") != "softmax" or name != "dss":  # DSS-softmax needs L
        assert_full_precision(lambda x: layer.step(state, x), u[:, 0])  # the unbounded system
    if hasattr(layer, "impulse_response"):
        assert_full_precision(lambda: layer.impulse_response(L))


def test_every_registered_layer_is_covered():
    assert {name for name, _, _ in LAYER_CASES} == set(LAYERS)


# --- a model: its SSM layers in full precision, its dense layers at the user's setting --------


def _frames(eqn) -> list[str]:
    traceback = eqn.source_info.traceback
    return [] if traceback is None else [frame.file_name for frame in traceback.frames]


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_a_model_leaves_only_its_dense_layers_to_the_default(layer):
    """In a model's forward and gradient, a contraction below the global precision is one of
    the model's own ``nnx.Linear`` layers (encoder, mixing, decoder), called from model.py
    and not from inside an SSM layer; the SSM layers' contractions are all HIGHEST."""
    classifier = SequenceClassifier(layer, 2, 3, d_model=H, n_layers=2, state_size=N,
                                    bidirectional=True, rngs=nnx.Rngs(0))
    causal = CausalSequenceModel(layer, 2, 2, d_model=H, n_layers=2, state_size=N, rngs=nnx.Rngs(0))
    x = _real(2, L, 2)
    # (program, argument, whether the SSM layers certainly contract there: every layer's
    # whole-sequence form does; DSS's and S4D's recurrences are elementwise)
    programs = [(classifier, x, True), (causal, x, True), (causal.recurrent, x, False)]
    for model in (classifier, causal):
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        loss = lambda params, g=graphdef, r=rest: jnp.sum(nnx.merge(g, params, r)(x))  # noqa: E731
        programs.append((jax.grad(loss), params, True))
    for program, argument, ssm_contracts in programs:
        dense = full = 0
        for eqn in contractions(jax.make_jaxpr(program)(argument)):
            if operand_precisions(eqn.params.get("precision")) == FULL:
                full += 1
                continue
            frames = _frames(eqn)
            assert not any("/annotated_ssm/layers/" in f for f in frames), where(eqn)
            assert any(f.endswith("annotated_ssm/model.py") for f in frames), where(eqn)
            assert any(f.endswith("flax/nnx/nn/linear.py") for f in frames), where(eqn)
            dense += 1
        assert dense > 0 and (full > 0 or not ssm_contracts), (dense, full)
