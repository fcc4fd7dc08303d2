"""SSD's chunked algorithm against S6's chunked scan and SSD's quadratic form, side by side.

    python benchmarks/bench_ssd.py --quick        # B = 2, H·P = 64, N = 16, L = 256 … 4096: a CPU smoke test
    python benchmarks/bench_ssd.py                # B = 8, H·P = 256, N = 64, L = 1024 … 16384 (issue 42's sizes)
    python benchmarks/bench_ssd.py --head-dim 32 --chunk-size 128 --lengths 4096
    python benchmarks/bench_ssd.py --plan-only --lengths 16384 [--chunks-per-group none]  # compile only

The three compute the same kind of map at the same state size (D·N numbers per sequence,
D = H·P channels):

- ``ssd chunked``: :func:`annotated_ssm.scan.ssd_scan` (Mamba-2's algorithm: matrix products
  within chunks of ``--chunk-size`` steps, one state per chunk scanned between them), H heads
  of P channels, B and C shared by all heads (one group, Mamba-2's default); more chunks than
  ``--chunks-per-group`` (default: scan.SSD_CHUNKS_PER_GROUP) run as a loop over groups of
  chunks recomputed in the backward pass, ``none`` as one program however long;
- ``s6 chunked``: :func:`annotated_ssm.scan.selective_scan` (the package's S6: D channels of N
  diagonal states, chunk by chunk with the states recomputed in the backward pass);
- ``quadratic``: :func:`annotated_ssm.scan.ssd_quadratic`, SSD's whole L × L masked
  attention matrix per head, only up to ``--max-quadratic`` steps (its memory is O(L²)).

For each length L, float32 inputs of shape (B, L, ·): it times the forward pass and the
gradient of ``sum(y²)`` with respect to every input (fwd+bwd), each jitted, compiled and run
once first (excluded), then ``--repeats`` rounds with the variants alternating (so all see
the same machine load), median, in ms; ``plan`` is XLA's memory plan of the compiled fwd+bwd,
temporaries + outputs (``memory_analysis()``, nothing run: what it needs beyond its inputs),
in MiB. ``--plan-only`` compiles and prints the plans without running anything (the issue's
largest size compiles in seconds on a CPU, where running it takes minutes). The ratios are SSD
chunked / S6 chunked and quadratic / SSD chunked (< 1: the first is faster or smaller). It also
prints the largest difference between the chunked and quadratic SSD outputs, relative to
max |y|. This is a benchmark, not a test; the script runs unchanged on a CPU or a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

MIB = 2**20


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8, help="B (default 8)")
    parser.add_argument("--channels", type=int, default=256, help="D = H·P (default 256)")
    parser.add_argument("--head-dim", type=int, default=64, help="P (default 64)")
    parser.add_argument("--state-size", type=int, default=64, help="N (default 64)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="SSD's chunk (default: scan.SSD_CHUNK_SIZE); S6 keeps its own default")
    parser.add_argument("--chunks-per-group", default=None,
                        help="SSD's most chunks at once, an integer or 'none' (one program; "
                             "default: scan.SSD_CHUNKS_PER_GROUP)")
    parser.add_argument("--plan-only", action="store_true",
                        help="compile the fwd+bwd and print XLA's plans, run nothing")
    parser.add_argument("--max-quadratic", type=int, default=2048,
                        help="time the quadratic form only up to this L (default 2048)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (median; default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="B = 2, D = 64, P = 16, N = 16, L = 256, 1024, 4096, 3 repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.channels, args.head_dim, args.state_size = 2, 64, 16, 16
        args.lengths, args.repeats = [256, 1024, 4096], 3
    if args.chunks_per_group is not None:
        if args.chunks_per_group.lower() == "none":
            args.chunks_per_group = "none"
        elif not args.chunks_per_group.isdigit() or int(args.chunks_per_group) < 1:
            parser.error(f"--chunks-per-group must be an integer >= 1 or 'none'; got {args.chunks_per_group!r}")
        else:
            args.chunks_per_group = int(args.chunks_per_group)
    if args.channels % args.head_dim:
        parser.error(f"--head-dim ({args.head_dim}) must divide --channels ({args.channels})")
    return args


def main(argv=None) -> None:
    import jax
    import jax.numpy as jnp

    from annotated_ssm.scan import (SELECTIVE_SCAN_CHUNK_SIZE, SSD_CHUNK_SIZE, SSD_CHUNKS_PER_GROUP, selective_scan,
                                    ssd_quadratic, ssd_scan)

    args = parse_args(argv)
    B, D, P, N = args.batch, args.channels, args.head_dim, args.state_size
    H = D // P
    T = args.chunk_size or SSD_CHUNK_SIZE
    groups = {None: SSD_CHUNKS_PER_GROUP, "none": None}.get(args.chunks_per_group, args.chunks_per_group)

    def ssd_chunked(x, log_a, b, c):  # b, c (B, L, N): one group, shared by the heads
        return ssd_scan(x, log_a, b[:, :, None], c[:, :, None], chunk_size=T, chunks_per_group=groups)[0]

    def quadratic(x, log_a, b, c):
        return ssd_quadratic(x, log_a, b[:, :, None], c[:, :, None])

    def s6_chunked(u, step, A, b, c):
        return selective_scan(u, step, A, b, c)

    def inputs(L, key):
        k = jax.random.split(key, 6)
        step = jnp.exp(jax.random.uniform(k[0], (B, L, H), minval=jnp.log(1e-3), maxval=jnp.log(1e-1)))
        A = -jax.random.uniform(k[1], (H,), minval=1.0, maxval=16.0)
        u = jax.random.normal(k[2], (B, L, D))
        b, c = (jax.random.normal(kk, (B, L, N)) for kk in k[3:5])
        ssd = (step[..., None] * u.reshape(B, L, H, P), step * A, b, c)
        s6_step = jnp.repeat(step, P, axis=-1)  # the same Δ for the channels of a head
        s6_A = -jnp.broadcast_to(jnp.arange(1.0, N + 1), (D, N))  # S4D-Real, as S6Layer starts
        return ssd, (u, s6_step, s6_A, b, c)

    def compiled(fn, args_):
        forward = jax.jit(fn)
        grad = jax.jit(jax.grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums=tuple(range(len(args_)))))
        analysis = grad.lower(*args_).compile().memory_analysis()
        plan = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
        if args.plan_only:
            return forward, grad, plan, analysis.temp_size_in_bytes
        jax.block_until_ready(forward(*args_))
        jax.block_until_ready(grad(*args_))
        return forward, grad, plan

    def timed(fn, args_):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args_))
        return 1e3 * (time.perf_counter() - start)

    print(f"backend {jax.default_backend()}: B = {B}, D = H·P = {D} ({H} heads of P = {P}), N = {N}, "
          f"float32; SSD chunk {T}, at most {groups or 'all'} chunks at once; S6 chunk "
          f"{SELECTIVE_SCAN_CHUNK_SIZE}; " + ("" if args.plan_only else f"times in ms (median of "
          f"{args.repeats}), ") + "plan = XLA's planned fwd+bwd temporaries + outputs in MiB")
    if args.plan_only:
        print(f"{'L':>6s} | {'plan (temporaries + outputs), MiB':>34s}")
        for L in args.lengths:
            ssd_args, s6_args = (jax.tree.map(lambda z: jax.ShapeDtypeStruct(z.shape, z.dtype), a)
                                 for a in inputs(L, jax.random.key(L)))
            variants = {"ssd": (ssd_chunked, ssd_args), "s6": (s6_chunked, s6_args)}
            if L <= args.max_quadratic:
                variants["quad"] = (quadratic, ssd_args)
            for name, (fn, a) in variants.items():
                _, _, plan, temp = compiled(fn, a)
                print(f"{L:6d} | {name:4s} {plan / MIB:9.1f} = {temp / MIB:.1f} + {(plan - temp) / MIB:.1f}",
                      flush=True)
        return
    header = (f"{'L':>6s} | {'ssd fwd':>8s} {'f+b':>8s} {'plan':>8s} | {'s6 fwd':>8s} {'f+b':>8s} {'plan':>8s}"
              f" | {'quad fwd':>8s} {'f+b':>8s} {'plan':>8s} | {'ssd/s6 fwd':>10s} {'f+b':>6s} {'plan':>6s}"
              f" | {'quad/ssd f+b':>12s} {'plan':>6s} | {'|ssd-quad|':>10s}")
    print(header)
    for L in args.lengths:
        ssd_args, s6_args = inputs(L, jax.random.key(L))
        variants = {"ssd": (ssd_chunked, ssd_args), "s6": (s6_chunked, s6_args)}
        if L <= args.max_quadratic:
            variants["quad"] = (quadratic, ssd_args)
        built = {name: compiled(fn, a) for name, (fn, a) in variants.items()}
        times = {name: ([], []) for name in variants}
        for _ in range(args.repeats):
            for name, (_, a) in variants.items():
                forward, grad, _ = built[name]
                times[name][0].append(timed(forward, a))
                times[name][1].append(timed(grad, a))
        row = {name: (statistics.median(f), statistics.median(g), built[name][2] / MIB)
               for name, (f, g) in times.items()}
        cells = []
        for name in ("ssd", "s6", "quad"):
            cells.append(" ".join(f"{v:8.1f}" for v in row[name]) if name in row else f"{'-':>8s} " * 2 + f"{'-':>8s}")
        ssd, s6 = row["ssd"], row["s6"]
        ratios = f"{ssd[0] / s6[0]:10.2f} {ssd[1] / s6[1]:6.2f} {ssd[2] / max(s6[2], 1e-9):6.2f}"
        if "quad" in row:
            quad = row["quad"]
            y_ssd, y_quad = built["ssd"][0](*ssd_args), built["quad"][0](*ssd_args)
            error = float(jnp.max(jnp.abs(y_ssd - y_quad)) / jnp.max(jnp.abs(y_quad)))
            tail = f"{quad[1] / ssd[1]:12.2f} {quad[2] / max(ssd[2], 1e-9):6.2f} | {error:10.1e}"
        else:
            tail = f"{'-':>12s} {'-':>6s} | {'-':>10s}"
        print(f"{L:6d} | {cells[0]} | {cells[1]} | {cells[2]} | {ratios} | {tail}", flush=True)


if __name__ == "__main__":
    main()
