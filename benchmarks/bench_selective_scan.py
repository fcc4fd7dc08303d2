"""S6's chunked selective scan against the whole parallel scan, side by side, with the floor.

    python benchmarks/bench_selective_scan.py                       # B = 8, H = 256, N = 64, L = 4096, 16384
    python benchmarks/bench_selective_scan.py --batch 4 --d-model 64 --state-size 16 --lengths 1024 4096
    python benchmarks/bench_selective_scan.py --chunk-sizes 32 64 128 --within-chunk sequential associative

For each length L it builds ``S6Layer(H, N)`` once per variant, all with the same
parameters: ``whole`` is ``chunk_size=None`` (every state at once, one
``lax.associative_scan`` over L: the reference path), the others are the chunked scan
(``annotated_ssm.scan.selective_scan``) with the given ``chunk_size`` and ``within_chunk``
(``default``: the package's defaults). It checks that every variant gives the whole scan's
y (largest difference relative to max |y|), then times, for u of shape (B, L, H), float32:

- forward: ``layer(u)``;
- fwd+bwd: the gradient of ``sum(layer(u)²)`` with respect to every parameter;

each jitted, compiled and run once first (excluded), then timed ``--repeats`` times with
the variants alternating in every round (so all see the same machine load), median.
``ratio`` is variant / whole: at most 1, the chunked scan is no slower. ``plan`` is XLA's
planned temporaries of the compiled fwd+bwd (``memory_analysis``, nothing run), the same
figure on any backend.

The floor (the issue's): a forward pass must move B·L·(2H + 2N) float32 numbers between
memory and the processor and take B·L·H·N exponentials. Both rates are measured here, on
this device: the bandwidth from ``2 * x`` on a 256 MiB array (read + write), the
exponentials from a chain of 16 ``exp`` per element of a small array (one fused loop, so
compute-bound). floor = max(bytes / bandwidth, exponentials / rate); the table prints
measured forward / floor.

This is a benchmark, not a test; the script runs unchanged on a CPU or a GPU.
"""

from __future__ import annotations

import argparse
import time

MIB = 2**20


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8, help="B (default 8)")
    parser.add_argument("--d-model", type=int, default=256, help="H (default 256)")
    parser.add_argument("--state-size", type=int, default=64, help="N (default 64)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384], help="L (default 4096 16384)")
    parser.add_argument("--chunk-sizes", type=int, nargs="*", default=[],
                        help="chunk sizes to time beside the package's default")
    parser.add_argument("--within-chunk", nargs="+", default=[None], choices=["sequential", "associative"],
                        help="within-chunk methods for --chunk-sizes (default: the package's)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (median; default 5)")
    parser.add_argument("--no-whole", action="store_true",
                        help="skip the all-at-once scan (its memory at large B·L·H·N); no ratios then")
    return parser.parse_args(argv)


def measured_rates(jax, jnp):
    """(bytes per second, exponentials per second) of this device, each the best of 5."""
    def best(fn, x):
        jax.block_until_ready(fn(x))
        times = []
        for _ in range(5):
            start = time.perf_counter()
            jax.block_until_ready(fn(x))
            times.append(time.perf_counter() - start)
        return min(times)

    big = jnp.ones(64 * MIB, jnp.float32)  # 256 MiB
    bandwidth = 2 * big.nbytes / best(jax.jit(lambda x: 2 * x), big)

    def exponentials(x):
        for _ in range(16):
            x = jnp.exp(-x)  # stays in (0, 1]
        return x

    small = jnp.full(4 * MIB, 0.5, jnp.float32)
    return bandwidth, 16 * small.size / best(jax.jit(exponentials), small)


def main(argv=None) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from annotated_ssm.layers import S6Layer
    from annotated_ssm.book.compiled_memory import planned_temp_bytes
    from annotated_ssm.scan import SELECTIVE_SCAN_CHUNK_SIZE

    args = parse_args(argv)
    B, H, N = args.batch, args.d_model, args.state_size
    bandwidth, exp_rate = measured_rates(jax, jnp)
    print(f"JAX {jax.__version__}, backend {jax.default_backend()}, device {jax.devices()[0].device_kind}; "
          f"B = {B}, H = {H}, N = {N}, float32, median of {args.repeats} alternating rounds, times in ms")
    print(f"measured here: bandwidth {bandwidth / 1e9:.1f} GB/s, {exp_rate / 1e9:.2f} G exp/s; "
          f"default chunk_size {SELECTIVE_SCAN_CHUNK_SIZE}")
    variants = {} if args.no_whole else {"whole": {"chunk_size": None}}
    variants["default"] = {}
    for size in args.chunk_sizes:
        for method in args.within_chunk:
            variants[f"T={size} {method or 'default'}"] = {"chunk_size": size, "within_chunk": method}
    header = (f"{'L':>6s} {'variant':22s} {'forward':>9s} {'ratio':>6s} {'fwd+bwd':>9s} {'ratio':>6s} "
              f"{'plan MiB':>9s} {'fwd/floor':>9s} {'diff':>8s}")
    print(header)
    print("-" * len(header))
    for L in args.lengths:
        u = jax.random.normal(jax.random.key(0), (B, L, H), jnp.float32)
        floor = max(B * L * (2 * H + 2 * N) * 4 / bandwidth, B * L * H * N / exp_rate)
        runs = {}
        for name, options in variants.items():
            graphdef, params = nnx.split(S6Layer(H, N, rngs=nnx.Rngs(0), **options))
            forward = jax.jit(lambda p, u, g=graphdef: nnx.merge(g, p)(u))
            backward = jax.jit(jax.grad(lambda p, u, g=graphdef: jnp.sum(nnx.merge(g, p)(u) ** 2)))
            runs[name] = (params, forward, backward, planned_temp_bytes(nnx.merge(graphdef, params), (B, L, H),
                                                                        gradient=True))
        outputs = {name: np.asarray(run[1](run[0], u)) for name, run in runs.items()}
        reference = outputs.get("whole", outputs["default"])
        for run in runs.values():
            jax.block_until_ready(run[2](run[0], u))  # compile and warm up
        times = {name: ([], []) for name in runs}
        for _ in range(args.repeats):
            for name, (params, forward, backward, _) in runs.items():
                for fn, store in zip((forward, backward), times[name]):
                    start = time.perf_counter()
                    jax.block_until_ready(fn(params, u))
                    store.append(time.perf_counter() - start)
        median = {name: [float(np.median(t)) for t in pair] for name, pair in times.items()}
        for name, (_, _, _, plan) in runs.items():
            fwd, bwd = median[name]
            ratios = ([f"{t / w:6.2f}" for t, w in zip(median[name], median["whole"])]
                      if "whole" in median else ["     -"] * 2)
            diff = np.max(np.abs(outputs[name] - reference)) / np.max(np.abs(reference))
            print(f"{L:6d} {name:22s} {fwd * 1e3:9.2f} {ratios[0]} {bwd * 1e3:9.2f} {ratios[1]} "
                  f"{plan / MIB:9.1f} {fwd / floor:9.1f} {diff:8.1e}", flush=True)
        print(f"{L:6d} {'floor':22s} {floor * 1e3:9.3f}   (B·L·(2H+2N)·4 = {B * L * (2 * H + 2 * N) * 4 / MIB:.1f} MiB, "
              f"B·L·H·N = {B * L * H * N:.2e} exponentials)", flush=True)


if __name__ == "__main__":
    main()
