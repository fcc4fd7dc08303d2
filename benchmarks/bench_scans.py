"""The package's scans beside the algorithms of the public JAX ports, side by side in one process.

    python benchmarks/bench_scans.py --quick              # small sizes, a smoke test (a minute on a CPU)
    python benchmarks/bench_scans.py                      # issue 45's sizes, L = 1024 … 16384
    python benchmarks/bench_scans.py --only s6 --lengths 4096

The peers are written here from the descriptions of the public ports (their code is not
imported), on the same inputs, float32:

S6 (Mamba's selective scan), (B, L, H, N) = (``--s6-batch``, L, ``--s6-h``, ``--s6-n``):
- ``package``: :func:`annotated_ssm.scan.selective_scan`, the chunked engine (one chunk of
  states at a time; its gradient the adjoint recurrence over the same chunks);
- ``lax.scan``: exp(Δ A) and Δ u B built up front for all L steps, (B, L, H, N) each, then a
  ``lax.scan`` over time with y = C · h read out in the step (vvvm23/mamba-jax; apple/axlearn's
  linear-scan Mamba recurrence does the same with the readout after the scan);
- ``associative``: the same inputs up front, ``lax.associative_scan`` over all L states, then
  y = C · h (mamba-jax's parallel mode).

S5, (B, L, H, P) = (``--s5-batch``, L, ``--s5-h``, ``--s5-p``; P/2 complex states kept):
- ``package``: ``S5Layer`` (``annotated_ssm.layers``), the chunked engine;
- ``associative``: lindermanlab/S5's layer on the same parameters: complex B̄ u (the real input
  promoted to complex), ``lax.associative_scan`` over all L states, complex readout Re(C x).
  Gradients are those of the layer's parameters.

SSD (Mamba-2), (B, L, heads, P, N) = (``--ssd-batch``, L, H·P / P, ``--ssd-p``, ``--ssd-n``):
- ``package``: :func:`annotated_ssm.scan.ssd_scan` (quadratic within chunks of 64, a linear
  scan of states between them);
- ``minimal``: Mamba-2's ``ssd_minimal_discrete`` (Listing 1 of the paper, as
  CosmoNaught/mamba2-jax and repyt-margorp/mamba2-minimal-jax port it): segment sums as
  differences of cumulative sums, and the states between chunks by a (chunks + 1)² decay
  matrix (quadratic in the number of chunks).

For each length: the forward pass and the gradient of ``sum(y²)`` (fwd+bwd), each jitted,
compiled and run once first (excluded), then ``--repeats`` rounds with the variants
alternating (so all see the same machine load), median in ms. ``ratio`` is package / the
best (fastest, smallest) peer: below 1 the package is ahead. ``plan`` is XLA's planned
temporaries of the compiled fwd+bwd (``jax.jit(f).lower(...).compile().memory_analysis()``,
nothing run), MiB. ``err`` is the largest difference of y from the package's, relative to
max |y|. This is a benchmark, not a test; it runs unchanged on a CPU or a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

MIB = 2**20


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=["s6", "s5", "ssd"], default=["s6", "s5", "ssd"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (median; default 5)")
    parser.add_argument("--s6-batch", type=int, default=4)
    parser.add_argument("--s6-h", type=int, default=64)
    parser.add_argument("--s6-n", type=int, default=16)
    parser.add_argument("--s5-batch", type=int, default=4)
    parser.add_argument("--s5-h", type=int, default=256)
    parser.add_argument("--s5-p", type=int, default=128, help="P, the real state size (P/2 complex kept)")
    parser.add_argument("--ssd-batch", type=int, default=8)
    parser.add_argument("--ssd-channels", type=int, default=256, help="H·P")
    parser.add_argument("--ssd-p", type=int, default=64)
    parser.add_argument("--ssd-n", type=int, default=64)
    parser.add_argument("--quick", action="store_true",
                        help="S6 (2, L, 32, 16), S5 (2, L, 64, 32), SSD (2, L, 64, P 16, N 16), L = 512 1024, 3 repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.lengths, args.repeats = [512, 1024], 3
        args.s6_batch, args.s6_h, args.s6_n = 2, 32, 16
        args.s5_batch, args.s5_h, args.s5_p = 2, 64, 32
        args.ssd_batch, args.ssd_channels, args.ssd_p, args.ssd_n = 2, 64, 16, 16
    return args


# --- the peers' algorithms, written from their descriptions ------------------------------------


def s6_peers(jax, jnp):
    """S6 as the public ports compute it: all B·L·H·N decays and inputs built up front."""
    highest = jax.lax.Precision.HIGHEST

    def up_front(u, step, A, B):
        return jnp.exp(step[..., None] * A), (step * u)[..., None] * B[..., None, :]  # (B, L, H, N)

    def linear_scan(u, step, A, B, C):
        a, b = up_front(u, step, A, B)

        def one_step(h, inputs):
            a_t, b_t, c_t = inputs
            h = a_t * h + b_t
            return h, jnp.einsum("bhn,bn->bh", h, c_t, precision=highest)

        h0 = jnp.zeros(a.shape[:1] + a.shape[2:], a.dtype)
        _, y = jax.lax.scan(one_step, h0, tuple(jnp.moveaxis(x, 1, 0) for x in (a, b, C)))
        return jnp.moveaxis(y, 0, 1)

    def associative(u, step, A, B, C):
        a, b = up_front(u, step, A, B)
        _, h = jax.lax.associative_scan(lambda l, r: (r[0] * l[0], r[0] * l[1] + r[1]), (a, b), axis=1)
        return jnp.einsum("blhn,bln->blh", h, C, precision=highest)

    return {"lax.scan": linear_scan, "associative": associative}


def s5_anchor(jax, jnp, graphdef):
    """lindermanlab/S5's forward on an S5Layer's parameters: complex B̄u, an associative scan
    over all L states, complex readout."""
    from flax import nnx

    highest = jax.lax.Precision.HIGHEST

    def forward(params, u):
        layer = nnx.merge(graphdef, params)
        dtype = u.dtype
        Lambda_bar, factor = layer._discretize(layer.step_sizes(dtype), dtype)
        B_bar = factor[:, None] * jax.lax.complex(layer.B_tilde[..., 0], layer.B_tilde[..., 1])
        C = layer._output_matrix(dtype)
        Bu = jnp.einsum("ph,blh->blp", B_bar, u.astype(B_bar.dtype), precision=highest)
        a = jnp.broadcast_to(Lambda_bar, Bu.shape)
        _, x = jax.lax.associative_scan(lambda l, r: (r[0] * l[0], r[0] * l[1] + r[1]), (a, Bu), axis=1)
        y = jnp.einsum("hp,blp->blh", C, x, precision=highest).real
        return y + layer.D[...] * u

    return forward


def ssd_minimal(jax, jnp, chunk_size):
    """Mamba-2's ssd_minimal_discrete (Listing 1): x (B, L, H, P), log_a (B, L, H), b, c (B, L, H, N)."""
    highest = jax.lax.Precision.HIGHEST

    def segsum(x):  # exp of a difference of cumulative sums, -inf above the diagonal
        T = x.shape[-1]
        cumsum = jnp.cumsum(x, axis=-1)
        diff = cumsum[..., :, None] - cumsum[..., None, :]
        return jnp.where(jnp.tril(jnp.ones((T, T), bool)), diff, -jnp.inf)

    def forward(x, log_a, b, c):
        Bsz, L, H, P = x.shape
        n = L // chunk_size
        x, b, c = (z.reshape(Bsz, n, chunk_size, *z.shape[2:]) for z in (x, b, c))
        A = jnp.moveaxis(log_a.reshape(Bsz, n, chunk_size, H), -1, 1)  # (B, H, n, T)
        A_cumsum = jnp.cumsum(A, axis=-1)
        L_mask = jnp.exp(segsum(A))
        y_diag = jnp.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", c, b, L_mask, x, precision=highest)
        decay_states = jnp.exp(A_cumsum[..., -1:] - A_cumsum)
        states = jnp.einsum("bclhn,bhcl,bclhp->bchpn", b, decay_states, x, precision=highest)
        states = jnp.concatenate([jnp.zeros_like(states[:, :1]), states], axis=1)
        decay_chunk = jnp.exp(segsum(jnp.pad(A_cumsum[..., -1], ((0, 0), (0, 0), (1, 0)))))
        states = jnp.einsum("bhzc,bchpn->bzhpn", decay_chunk, states, precision=highest)[:, :-1]
        y_off = jnp.einsum("bclhn,bchpn,bhcl->bclhp", c, states, jnp.exp(A_cumsum), precision=highest)
        return (y_diag + y_off).reshape(Bsz, L, H, P)

    return forward


# --- measuring ---------------------------------------------------------------------------------


def measure(jax, jnp, variants, repeats):
    """{name: (forward ms, fwd+bwd ms, plan MiB, y)} for variants {name: (fn, args, argnums)}."""
    import numpy as np

    built = {}
    for name, (fn, args, argnums) in variants.items():
        forward = jax.jit(fn)
        grad = jax.jit(jax.grad(lambda *a, fn=fn: jnp.sum(fn(*a) ** 2), argnums=argnums))
        plan = grad.lower(*args).compile().memory_analysis().temp_size_in_bytes
        y = np.asarray(jax.block_until_ready(forward(*args)))
        jax.block_until_ready(grad(*args))
        built[name] = (forward, grad, args, plan, y)
    times = {name: ([], []) for name in built}
    for _ in range(repeats):
        for name, (forward, grad, args, _, _) in built.items():
            for fn, store in zip((forward, grad), times[name]):
                start = time.perf_counter()
                jax.block_until_ready(fn(*args))
                store.append(1e3 * (time.perf_counter() - start))
    return {name: (statistics.median(times[name][0]), statistics.median(times[name][1]), built[name][3] / MIB,
                   built[name][4]) for name in built}


def report(title, L, rows):
    """Print one length's rows; ratios against the best peer of each column."""
    import numpy as np

    ours = rows["package"]
    peers = {name: row for name, row in rows.items() if name != "package"}
    best = [min(row[i] for row in peers.values()) for i in range(3)]
    for name, row in rows.items():
        err = np.max(np.abs(row[3] - ours[3])) / np.max(np.abs(ours[3]))
        print(f"{title:4s} {L:6d} {name:12s} {row[0]:9.1f} {row[1]:9.1f} {row[2]:9.1f} {err:8.1e}", flush=True)
    print(f"{title:4s} {L:6d} {'ratio':12s} {ours[0] / best[0]:9.2f} {ours[1] / best[1]:9.2f} "
          f"{ours[2] / max(best[2], 1e-9):9.2f}   (package / best peer)", flush=True)


def main(argv=None) -> None:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from annotated_ssm.layers import S5Layer
    from annotated_ssm.scan import SSD_CHUNK_SIZE, selective_scan, ssd_scan

    args = parse_args(argv)
    print(f"JAX {jax.__version__}, backend {jax.default_backend()}, device {jax.devices()[0].device_kind}; "
          f"float32, median of {args.repeats} alternating rounds; times in ms, plan = fwd+bwd planned "
          f"temporaries in MiB")
    print(f"S6 (B, H, N) = ({args.s6_batch}, {args.s6_h}, {args.s6_n}); S5 (B, H, P) = ({args.s5_batch}, "
          f"{args.s5_h}, {args.s5_p}); SSD (B, H·P, P, N) = ({args.ssd_batch}, {args.ssd_channels}, "
          f"{args.ssd_p}, {args.ssd_n})")
    header = f"{'':4s} {'L':>6s} {'variant':12s} {'forward':>9s} {'fwd+bwd':>9s} {'plan':>9s} {'err':>8s}"
    print(header)
    print("-" * len(header))
    for L in args.lengths:
        keys = jax.random.split(jax.random.key(L), 8)
        if "s6" in args.only:
            B, H, N = args.s6_batch, args.s6_h, args.s6_n
            s6_args = (jax.random.normal(keys[0], (B, L, H)),
                       jnp.exp(jax.random.uniform(keys[1], (B, L, H), minval=jnp.log(1e-3), maxval=jnp.log(1e-1))),
                       -jnp.broadcast_to(jnp.arange(1.0, N + 1), (H, N)),
                       jax.random.normal(keys[2], (B, L, N)), jax.random.normal(keys[3], (B, L, N)))
            variants = {"package": (selective_scan, s6_args, tuple(range(5)))}
            variants.update({name: (fn, s6_args, tuple(range(5))) for name, fn in s6_peers(jax, jnp).items()})
            report("s6", L, measure(jax, jnp, variants, args.repeats))
        if "s5" in args.only:
            graphdef, params = nnx.split(S5Layer(args.s5_h, args.s5_p, rngs=nnx.Rngs(0)))
            u = jax.random.normal(keys[4], (args.s5_batch, L, args.s5_h))
            variants = {"package": (lambda p, u: nnx.merge(graphdef, p)(u), (params, u), 0),
                        "associative": (s5_anchor(jax, jnp, graphdef), (params, u), 0)}
            report("s5", L, measure(jax, jnp, variants, args.repeats))
        if "ssd" in args.only:
            B, D, P, N = args.ssd_batch, args.ssd_channels, args.ssd_p, args.ssd_n
            H = D // P
            step = jnp.exp(jax.random.uniform(keys[5], (B, L, H), minval=jnp.log(1e-3), maxval=jnp.log(1e-1)))
            A = -jax.random.uniform(keys[6], (H,), minval=1.0, maxval=16.0)
            k = jax.random.split(keys[7], 3)
            b, c = (jnp.broadcast_to(jax.random.normal(kk, (B, L, 1, N)), (B, L, H, N)) for kk in k[:2])
            ssd_args = (step[..., None] * jax.random.normal(k[2], (B, L, H, P)), step * A, b, c)
            variants = {"package": (lambda *a: ssd_scan(*a)[0], ssd_args, tuple(range(4))),
                        "minimal": (ssd_minimal(jax, jnp, SSD_CHUNK_SIZE), ssd_args, tuple(range(4)))}
            report("ssd", L, measure(jax, jnp, variants, args.repeats))


if __name__ == "__main__":
    main()
