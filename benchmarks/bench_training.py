"""Three speed-ups of small-model training and eager use, each timed side by side with what it
replaced, in one process:

1. bidirectional convolution: ``bidirectional_conv`` (one two-sided kernel, 3 FFTs) against
   two causal convolutions (6 FFTs), forward and forward + backward;
2. the training step: ``nnx.cached_partial(train_step, model, optimizer)`` (what ``fit``
   calls) against calling the ``nnx.jit`` function with the model and optimiser each time;
3. a layer's first eager call, ``layer(u)`` (one compiled program) against the same
   computation op by op (``layer._forward(u)``), each with shapes not seen before.

    python benchmarks/bench_training.py            # chapter 8's sizes: H = 64, L = 40, B = 50
    python benchmarks/bench_training.py --length 784 --batch 16

Times are the best of ``--repeats`` rounds (each round the mean of ``--steps`` calls), the
two variants alternating, so that both see the same machine load. A benchmark, not a test:
the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.data import Dataset
from annotated_ssm.kernels import bidirectional_conv, causal_conv
from annotated_ssm.layers import LAYERS, get_layer
from annotated_ssm.train import build_model, make_optimizer, train_step


def best_of(variants: dict, repeats: int, steps: int) -> dict[str, float]:
    """Seconds per call of each zero-argument function: best round, variants alternating."""
    for run in variants.values():
        jax.block_until_ready(run())  # compile and warm up
    best = dict.fromkeys(variants, np.inf)
    for _ in range(repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            for _ in range(steps):
                out = run()
            jax.block_until_ready(out)
            best[name] = min(best[name], (time.perf_counter() - start) / steps)
    return best


def report(title: str, times: dict[str, float]) -> None:
    (old, t_old), (new, t_new) = times.items()
    print(f"{title}: {old} {t_old * 1e3:.2f} ms, {new} {t_new * 1e3:.2f} ms, "
          f"{t_old / t_new:.2f}x")


def two_causal_convs(u, K_forward, K_backward):
    return causal_conv(u, K_forward) + jnp.flip(causal_conv(jnp.flip(u, -1), K_backward), -1)


def convolutions(args) -> None:
    keys = jax.random.split(jax.random.key(0), 2)
    u = jax.random.normal(keys[0], (args.batch, args.d_model, args.length))
    K = jax.random.normal(keys[1], (2, args.d_model, args.length))
    for label, transform in (("forward", lambda f: f),
                             ("fwd+bwd", lambda f: jax.grad(lambda *a: jnp.sum(f(*a) ** 2),
                                                            argnums=(0, 1, 2)))):
        old, new = (jax.jit(transform(f)) for f in (two_causal_convs, bidirectional_conv))
        report(f"bidirectional convolution, {label}",
               best_of({"two causal convs": lambda: old(u, K[0], K[1]),
                        "bidirectional_conv": lambda: new(u, K[0], K[1])},
                       args.repeats, args.steps))


def training_steps(args) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.length, 1)).astype(np.float32)
    y = rng.integers(0, 10, args.batch)
    data = Dataset("random", x, y, x, y, "classification", 10)
    shared = ModelConfig(d_model=args.d_model, n_layers=2, state_size=32, bidirectional=True,
                         step_min=0.01, step_max=1.0)
    xb, yb = jnp.asarray(x), jnp.asarray(y)
    for name in args.layers:
        model = build_model(dataclasses.replace(shared, layer=name), data, seed=0)
        optimizer = make_optimizer(model, TrainConfig(), 10_000)
        model.train()
        bound = nnx.cached_partial(train_step, model, optimizer)
        report(f"training step, {name}",
               best_of({"nnx.jit": lambda: train_step(model, optimizer, xb, yb),
                        "cached_partial": lambda: bound(xb, yb)}, args.repeats, args.steps))


def first_eager_calls(args) -> None:
    for name in args.layers:
        layer = get_layer(name)(args.d_model, 32, rngs=nnx.Rngs(0))
        times = {}
        # New lengths for each variant, so that each call compiles from scratch.
        for label, call, length in (("op by op", lambda u: layer._forward(u), args.length + 1),
                                    ("layer(u)", layer, args.length + 2)):
            u = jnp.ones((args.batch, length, args.d_model))
            start = time.perf_counter()
            jax.block_until_ready(call(u))
            times[label] = time.perf_counter() - start
        report(f"first eager call, {name}", times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d-model", type=int, default=64, help="H channels (default 64)")
    parser.add_argument("--length", type=int, default=40, help="L (default 40)")
    parser.add_argument("--batch", type=int, default=50, help="B (default 50)")
    parser.add_argument("--layers", nargs="+", default=list(LAYERS),
                        help=f"any of {list(LAYERS)} (default: all)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--steps", type=int, default=30, help="calls per round (default 30)")
    args = parser.parse_args(argv)
    print(f"H = {args.d_model}, L = {args.length}, B = {args.batch} | jax {jax.__version__} | "
          f"{jax.devices()[0].device_kind}")
    convolutions(args)
    training_steps(args)
    first_eager_calls(args)


if __name__ == "__main__":
    main()
