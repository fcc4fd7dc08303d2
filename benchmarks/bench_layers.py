"""Time the SSM layers of annotated_ssm: kernel, forward, forward + backward, peak memory.

    python benchmarks/bench_layers.py                       # all layers, H = 256, L = 1024 … 16384
    python benchmarks/bench_layers.py --layers s4 s4d --lengths 4096 16384
    python benchmarks/bench_layers.py --quick               # small sizes, a smoke test on CPU

For every layer in ``annotated_ssm.layers.LAYERS`` (or those given) and every length L it
prints, for a batch of ``--batch`` sequences of H channels:

- kernel:  ``layer.kernel(L)`` (convolutional layers only: S4, DSS, S4D);
- forward: ``layer(u)``;
- fwd+bwd: the gradient of ``sum(layer(u)²)`` with respect to every parameter;

each jitted, compiled and warmed up first (excluded), then timed with
``block_until_ready`` as the median of ``--repeats`` runs. Memory: on a GPU, the device's
``peak_bytes_in_use`` (each layer runs in its own process and lengths go up, so the
process-wide peak is the peak of the current configuration); elsewhere, XLA's compiled
``memory_analysis()`` of the fwd+bwd executable (temporaries + outputs). The header says
which. State sizes: N = ``--state-size`` (64) for S4, DSS, S4D; P = ``--s5-state-size``
(256) for S5. A layer that cannot be imported or built is skipped with a note.

This is a benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

DEFAULT_LENGTHS = [1024, 2048, 4096, 8192, 16384]
QUICK_LENGTHS = [256, 1024, 4096]


def parse_args(argv=None):
    from annotated_ssm.layers import LAYERS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", nargs="+", default=list(LAYERS), help=f"any of {list(LAYERS)} (default: all)")
    parser.add_argument("--lengths", nargs="+", type=int, default=None, help="sequence lengths L")
    parser.add_argument("--d-model", type=int, default=None, help="H channels (default 256; 32 with --quick)")
    parser.add_argument("--state-size", type=int, default=64, help="N for S4, DSS, S4D (default 64)")
    parser.add_argument("--s5-state-size", type=int, default=256, help="P for S5 (default 256)")
    parser.add_argument("--batch", type=int, default=1, help="sequences per batch (default 1)")
    parser.add_argument("--s4-chunk-size", type=int, default=None,
                        help="S4 only: evaluate the kernel's frequencies in chunks of this size (bounds memory)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per measurement (median; default 5, 3 with --quick)")
    parser.add_argument("--quick", action="store_true", help="small sizes: H = 32, L = 256, 1024, 4096")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: benchmark one layer, print JSON lines
    args = parser.parse_args(argv)
    unknown = [name for name in args.layers if name not in LAYERS]
    if unknown:
        parser.error(f"unknown layer(s) {unknown}; choose from {list(LAYERS)}")
    args.lengths = args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)
    args.d_model = args.d_model or (32 if args.quick else 256)
    args.repeats = args.repeats or (3 if args.quick else 5)
    return args


# --- one layer, in a worker process ------------------------------------------------------


def median_time(fn, *args, repeats: int) -> float:
    """Median wall-clock seconds of ``fn(*args)`` after one excluded warm-up call."""
    import jax
    import numpy as np

    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def device_peak_bytes():
    import jax

    stats = jax.local_devices()[0].memory_stats() if jax.default_backend() == "gpu" else None
    return None if not stats or "peak_bytes_in_use" not in stats else int(stats["peak_bytes_in_use"])


def compiled_bytes(fn, *args):
    """temp + output bytes of the compiled executable, from XLA's memory analysis."""
    analysis = fn.lower(*args).compile().memory_analysis()
    if analysis is None:
        return None
    return int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)


def run_worker(args) -> None:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from annotated_ssm.layers import get_layer
    from annotated_ssm.layers.base import ConvolutionalSSMLayer

    name = args.worker
    cls = get_layer(name)
    state_size = args.s5_state_size if name == "s5" else args.state_size
    options = {"chunk_size": args.s4_chunk_size} if name == "s4" and args.s4_chunk_size else {}
    for L in sorted(args.lengths):
        # S4's C̃ is defined for a reference length: set it to the length measured, as a
        # training run would (another reference length computes a longer kernel or converts C̃).
        length_option = {"kernel_length": L} if name == "s4" else {}
        layer = cls(args.d_model, state_size, rngs=nnx.Rngs(0), **options, **length_option)
        graphdef, params = nnx.split(layer)
        convolutional = isinstance(layer, ConvolutionalSSMLayer)

        def forward(params, u, graphdef=graphdef):
            return nnx.merge(graphdef, params)(u)

        def loss(params, u, forward=forward):
            return jnp.sum(forward(params, u) ** 2)

        forward_jit = jax.jit(forward)
        backward_jit = jax.jit(jax.grad(loss))
        u = jax.random.normal(jax.random.key(0), (args.batch, L, args.d_model), jnp.float32)
        row = {"layer": name, "L": L, "state_size": state_size}
        if convolutional:
            kernel_jit = jax.jit(lambda params, L=L, graphdef=graphdef: nnx.merge(graphdef, params).kernel(L))
            row["kernel_s"] = median_time(kernel_jit, params, repeats=args.repeats)
        row["forward_s"] = median_time(forward_jit, params, u, repeats=args.repeats)
        row["backward_s"] = median_time(backward_jit, params, u, repeats=args.repeats)
        peak = device_peak_bytes()
        if peak is not None:
            row["memory_bytes"], row["memory_kind"] = peak, "device peak_bytes_in_use"
        else:
            row["memory_bytes"] = compiled_bytes(backward_jit, params, u)
            row["memory_kind"] = "XLA memory_analysis of fwd+bwd (temp + output)"
        print(json.dumps(row), flush=True)


# --- the driver ----------------------------------------------------------------------------


def format_ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:9.2f}"


def format_bytes(n):
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    import jax

    print(f"JAX {jax.__version__}, backend {jax.default_backend()}, device {jax.devices()[0].device_kind}")
    chunk = f", S4 chunk_size = {args.s4_chunk_size}" if args.s4_chunk_size else ""
    print(f"H = {args.d_model}, N = {args.state_size} (S5: P = {args.s5_state_size}), batch = {args.batch}{chunk}, "
          f"median of {args.repeats} runs after warm-up, times in ms")
    memory_kind = None
    header = f"{'layer':5s} {'L':>6s} {'kernel':>9s} {'forward':>9s} {'fwd+bwd':>9s} {'memory':>10s}"
    print(header)
    print("-" * len(header))
    for name in args.layers:
        # One process per layer: failures stay isolated and the GPU peak-memory counter starts fresh.
        command = [sys.executable, os.path.abspath(__file__), "--worker", name,
                   "--lengths", *map(str, args.lengths), "--d-model", str(args.d_model),
                   "--state-size", str(args.state_size), "--s5-state-size", str(args.s5_state_size),
                   "--batch", str(args.batch), "--repeats", str(args.repeats)]
        if args.s4_chunk_size:
            command += ["--s4-chunk-size", str(args.s4_chunk_size)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        printed = 0
        for line in process.stdout:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            memory_kind = row.get("memory_kind", memory_kind)
            print(f"{name:5s} {row['L']:6d} {format_ms(row.get('kernel_s')):>9s} {format_ms(row['forward_s']):>9s} "
                  f"{format_ms(row['backward_s']):>9s} {format_bytes(row.get('memory_bytes')):>10s}", flush=True)
            printed += 1
        stderr = process.stderr.read()
        process.wait()
        if process.returncode != 0:
            reason = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {process.returncode}"
            done = f" after {printed} length(s)" if printed else ""
            print(f"{name:5s} skipped{done}: {reason}")
    print(f"memory: {memory_kind or 'n/a'}")


if __name__ == "__main__":
    main()
