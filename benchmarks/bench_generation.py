"""Fast generation, measured: the recurrence against recomputing the whole sequence per token.

    python benchmarks/bench_generation.py --quick     # H = 32, N = 16, n = 64, 256: a CPU smoke test
    python benchmarks/bench_generation.py             # H = 256, N = 64, n = 256, 1024, 4096 (issue 41)
    python benchmarks/bench_generation.py --layers s4d s6 --tokens 4096 --prompt 1024

For each layer (one SSM layer of H channels and state size N, batch ``--batch``) it generates
n tokens after a random prompt of ``--prompt`` steps, feeding each output back as the next
input (u_{t+1} = tanh(y_t): a toy generator whose inputs stay bounded), in two ways, one
process, side by side:

- ``recurrence``: the prompt read by one fast call that returns the state (prefill,
  ``layer(prompt, return_state=True)``), then ``layer.step`` per token, O(H·N) each — what
  an SSM's recurrent view allows (all tokens in one jitted ``lax.scan``);
- ``recompute``: for every new token the whole sequence so far is recomputed by the
  layer's parallel form and the last output kept — for S4, S4D (convolutional layers) the
  FFT convolution with the kernel (computed once and cached, which a convolution-only model
  can do; recomputing it too would be slower still), for S6 and SSD the chunked scan
  (``layer(u)``, Mamba's and Mamba-2's training algorithms). Causal, so each token's pass
  runs over the smallest power-of-two prefix that holds the sequence so far (one compiled
  program per prefix length, the loop over tokens inside it).

Times: each variant runs once to compile (excluded), then ``--repeats`` times, and a quick
one as often as fits in a second (up to 100 runs); the median is reported as tokens per
second (n / time, the prefill included in ``recurrence``) and the ratio recurrence /
recompute. ``max diff`` is the largest difference between the two
generated sequences relative to their scale (they compute the same thing; float32 rounding
grows along the fed-back sequence). This is a benchmark, not a test; it runs unchanged on a
CPU or a GPU. The S4 paper's "60× faster generation" is a whole model's measurement on its
own hardware and baseline: compare the ratio here (one layer) with care.
"""

from __future__ import annotations

import argparse
import statistics
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", nargs="+", default=["s4", "s4d", "s6", "ssd"],
                        help="layers of annotated_ssm.layers.LAYERS (default s4 s4d s6 ssd)")
    parser.add_argument("--channels", type=int, default=256, help="H (default 256)")
    parser.add_argument("--state-size", type=int, default=64, help="N (default 64)")
    parser.add_argument("--batch", type=int, default=1, help="sequences generated at once (default 1)")
    parser.add_argument("--prompt", type=int, default=256, help="prompt length (default 256)")
    parser.add_argument("--tokens", type=int, nargs="+", default=[256, 1024, 4096],
                        help="n, tokens generated after the prompt (default 256 1024 4096)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (median; default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="H = 32, N = 16, prompt 32, n = 64, 256, 1 timed run")
    args = parser.parse_args(argv)
    if args.quick:
        args.channels, args.state_size, args.prompt = 32, 16, 32
        args.tokens, args.repeats = [64, 256], 1
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from annotated_ssm.kernels import causal_conv
    from annotated_ssm.layers import LAYERS, ConvolutionalSSMLayer

    H, B, P = args.channels, args.batch, args.prompt

    def recurrence(layer, prompt, n):
        """Prefill with one call, then n - 1 steps: the n outputs y_{P-1} … y_{P+n-2}."""
        system = layer.discrete_system(P + n)

        @nnx.jit
        def steps(layer, state, y_last, system):
            def one(carry, _):
                state, y = carry
                state, y = layer.step(state, jnp.tanh(y), system)
                return (state, y), y
            _, ys = jax.lax.scan(one, (state, y_last), None, length=n - 1)
            return jnp.concatenate([y_last[None], ys])  # (n, B, H)

        def run():
            y, state = layer(prompt, return_state=True)
            return jnp.moveaxis(steps(layer, state, y[:, -1], system), 0, 1).block_until_ready()

        return run

    def recompute(layer, prompt, n):
        """For each t = P-1 … P+n-2: the parallel form over the prefix, keep y_t, feed it back."""
        total = P + n
        buckets = sorted({1 << t.bit_length() for t in range(P - 1, total - 1)})  # 2^k >= t + 1
        if isinstance(layer, ConvolutionalSSMLayer):
            K = layer.kernel(max(buckets))  # cached: a convolution-only model computes it once
            D = layer.D[...]

            def full(u, length):  # (B, length, H) -> y (B, length, H)
                y = causal_conv(jnp.swapaxes(u, -1, -2), K[:, :length])
                return jnp.swapaxes(y, -1, -2) + D * u
        else:
            def full(u, length):
                return layer(u)

        @nnx.jit(static_argnums=(4,))
        def tokens(layer, buffer, outputs, start_stop, length):
            start, stop = start_stop[0], start_stop[1]

            def body(t, carry):
                buffer, outputs = carry
                y = full(buffer[:, :length], length)
                y_t = jax.lax.dynamic_index_in_dim(y, t, axis=1, keepdims=False)  # (B, H)
                buffer = jax.lax.dynamic_update_index_in_dim(buffer, jnp.tanh(y_t), t + 1, axis=1)
                outputs = jax.lax.dynamic_update_index_in_dim(outputs, y_t, t - (P - 1), axis=1)
                return buffer, outputs

            return jax.lax.fori_loop(start, stop, body, (buffer, outputs))

        def run():
            buffer = jnp.zeros((B, max(buckets), H), prompt.dtype).at[:, :P].set(prompt)
            outputs = jnp.zeros((B, n, H), prompt.dtype)
            t = P - 1
            for length in buckets:
                stop = min(length, total - 1)  # the tokens t whose prefix 0 … t fits in `length`
                if stop > t:
                    buffer, outputs = tokens(layer, buffer, outputs, jnp.array([t, stop]), length)
                    t = stop
            return outputs.block_until_ready()

        return run

    def timed(run):
        """(result, median time): at least --repeats runs and, for quick ones, as many as fit
        in a second, so that a moment of load on a shared machine cannot decide the median."""
        result = run()  # compile
        times = []
        while len(times) < args.repeats or (sum(times) < 1.0 and len(times) < 100):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return result, statistics.median(times)

    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({jax.devices()[0].device_kind}); "
          f"H = {H}, N = {args.state_size}, batch {B}, prompt {P}, float32, median of {args.repeats}")
    header = (f"{'layer':<6}{'n':>6}  {'recurrence tok/s':>17}  {'recompute':<22}{'tok/s':>9}  "
              f"{'ratio':>7}  {'max diff':>9}")
    print(header)
    print("-" * len(header))
    for name in args.layers:
        options = {"variant": "exp"} if name == "dss" else {}
        layer = LAYERS[name](H, args.state_size, rngs=nnx.Rngs(0), **options)
        baseline = "FFT convolution" if isinstance(layer, ConvolutionalSSMLayer) else "chunked scan"
        prompt = jax.random.normal(jax.random.key(1), (B, P, H), jnp.float32)
        for n in args.tokens:
            y_rec, t_rec = timed(recurrence(layer, prompt, n))
            y_full, t_full = timed(recompute(layer, prompt, n))
            diff = float(np.max(np.abs(np.asarray(y_rec) - np.asarray(y_full))) / np.max(np.abs(np.asarray(y_full))))
            rate_rec, rate_full = n / t_rec, n / t_full
            print(f"{name:<6}{n:>6}  {rate_rec:>17,.0f}  {'re-run ' + baseline:<22}{rate_full:>9,.0f}  "
                  f"{rate_rec / rate_full:>6.1f}×  {diff:>9.1e}", flush=True)


if __name__ == "__main__":
    main()
