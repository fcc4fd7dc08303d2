"""Kernels and scans against plain baselines, side by side in one process.

    python benchmarks/bench_kernels.py ratios                 # H = 256, L = 4096 (S5: P = 256)
    python benchmarks/bench_kernels.py ratios --H 64 --L 16384
    python benchmarks/bench_kernels.py scaling                # time and memory against L and H
    python benchmarks/bench_kernels.py s4-chunks              # S4's chunk_size against speed, memory

``ratios`` times the project's code and a plain baseline written here, on identical
inputs, alternating the two in every repeat (so both see the same machine load), and
prints baseline / project for the forward pass, for forward + backward (the gradient of
``sum(out²)`` with respect to every input), and for the memory of forward + backward:

- S4D: ``vandermonde_kernel`` (blocked powers) against the straightforward Vandermonde
  product, ``exp(ΔA·ℓ)`` for every ℓ and one einsum.
- S4: ``s4_kernel`` (conjugate symmetry, default chunking) against the same Algorithm 1
  on all N = 2M states and all L frequencies, in one piece.
- S5: ``S5Layer`` (activation "none") against a plain associative-scan S5 (complex B̄u,
  ZOH factor applied to B in every call, complex readout), on the same parameters.

Before timing, each pair is checked to compute the same thing (relative difference
printed). Times: jitted, compilation and one warm-up call excluded, median of
``--repeats`` runs, each ended by ``block_until_ready``. Memory: XLA's
``memory_analysis()`` of the compiled executable, temporaries + outputs (what the
computation needs beyond its inputs).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from annotated_ssm.kernels import s4_kernel, s4_nodes, vandermonde_kernel

MiB = 2**20


# --- plain baselines ----------------------------------------------------------------------


def plain_vandermonde(A, B, C, step, L):
    """S4D-ZOH kernel, straightforward: exp(ΔA·ℓ) for every (h, n, ℓ), one einsum."""
    dtA = step * A  # (H, N)
    B_bar = jnp.expm1(dtA) / dtA * step * B
    powers = jnp.exp(dtA[..., None] * jnp.arange(L))  # (H, N, L)
    return 2 * jnp.real(jnp.einsum("hn,hnl->hl", C * B_bar, powers))


def plain_s4(Lambda, P, B, C_tilde, step, L):
    """S4's Algorithm 1 on all 2M states (the conjugates listed explicitly) and all L
    frequencies at once: one (H, 2M, L) Cauchy matrix, no symmetry, no chunks."""
    full = [jnp.concatenate([x, jnp.conj(x)], axis=-1) for x in (Lambda, P, B, C_tilde)]
    Lambda, P, B, C_tilde = full
    _, tan = s4_nodes(L, half=False)  # every j except L/2
    tan = jnp.asarray(tan, jnp.float32)
    g = (2 / step)[:, None] * (1j * tan)  # (H, F)
    reciprocal = 1 / (g[:, None, :] - Lambda[:, :, None])  # (H, 2M, F)
    Pc = jnp.conj(P)
    k00, k01, k10, k11 = (jnp.einsum("hn,hnf->hf", w, reciprocal) for w in (C_tilde * B, C_tilde * P, Pc * B, Pc * P))
    K_hat = (1 + 1j * tan) * (k00 - k01 * k10 / (1 + k11))
    if L % 2 == 0:  # ω = -1 by its exact value (Δ/2) C̃ B
        nyquist = (step / 2 * jnp.sum(C_tilde * B, axis=-1))[:, None]
        K_hat = jnp.concatenate([K_hat[:, : L // 2], nyquist, K_hat[:, L // 2 :]], axis=-1)
    return jnp.real(jnp.fft.ifft(K_hat, axis=-1))


def _binary_operator(left, right):
    a_l, b_l = left
    a_r, b_r = right
    return a_r * a_l, a_r * b_l + b_r


def plain_s5(Lambda, B, C, log_step_size, D, u):
    """S5 as the reference implementation writes it: Λ, B̃, C̃ as (real, imag) pairs,
    B̄ = (Λ̄ - 1)/Λ · B̃, complex B̄u for every step, associative scan, 2 Re(C̃ x) + D u."""
    Lambda = Lambda[..., 0] + 1j * Lambda[..., 1]
    B = B[..., 0] + 1j * B[..., 1]
    C = C[..., 0] + 1j * C[..., 1]
    Lambda = jax.lax.complex(jnp.minimum(Lambda.real, -1e-4), Lambda.imag)
    Lambda_bar = jnp.exp(Lambda * jnp.exp(log_step_size))
    B_bar = ((Lambda_bar - 1) / Lambda)[:, None] * B
    Bu = jax.vmap(lambda u_t: B_bar @ u_t.astype(B_bar.dtype))(u)  # (L, P)
    a = jnp.broadcast_to(Lambda_bar, Bu.shape)
    _, xs = jax.lax.associative_scan(_binary_operator, (a, Bu))
    return jax.vmap(lambda x: 2 * (C @ x).real)(xs) + D * u


# --- measuring ----------------------------------------------------------------------------


def _loss(fn):
    return lambda *args: jnp.sum(fn(*args) ** 2)


def memory_bytes(jitted, *args) -> int:
    analysis = jitted.lower(*args).compile().memory_analysis()
    return int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)


def _ready(x):
    return jax.block_until_ready(x)


def time_side_by_side(fns: dict, args: dict, repeats: int) -> dict:
    """Median seconds of each jitted fn(*args[name]), the fns alternating in every repeat."""
    for name, fn in fns.items():  # compile + warm up
        _ready(fn(*args[name]))
        _ready(fn(*args[name]))
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            _ready(fn(*args[name]))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def compare(label, project, baseline, project_args, baseline_args, grad_argnums, repeats):
    """Check both compute the same, then time forward and fwd+bwd and measure memory."""
    fast, plain = jax.jit(project), jax.jit(baseline)
    out_fast, out_plain = np.asarray(fast(*project_args)), np.asarray(plain(*baseline_args))
    difference = np.max(np.abs(out_fast - out_plain)) / np.max(np.abs(out_plain))
    g_fast = jax.jit(jax.grad(_loss(project), argnums=grad_argnums))
    g_plain = jax.jit(jax.grad(_loss(baseline), argnums=grad_argnums))
    forward = time_side_by_side({"project": fast, "plain": plain}, {"project": project_args, "plain": baseline_args}, repeats)
    backward = time_side_by_side({"project": g_fast, "plain": g_plain}, {"project": project_args, "plain": baseline_args}, repeats)
    memory = {"project": memory_bytes(g_fast, *project_args), "plain": memory_bytes(g_plain, *baseline_args)}
    print(
        f"{label:4s} {forward['plain'] * 1e3:9.1f} {forward['project'] * 1e3:9.1f} {forward['plain'] / forward['project']:6.2f}x"
        f"  {backward['plain'] * 1e3:9.1f} {backward['project'] * 1e3:9.1f} {backward['plain'] / backward['project']:6.2f}x"
        f"  {memory['plain'] / MiB:9.1f} {memory['project'] / MiB:9.1f} {memory['plain'] / memory['project']:6.2f}x"
        f"   {difference:.1e}",
        flush=True,
    )


# --- inputs -------------------------------------------------------------------------------


def s4d_inputs(H, N, rng):
    """S4D-Lin: A_n = -1/2 + iπn (N/2 states kept), random B, C, Δ log-uniform in [1e-3, 1e-1]."""
    A = np.broadcast_to(-0.5 + 1j * np.pi * np.arange(N // 2), (H, N // 2)).astype(np.complex64)
    B = np.ones((H, N // 2), np.complex64)
    C = (rng.standard_normal((H, N // 2)) + 1j * rng.standard_normal((H, N // 2))).astype(np.complex64) / np.sqrt(N)
    step = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), (H, 1))).astype(np.float32)
    return tuple(jnp.asarray(x) for x in (A, B, C, step))


def s4_inputs(H, N, rng):
    """A DPLR system with M = N/2 stored states: Λ_n = -1/2 + iπn, random P, B, C̃ and Δ."""
    M = N // 2

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64) / np.sqrt(N)

    Lambda = np.broadcast_to(-0.5 + 1j * np.pi * np.arange(M), (H, M)).astype(np.complex64)
    step = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H)).astype(np.float32)
    return tuple(jnp.asarray(x) for x in (Lambda, cplx(H, M), cplx(H, M), cplx(H, M), step))


def s5_layer(H, P, seed=0):
    from flax import nnx

    from annotated_ssm.layers.s5 import S5Layer

    return S5Layer(H, P, activation="none", rngs=nnx.Rngs(seed))


# --- commands -----------------------------------------------------------------------------


def machine_line():
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    return (
        f"JAX {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPUs ({cpu}), "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


def cmd_ratios(args):
    from flax import nnx

    rng = np.random.default_rng(0)
    H, N, L = args.H, args.N, args.L
    print(machine_line())
    print(f"H = {H}, N = {N} (S4, S4D: N/2 stored states; S5: P = {args.P}), L = {L}, median of {args.repeats}")
    print("ratio = plain / project (above 1: the project is faster or smaller); diff = max relative difference of outputs")
    print(f"{'':4s} {'forward ms':>27s}  {'fwd+bwd ms':>27s}  {'fwd+bwd memory MiB':>27s}")
    print(f"{'':4s} {'plain':>9s} {'project':>9s} {'ratio':>7s}  {'plain':>9s} {'project':>9s} {'ratio':>7s}"
          f"  {'plain':>9s} {'project':>9s} {'ratio':>7s}   diff")
    if "s4d" in args.cases:
        A, B, C, step = s4d_inputs(H, N, rng)
        compare("s4d", lambda A, B, C, s: vandermonde_kernel(A, B, C, s, L), lambda A, B, C, s: plain_vandermonde(A, B, C, s, L),
                (A, B, C, step), (A, B, C, step), (0, 1, 2, 3), args.repeats)
    if "s4" in args.cases:
        Lambda, P, B, C, step = s4_inputs(H, N, rng)
        chunk = {} if args.s4_chunk_size is None else {"chunk_size": args.s4_chunk_size}
        compare("s4", lambda *x: s4_kernel(*x, L, **chunk), lambda *x: plain_s4(*x, L),
                (Lambda, P, B, C, step), (Lambda, P, B, C, step), (0, 1, 2, 3, 4), args.repeats)
    if "s5" in args.cases:
        layer = s5_layer(H, args.P)
        graph, params, rest = nnx.split(layer, nnx.Param, ...)
        u = jnp.asarray(rng.standard_normal((L, H)), jnp.float32)

        def project(params, u):
            return nnx.merge(graph, params, rest)(u)

        def baseline(params, u):
            return plain_s5(params["Lambda"][...], params["B_tilde"][...], params["C_tilde"][...],
                            params["log_step_size"][...], params["D"][...], u)

        compare("s5", project, baseline, (params, u), (params, u), 0, args.repeats)


def _slope(xs, ys):
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def cmd_scaling(args):
    """Time and memory of the project's kernels against L (fixed H) and against H (fixed L)."""
    from flax import nnx

    print(machine_line())
    print(f"N = {args.N} (S5: P = {args.P}); fwd+bwd = gradient of sum(out²) wrt every input; median of {args.repeats}")
    print(f"{'case':5s} {'H':>5s} {'L':>7s} {'forward ms':>11s} {'fwd+bwd ms':>11s} {'memory MiB':>11s}")
    rng = np.random.default_rng(0)

    def measure(case, H, L):
        if case == "s4d":
            x = s4d_inputs(H, args.N, rng)
            fn = lambda A, B, C, s: vandermonde_kernel(A, B, C, s, L)  # noqa: E731
            argnums = (0, 1, 2, 3)
        elif case == "s4":
            x = s4_inputs(H, args.N, rng)
            fn = lambda *y: s4_kernel(*y, L)  # noqa: E731
            argnums = (0, 1, 2, 3, 4)
        else:
            layer = s5_layer(H, args.P)
            graph, params, rest = nnx.split(layer, nnx.Param, ...)
            x = (params, jnp.asarray(rng.standard_normal((L, H)), jnp.float32))
            fn = lambda p, u: nnx.merge(graph, p, rest)(u)  # noqa: E731
            argnums = 0
        forward, grad = jax.jit(fn), jax.jit(jax.grad(_loss(fn), argnums=argnums))
        t = time_side_by_side({"f": forward, "g": grad}, {"f": x, "g": x}, args.repeats)
        m = memory_bytes(grad, *x)
        print(f"{case:5s} {H:5d} {L:7d} {t['f'] * 1e3:11.1f} {t['g'] * 1e3:11.1f} {m / MiB:11.1f}", flush=True)
        return t["f"], t["g"], m

    for case in args.cases:
        rows = [measure(case, args.H, L) for L in args.lengths]
        f, g, m = zip(*rows)
        print(f"{case:5s} log-log slope against L (H = {args.H}): forward {_slope(args.lengths, f):.2f}, "
              f"fwd+bwd {_slope(args.lengths, g):.2f}, memory {_slope(args.lengths, m):.2f}")
        rows = [measure(case, H, args.L) for H in args.widths]
        f, g, m = zip(*rows)
        print(f"{case:5s} log-log slope against H (L = {args.L}): forward {_slope(args.widths, f):.2f}, "
              f"fwd+bwd {_slope(args.widths, g):.2f}, memory {_slope(args.widths, m):.2f}")


def cmd_s4_chunks(args):
    """S4's fwd+bwd time and memory for several chunk sizes (0: all frequencies at once)."""
    print(machine_line())
    print(f"H = {args.H}, N = {args.N}, L = {args.L}: s4_kernel fwd+bwd for each chunk_size, median of {args.repeats}")
    rng = np.random.default_rng(0)
    x = s4_inputs(args.H, args.N, rng)
    fns, mems = {}, {}
    for chunk in args.chunks:
        size = args.L if chunk == 0 else chunk  # L >= the number of frequencies: one piece
        name = "all" if chunk == 0 else str(chunk)
        fn = jax.jit(jax.grad(_loss(lambda *y, c=size: s4_kernel(*y, args.L, chunk_size=c)), argnums=(0, 1, 2, 3, 4)))
        fns[name] = fn
        mems[name] = memory_bytes(fn, *x)
    t = time_side_by_side(fns, {name: x for name in fns}, args.repeats)
    for name in fns:
        print(f"chunk_size {name:>6s}  fwd+bwd {t[name] * 1e3:9.1f} ms  memory {mems[name] / MiB:9.1f} MiB", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("ratios", "scaling", "s4-chunks"):
        p = sub.add_parser(name)
        p.add_argument("--H", type=int, default=256)
        p.add_argument("--N", type=int, default=64)
        p.add_argument("--P", type=int, default=256)
        p.add_argument("--L", type=int, default=4096)
        p.add_argument("--repeats", type=int, default=5)
        p.add_argument("--cases", nargs="+", default=["s4d", "s4", "s5"])
        p.add_argument("--s4-chunk-size", type=int, default=None)
        p.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
        p.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256, 512])
        p.add_argument("--chunks", type=int, nargs="+", default=[0, 64, 128, 256, 512, 1024, 2048])
    args = parser.parse_args()
    {"ratios": cmd_ratios, "scaling": cmd_scaling, "s4-chunks": cmd_s4_chunks}[args.command](args)


if __name__ == "__main__":
    main()
