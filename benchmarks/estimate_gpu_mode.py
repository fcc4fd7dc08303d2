"""How long the GPU mode of chapters 8, 9 and 10 takes on a GPU, estimated from XLA's analysis.

    python benchmarks/estimate_gpu_mode.py                # the three chapters, T4 and H100
    python benchmarks/estimate_gpu_mode.py --chapter 9    # one chapter
    python benchmarks/estimate_gpu_mode.py --paper        # the paper-scale CLI runs

Nothing is run on a GPU. For every kind of training step and evaluation batch a chapter's
GPU mode (``annotated_ssm.book.recipes``) executes, the script compiles the step for the
default backend (the CPU here), at the chapter's shapes, and reads

- ``cost_analysis()``: the floating-point operations and the bytes the step reads and
  writes in memory;
- ``memory_analysis()``: the bytes of its arguments, outputs and temporaries, the memory
  it needs on the device.

The time model, per step or evaluation batch, is

    t = max(bytes / bandwidth, flops / peak) / EFFICIENCY + FLOOR

with the GPUs' figures below (float32 without TF32: a T4 has none, and the SSM layers ask
for full precision on an H100). EFFICIENCY = 0.5 because XLA's fused kernels at these
sizes reach about half of the peak bandwidth at best. FLOOR = 10 ms is the time of a step
that moves almost nothing: a small model's step on a GPU is bound by launching its hundreds
of kernels and by Python's dispatch, not by the device. It is the one figure measured on a
GPU: chapter 8's CPU recipe, whose steps need under 0.1 ms of memory traffic, took 169-216 s
for its 17,280 steps of validation grid on an H100 (10-12 ms a step, with other chapters
running beside it). Every fit compiles its training step again (a new optimiser is a new
program), while the evaluation, which has no optimiser, compiles once per model shape (for
its full and its last, partial batch); a compilation is charged the CPU time it takes here
(process time, so that other programs on the machine do not count). That is conservative:
the floor's measurement above already contains its runs' compilations. The
chapter's other cells (data, probe, figures) are charged their time in CPU mode.

The CPU's cost analysis counts what the CPU program does: a GPU program of the same model
fuses differently, so the estimates are good to a factor of about two, not better. They
are estimates, not measurements.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

GIB = 2**30

# S6's chunked scan computes a chunk's states step by step on a CPU and by the parallel scan
# elsewhere (``scan.selective_scan``'s default for the backend); the programs here are
# compiled on the CPU but stand for a GPU's, so they ask for the GPU's method.
GPU_LAYER_OPTIONS = {"s6": {"within_chunk": "associative"}}

# name: (memory bandwidth in bytes/s, float32 peak in FLOP/s, memory JAX may use in bytes)
GPUS = {
    "T4": (300e9, 8.1e12, 13 * GIB),  # Colab's T4: 15 GB, of which JAX takes about 13 GiB
    "H100": (3.35e12, 51e12, 75 * GIB),  # SXM; float32 without TF32 (precision HIGHEST)
}
EFFICIENCY = 0.5
FLOOR = 10e-3
OTHER_CELLS = {8: 90.0, 9: 30.0, 10: 50.0}  # seconds of a chapter's other cells, as in CPU mode


@dataclasses.dataclass
class Step:
    """One compiled program and how many times a chapter's GPU mode runs it."""
    name: str
    flops: float
    bytes: float
    memory: int  # arguments + outputs + temporaries
    compile_seconds: float
    calls: int  # how many times it runs
    compilations: int  # how many times it is compiled
    program: object = dataclasses.field(repr=False)  # the compiled program
    state: tuple = dataclasses.field(repr=False)  # its leading arguments: parameters, ...

    def run(self, *data):
        """Run the compiled program on its state and ``data`` (the batch's arrays)."""
        return self.program(*self.state, *data)

    def seconds(self, gpu: str) -> float:
        bandwidth, peak, _ = GPUS[gpu]
        per_call = max(self.bytes / bandwidth, self.flops / peak) / EFFICIENCY + FLOOR
        return self.calls * per_call + self.compilations * self.compile_seconds


def analyse(function, state: tuple, *data, name: str, calls: int, compilations: int) -> Step:
    """Compile ``jax.jit(function)`` for ``(*state, *data)`` (the state's arrays, the data's
    shapes as ShapeDtypeStructs) and read its cost and memory analysis."""
    import jax

    start = time.process_time()  # CPU time: programs running beside this one do not count
    compiled = jax.jit(function).lower(*state, *data).compile()
    seconds = time.process_time() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    memory = compiled.memory_analysis()
    total = (memory.argument_size_in_bytes + memory.output_size_in_bytes
             + memory.temp_size_in_bytes - memory.alias_size_in_bytes)
    return Step(name, float(cost.get("flops", 0.0)), float(cost.get("bytes accessed", 0.0)),
                int(total), seconds, calls, compilations, compiled, state)


def classifier_steps(model_config, config, *, length: int, channels: int, n_classes: int,
                     n_train: int, n_eval_per_fit: int, fits: int, name: str,
                     eval_batches_extra: int = 0):
    """The training step and evaluation batch of ``fit`` for a classifier, as programs of
    the model's state: (step, evaluation)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from annotated_ssm.model import SequenceClassifier
    from annotated_ssm.train import _eval_step, make_optimizer, train_step

    model = SequenceClassifier(model_config, channels, n_classes, rngs=nnx.Rngs(0))
    n_val = int(round(config.validation_fraction * n_train))  # train.count_steps's budget
    steps = (n_train - n_val) // config.batch_size * config.epochs
    if config.max_steps is not None:
        steps = min(steps, config.max_steps)
    optimizer = make_optimizer(model, config, steps)
    graphdef, state = nnx.split((model, optimizer))

    def train(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss = train_step(model, optimizer, x, y)
        return loss, nnx.state((model, optimizer))

    def evaluation(state, x, y, mask):
        model, _ = nnx.merge(graphdef, state)
        model.eval()
        return _eval_step(model, x, y, mask, "classification")

    batch, eval_batch = config.batch_size, config.eval_batch_size
    x = jax.ShapeDtypeStruct((batch, length, channels), jnp.float32)
    y = jax.ShapeDtypeStruct((batch,), jnp.int32)
    step = analyse(train, (state,), x, y, name=f"{name}: step (B = {batch})", calls=fits * steps,
                   compilations=fits)
    x = jax.ShapeDtypeStruct((eval_batch, length, channels), jnp.float32)
    y = jax.ShapeDtypeStruct((eval_batch,), jnp.int32)
    mask = jax.ShapeDtypeStruct((eval_batch,), jnp.float32)
    batches = -(-n_val // eval_batch) * config.epochs + -(-n_eval_per_fit // eval_batch)
    evaluation = analyse(evaluation, (state,), x, y, mask, name=f"{name}: evaluation "
                         f"(B = {eval_batch})", calls=fits * batches + eval_batches_extra,
                         compilations=2)
    return step, evaluation


def training_chapter_steps(mode: str = "gpu") -> list[Step]:
    """Chapter 8: the comparison (4 layers × (4 grid points + 2 seeds)), the long-range
    ablation (2 initialisations × 3 seeds) and the generator."""
    from annotated_ssm.book.recipes import training_chapter

    sizes = training_chapter(mode)
    steps = []
    for layer in ("s4", "dss", "s4d", "s5"):
        state = sizes["MODEL"].state_size * (2 if layer == "s5" else 1)
        config = dataclasses.replace(sizes["MODEL"], layer=layer, state_size=state)
        # MNIST-1D: 4000 training sequences of 40 steps; the shift test predicts 1000 + 8 × 2000
        # sequences for each of the 3 trained models, in batches of 500
        steps += classifier_steps(config, sizes["RECIPE"], length=40, channels=1, n_classes=10,
                                  n_train=4000, n_eval_per_fit=1000, fits=6, name=layer,
                                  eval_batches_extra=3 * 34)
    long, recipe = sizes["LONG"], sizes["LONG_RECIPE"]
    n_train = long["num_samples"] * 4 // 5  # mnist1d_long keeps a fifth for the test set
    steps += classifier_steps(sizes["LONG_MODEL"], recipe, length=long["length"], channels=1,
                              n_classes=10, n_train=n_train,
                              n_eval_per_fit=long["num_samples"] - n_train, fits=6,
                              name=f"long, L = {long['length']}")
    return steps


def selective_chapter_steps(mode: str = "gpu", layers=("s4d", "s6")) -> list[Step]:
    """Chapter 9: per layer (S4D, S6), one run per learning rate and two more seeds, each of
    STEPS steps; evaluations of 2000 sequences (validation once per rate, test per seed)."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from annotated_ssm.book.recipes import selective_chapter
    from annotated_ssm.model import CausalSequenceModel

    sizes = selective_chapter(mode)
    task, M = sizes["TASK"], sizes["TASK"]["n_memorize"]
    length, vocab = task["length"] + M, task["vocab"]
    runs = len(sizes["LEARNING_RATES"]) + 2
    direction = optax.chain(optax.clip_by_global_norm(1.0), optax.scale_by_adam())
    steps = []
    for layer in layers:  # chapter 9's `build`, `train_step` and `predict`
        model = CausalSequenceModel(layer, vocab, vocab, d_model=sizes["WIDTH"], n_layers=2,
                                    state_size=sizes["STATE"], step_min=0.01, step_max=1.0,
                                    dropout=0.0, rngs=nnx.Rngs(0),
                                    layer_options=GPU_LAYER_OPTIONS.get(layer, {}))
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        opt_state = direction.init(params)

        def loss_fn(params, x, y, graphdef=graphdef, rest=rest):
            logits = nnx.merge(graphdef, params, rest)(jax.nn.one_hot(x, vocab))[:, -M:]
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        def train(params, opt_state, x, y, loss_fn=loss_fn):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            updates, opt_state = direction.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        def predict(params, x, graphdef=graphdef, rest=rest):
            return nnx.merge(graphdef, params, rest)(jax.nn.one_hot(x, vocab))[:, -M:].argmax(-1)

        batch, eval_batch = sizes["BATCH"], sizes["EVAL_BATCH"]
        x = jax.ShapeDtypeStruct((batch, length), jnp.int32)
        y = jax.ShapeDtypeStruct((batch, M), jnp.int32)
        steps.append(analyse(train, (params, opt_state), x, y,
                             name=f"{layer}: step (B = {batch})", calls=runs * sizes["STEPS"],
                             compilations=1))
        x = jax.ShapeDtypeStruct((eval_batch, length), jnp.int32)
        evaluations = (len(sizes["LEARNING_RATES"]) + 3) * -(-2000 // eval_batch)
        steps.append(analyse(predict, (params,), x, name=f"{layer}: evaluation (B = {eval_batch})",
                             calls=evaluations, compilations=1))
    return steps


def duality_chapter_configs(sizes: dict) -> dict:
    """Chapter 10's three models (its ``CONFIGS``), at the sizes of one mode."""
    from annotated_ssm.config import ModelConfig

    common = dict(d_model=sizes["WIDTH"], n_layers=2, state_size=sizes["STATE"],
                  pooling="last")
    return {
        "s4d": ModelConfig(layer="s4d", step_min=0.01, step_max=1.0, **common),
        "mamba": ModelConfig(layer="s6", block="mamba", **common),
        "mamba2": ModelConfig(layer="ssd", block="mamba2",
                              layer_options={"head_dim": sizes["HEAD_DIM"]}, **common),
    }


def with_gpu_methods(model):
    """``model`` with every S6 layer inside it (a Mamba block's too, which takes no layer
    options) set to the GPU's method within a chunk (``GPU_LAYER_OPTIONS``)."""
    from flax import nnx

    from annotated_ssm.layers import S6Layer

    for _, node in nnx.iter_graph(model):
        if isinstance(node, S6Layer):
            node.within_chunk = GPU_LAYER_OPTIONS["s6"]["within_chunk"]
    return model


def duality_chapter_steps(mode: str = "gpu", models=("s4d", "mamba", "mamba2"),
                          seeds: int = 3) -> list[Step]:
    """Chapter 10: per model, the seeds trained side by side (``jax.vmap``) for STEPS steps,
    then one evaluation of the TEST sequences (chapter 10's ``train_seeds``)."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from annotated_ssm.book.recipes import duality_chapter
    from annotated_ssm.model import SequenceClassifier

    sizes = duality_chapter(mode)
    task, n_steps, batch = sizes["TASK"], sizes["STEPS"], sizes["BATCH"]
    channels, length = task["keys"] + task["values"], 2 * task["pairs"] + 1
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(
        optax.warmup_cosine_decay_schedule(0.0, sizes["LEARNING_RATE"], n_steps // 10, n_steps)))
    configs = duality_chapter_configs(sizes)
    steps = []
    for name in models:
        replicas = [with_gpu_methods(SequenceClassifier(configs[name], channels, task["values"],
                                                        rngs=nnx.Rngs(seed)))
                    for seed in range(seeds)]
        graphdef, _, rest = nnx.split(replicas[0], nnx.Param, ...)
        params = jax.tree.map(lambda *p: jnp.stack(p),
                              *[nnx.split(m, nnx.Param, ...)[1] for m in replicas])
        opt_state = jax.vmap(optimizer.init)(params)

        def logits(p, tokens, graphdef=graphdef, rest=rest):
            return nnx.merge(graphdef, p, rest)(jax.nn.one_hot(tokens, channels))

        @jax.vmap
        def train(p, opt_state, tokens, labels, logits=logits):
            def loss(p):
                return optax.softmax_cross_entropy_with_integer_labels(
                    logits(p, tokens), labels).mean()
            updates, opt_state = optimizer.update(jax.grad(loss)(p), opt_state, p)
            return optax.apply_updates(p, updates), opt_state

        def predict(p, tokens, logits=logits):
            return jax.vmap(logits, (0, None))(p, tokens).argmax(-1)

        x = jax.ShapeDtypeStruct((seeds, batch, length), jnp.int32)
        y = jax.ShapeDtypeStruct((seeds, batch), jnp.int32)
        steps.append(analyse(train, (params, opt_state), x, y,
                             name=f"{name}: step ({seeds} × B = {batch})", calls=n_steps,
                             compilations=1))
        x = jax.ShapeDtypeStruct((sizes["TEST"], length), jnp.int32)
        steps.append(analyse(predict, (params,), x,
                             name=f"{name}: evaluation (B = {sizes['TEST']})", calls=1,
                             compilations=1))
    return steps


def chapter_estimate(chapter: int, steps: list[Step]) -> list[str]:
    """The lines printed for one chapter: each program, then the totals per GPU."""
    lines = [f"Chapter {chapter}, GPU mode",
             f"  {'program':34s} {'GFLOP':>8s} {'GB moved':>9s} {'memory':>10s} {'calls':>7s} "
             f"{'compile':>8s}"]
    for step in steps:
        lines.append(f"  {step.name:34s} {step.flops / 1e9:8.2f} {step.bytes / 1e9:9.3f} "
                     f"{step.memory / GIB:6.2f} GiB {step.calls:7,d} {step.compile_seconds:6.1f} s")
    for gpu, (_, _, capacity) in GPUS.items():
        total = sum(step.seconds(gpu) for step in steps) + OTHER_CELLS[chapter]
        largest = max(step.memory for step in steps)
        fits = "fits" if largest <= capacity else "DOES NOT FIT"
        lines.append(f"  {gpu:4s}: about {total / 60:5.1f} minutes; largest program "
                     f"{largest / GIB:.2f} GiB ({fits} in {capacity / GIB:.0f} GiB)")
    return lines


# The paper-scale runs, one seed of one layer each, with the command line
# (annotated-ssm-train): sequential MNIST and CIFAR at the sizes of the S4D and S5 papers'
# runs (width 128 and 4 blocks; width 512 and 6 blocks), 100 epochs, and S6 on sequential
# MNIST with Mamba's N = 16.
PAPER_RUNS = (
    dict(layer="s4d", dataset="smnist", length=784, channels=1, n_train=60_000, d_model=128,
         n_layers=4, state_size=64),
    dict(layer="s4d", dataset="scifar", length=1024, channels=3, n_train=50_000, d_model=512,
         n_layers=6, state_size=64),
    dict(layer="s6", dataset="smnist", length=784, channels=1, n_train=60_000, d_model=128,
         n_layers=4, state_size=16),
)
PAPER_RECIPE = dict(epochs=100, batch_size=50, lr=4e-3, ssm_lr=1e-3, weight_decay=0.05,
                    eval_batch_size=100)


def paper_command(run: dict) -> str:
    """The command line of one paper-scale run."""
    recipe = PAPER_RECIPE
    return (f"annotated-ssm-train --dataset {run['dataset']} --layer {run['layer']} "
            f"--d-model {run['d_model']} --n-layers {run['n_layers']} "
            f"--state-size {run['state_size']} --bidirectional --dropout 0.1 "
            f"--epochs {recipe['epochs']} --batch-size {recipe['batch_size']} "
            f"--lr {recipe['lr']:g} --ssm-lr {recipe['ssm_lr']:g} "
            f"--weight-decay {recipe['weight_decay']:g} "
            f"--eval-batch-size {recipe['eval_batch_size']} "
            f"--checkpoint runs/{run['dataset']}-{run['layer']}")


def paper_estimates() -> list[str]:
    """The lines printed for the paper-scale runs: each command, then hours per GPU."""
    from annotated_ssm.config import ModelConfig, TrainConfig

    lines = ["Paper-scale runs (one seed of one layer each; the command line):"]
    for run in PAPER_RUNS:
        config = ModelConfig(layer=run["layer"], d_model=run["d_model"],
                             n_layers=run["n_layers"], state_size=run["state_size"],
                             bidirectional=True, dropout=0.1,
                             layer_options=GPU_LAYER_OPTIONS.get(run["layer"], {}))
        steps = classifier_steps(config, TrainConfig(**PAPER_RECIPE), length=run["length"],
                                 channels=run["channels"], n_classes=10, n_train=run["n_train"],
                                 n_eval_per_fit=10_000, fits=1,
                                 name=f"{run['layer']}, {run['dataset']}")
        lines.append("  " + paper_command(run))
        for gpu, (_, _, capacity) in GPUS.items():
            hours = sum(step.seconds(gpu) for step in steps) / 3600
            largest = max(step.memory for step in steps)
            lines.append(f"    {gpu:4s}: about {hours:5.1f} hours; largest program "
                         f"{largest / GIB:.2f} GiB (limit {capacity / GIB:.0f} GiB)")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", type=int, choices=(8, 9, 10), nargs="*",
                        default=[8, 9, 10])
    parser.add_argument("--paper", action="store_true", help="also the paper-scale CLI runs")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # compile times are part of it
    print("Model: t = max(bytes / bandwidth, flops / peak) / "
          f"{EFFICIENCY} + {FLOOR * 1e3:.0f} ms per call, plus compilations; "
          + "; ".join(f"{gpu} {bw / 1e9:.0f} GB/s, {peak / 1e12:.1f} TFLOP/s float32"
                      for gpu, (bw, peak, _) in GPUS.items()))
    builders = {8: training_chapter_steps, 9: selective_chapter_steps,
                10: duality_chapter_steps}
    for chapter in args.chapter:
        print("\n".join(chapter_estimate(chapter, builders[chapter]("gpu"))))
    if args.paper:
        print("\n".join(paper_estimates()))


if __name__ == "__main__":
    main()
