"""Memory of the selective layer's scans, from XLA's compiled memory analysis.

    python benchmarks/bench_selective_memory.py                  # B = 4, H = 64, N = 16
    python benchmarks/bench_selective_memory.py --batch 8 --d-model 256 --lengths 1024 4096

``S6Layer(chunk_size=None)`` computes all B·L·H·N states at once (one parallel scan over
L), so its temporaries grow with N; ``S6Layer()`` runs the chunked scan
(``annotated_ssm.scan.selective_scan``: one chunk of states at a time, recomputed in the
backward pass); an S4D layer of the same H and N convolves with an (H, L) kernel. For each
length L the script compiles (never runs) the forward pass ``layer(u)`` and the gradient
of ``sum(layer(u)²)`` for u of shape (B, L, H), float32, and prints XLA's planned
temporaries (``annotated_ssm.book.compiled_memory.planned_temp_bytes``), in MiB and as a multiple of one
float32 copy of the states, B·L·H·N·4 bytes. Mamba's fused kernel keeps the states in
on-chip memory and writes only y (B·L·H·4 bytes, the last column).

The figures are the compiler's plan for the default backend (CPU or GPU), not a measured
peak: what the computation needs beyond its inputs and outputs.
"""

from __future__ import annotations

import argparse

MIB = 2**20


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4, help="B (default 4)")
    parser.add_argument("--d-model", type=int, default=64, help="H (default 64)")
    parser.add_argument("--state-size", type=int, default=16, help="N (default 16, Mamba's)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    return parser.parse_args(argv)


def main(argv=None) -> None:
    import jax
    from flax import nnx

    from annotated_ssm.layers import S4DLayer, S6Layer
    from annotated_ssm.book.compiled_memory import planned_temp_bytes
    from annotated_ssm.scan import SELECTIVE_SCAN_CHUNK_SIZE

    args = parse_args(argv)
    B, H, N = args.batch, args.d_model, args.state_size
    print(f"backend {jax.default_backend()}: B = {B}, H = {H}, N = {N}, float32; temporaries "
          "in MiB (× one copy of the states, B·L·H·N·4 bytes)")
    print(f"{'L':>6s} {'states':>9s} {'S6 whole forward':>17s} {'S6 whole fwd+bwd':>17s} "
          f"{'S6 chunked fwd':>17s} {'S6 chunked f+b':>17s} {'S4D fwd+bwd':>17s} {'y (fused kernel)':>17s}")
    whole, chunked = (S6Layer(H, N, chunk_size=size, rngs=nnx.Rngs(0))
                      for size in (None, SELECTIVE_SCAN_CHUNK_SIZE))
    s4d = S4DLayer(H, N, rngs=nnx.Rngs(0))
    for L in args.lengths:
        states = B * L * H * N * 4
        cells = [planned_temp_bytes(whole, (B, L, H)),
                 planned_temp_bytes(whole, (B, L, H), gradient=True),
                 planned_temp_bytes(chunked, (B, L, H)),
                 planned_temp_bytes(chunked, (B, L, H), gradient=True),
                 planned_temp_bytes(s4d, (B, L, H), gradient=True)]
        shown = " ".join(f"{c / MIB:9.1f} ({c / states:4.1f}×)" for c in cells)
        print(f"{L:6d} {states / MIB:9.1f} {shown} {B * L * H * 4 / MIB:17.2f}")


if __name__ == "__main__":
    main()
