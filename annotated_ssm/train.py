"""Training: optax AdamW with the SSM papers' parameter groups, jitted steps, evaluation,
checkpoints, data parallelism, and a command line.

The recipe of S4/DSS/S4D/S5:

- AdamW with a cosine learning-rate schedule after a linear warm-up;
- the state-space parameters (Λ or A, P, B, log Δ — everything tagged ``SSMParam``) get
  their own, smaller learning rate and no weight decay: decaying them would pull the
  eigenvalues towards 0 and destroy the long memory the initialisation set up.

Data parallelism: the batch is split along its first axis over a ``Mesh`` of all local
devices and the parameters are replicated; ``jit`` then runs one shard per device and XLA
inserts the gradient all-reduce. On one device the mesh has one entry and nothing changes.

Command line::

    python -m annotated_ssm.train --layer s4d --dataset mnist1d --epochs 20
    python -m annotated_ssm.train --help
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ._validation import check_positive_int
from .data import DATASETS, Dataset, batches, load_dataset
from .layers import LAYERS, SSMParam
from .model import NORMS, POOLINGS, CausalSequenceModel, SequenceClassifier, SequenceModel

__all__ = [
    "TrainConfig",
    "History",
    "build_model",
    "check_model_matches",
    "make_optimizer",
    "ssm_labels",
    "make_mesh",
    "replicate",
    "shard_batch",
    "train_step",
    "evaluate",
    "fit",
    "count_params",
    "save_checkpoint",
    "restore_checkpoint",
    "main",
]


@dataclasses.dataclass
class TrainConfig:
    """Hyper-parameters of a run.

    Attributes:
        epochs: passes over the training set.
        batch_size: global batch (split over devices; must be divisible by their number).
        lr: peak learning rate of all ordinary parameters (AdamW).
        ssm_lr: peak learning rate of the ``SSMParam`` parameters (Adam, no weight decay).
        weight_decay: AdamW decoupled weight decay of the ordinary parameters.
        warmup_fraction: share of the steps spent warming the learning rate up from 0.
        seed: shuffling seed; epoch e uses ``seed + e``, so a run is reproducible.
        max_steps: stop after this many steps (None: no limit).
        time_budget: stop after this many seconds of training (None: no limit).
        eval_batch_size: batch size for evaluation.
        progress: show a tqdm progress bar.
    """

    epochs: int = 10
    batch_size: int = 64
    lr: float = 4e-3
    ssm_lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_fraction: float = 0.1
    seed: int = 0
    max_steps: int | None = None
    time_budget: float | None = None
    eval_batch_size: int = 500
    progress: bool = True


@dataclasses.dataclass
class History:
    """What ``fit`` measured, one entry per completed (or budget-truncated) epoch."""

    epoch: list[int] = dataclasses.field(default_factory=list)
    steps: list[int] = dataclasses.field(default_factory=list)
    train_loss: list[float] = dataclasses.field(default_factory=list)
    test_loss: list[float] = dataclasses.field(default_factory=list)
    test_accuracy: list[float] = dataclasses.field(default_factory=list)
    epoch_time: list[float] = dataclasses.field(default_factory=list)
    stopped: str = ""

    @property
    def seconds_per_epoch(self) -> float:
        """Median epoch time, leaving out the first epoch (it includes jit compilation)."""
        times = self.epoch_time[1:] or self.epoch_time
        return float(np.median(times)) if times else float("nan")


# --- Model construction and checks ----------------------------------------------------------

def build_model(layer: str, dataset: Dataset, *, seed: int = 0, **kwargs) -> SequenceModel:
    """A model that fits ``dataset``: a ``SequenceClassifier`` with ``dataset.n_classes``
    outputs for classification, a ``CausalSequenceModel`` for per-step regression.
    ``kwargs`` go to the model (d_model, n_layers, state_size, norm, glu, dropout, …)."""
    rngs = nnx.Rngs(seed)
    if dataset.task == "classification":
        return SequenceClassifier(layer, dataset.channels, dataset.n_classes, rngs=rngs, **kwargs)
    return CausalSequenceModel(layer, dataset.channels, dataset.n_outputs, rngs=rngs, **kwargs)


def _task_of(model: SequenceModel) -> str:
    return "classification" if isinstance(model, SequenceClassifier) else "regression"


def check_model_matches(model: SequenceModel, dataset: Dataset) -> None:
    """Raise ValueError, before any compilation, if the model cannot train on the dataset."""
    if _task_of(model) != dataset.task:
        kind = "SequenceClassifier" if dataset.task == "classification" else "CausalSequenceModel"
        raise ValueError(f"dataset {dataset.name!r} is a {dataset.task} task, so it needs a {kind}; "
                         f"got a {type(model).__name__}.")
    if model.d_input != dataset.channels:
        raise ValueError(f"the model expects d_input={model.d_input} channels per step, but dataset "
                         f"{dataset.name!r} has {dataset.channels} (x_train shape {dataset.x_train.shape}); "
                         f"build the model with d_input={dataset.channels}.")
    if dataset.task == "classification" and model.n_classes != dataset.n_classes:
        raise ValueError(f"the model has n_classes={model.n_classes} outputs, but dataset {dataset.name!r} "
                         f"has {dataset.n_classes} classes.")
    if dataset.task == "regression" and model.d_output != dataset.n_outputs:
        raise ValueError(f"the model has d_output={model.d_output}, but dataset {dataset.name!r} has "
                         f"{dataset.n_outputs} targets per step (y_train shape {dataset.y_train.shape}).")


def count_params(model: nnx.Module) -> int:
    """Number of trainable scalars (nnx.Param, including SSMParam)."""
    return int(sum(np.size(leaf) for leaf in jax.tree.leaves(nnx.state(model, nnx.Param))))


# --- Optimiser ------------------------------------------------------------------------------

def ssm_labels(model: nnx.Module):
    """A function params → pytree of labels, "ssm" for ``SSMParam`` leaves, "default" else.

    The optimiser sees the parameters as a pytree whose paths start with the attribute path
    of each variable in the model (e.g. ``blocks/0/ssm/log_step``); we label a leaf "ssm"
    when its path starts with the path of an ``SSMParam``.
    """
    ssm_paths = {tuple(path) for path, _ in nnx.to_flat_state(nnx.state(model, SSMParam))}

    def key_of(k):
        for attribute in ("key", "idx", "name"):
            if hasattr(k, attribute):
                return getattr(k, attribute)
        return k

    def label(path, _):
        keys = tuple(key_of(k) for k in path)
        return "ssm" if any(keys[:n] in ssm_paths for n in range(1, len(keys) + 1)) else "default"

    return lambda params: jax.tree_util.tree_map_with_path(label, params)


def make_optimizer(model: nnx.Module, config: TrainConfig, total_steps: int) -> nnx.Optimizer:
    """AdamW (lr, weight decay) for ordinary parameters and Adam (ssm_lr, no decay) for
    ``SSMParam``s, both on a warm-up + cosine schedule over ``total_steps``."""
    total_steps = max(int(total_steps), 1)
    warmup = int(config.warmup_fraction * total_steps)

    def schedule(peak):
        return optax.warmup_cosine_decay_schedule(0.0, peak, warmup, max(total_steps, warmup + 1), 0.0)

    tx = optax.multi_transform(
        {"default": optax.adamw(schedule(config.lr), weight_decay=config.weight_decay),
         "ssm": optax.adam(schedule(config.ssm_lr))},
        ssm_labels(model),
    )
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


# --- Devices --------------------------------------------------------------------------------

def make_mesh(devices=None) -> Mesh:
    """A one-axis mesh named "data" over ``devices`` (default: all local devices)."""
    devices = jax.local_devices() if devices is None else devices
    return Mesh(np.asarray(devices), ("data",))


def replicate(tree_owner: nnx.Module | nnx.Optimizer, mesh: Mesh) -> None:
    """Place a module's (or optimiser's) whole state, replicated, on every device of ``mesh``."""
    state = nnx.state(tree_owner)
    nnx.update(tree_owner, jax.device_put(state, NamedSharding(mesh, PartitionSpec())))


def shard_batch(mesh: Mesh, *arrays):
    """Split arrays along their first axis over the mesh's "data" axis."""
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    return tuple(jax.device_put(np.asarray(a), sharding) for a in arrays)


# --- Steps ----------------------------------------------------------------------------------

def _losses(model, x, y, task):
    """Per-example loss and correctness (classification) or per-example MSE (regression)."""
    out = model(x)
    if task == "classification":
        loss = optax.softmax_cross_entropy_with_integer_labels(out, y)
        correct = (jnp.argmax(out, -1) == y).astype(jnp.float32)
    else:
        loss = jnp.mean((out - y) ** 2, axis=tuple(range(1, out.ndim)))
        correct = jnp.zeros_like(loss)
    return loss, correct


@functools.partial(nnx.jit, static_argnames="task")
def train_step(model, optimizer, x, y, task: str = "classification"):
    """One AdamW step on a batch; returns the mean loss before the update."""

    def loss_fn(model):
        return _losses(model, x, y, task)[0].mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


@functools.partial(nnx.jit, static_argnames="task")
def _eval_step(model, x, y, mask, task: str):
    loss, correct = _losses(model, x, y, task)
    return jnp.sum(loss * mask), jnp.sum(correct * mask)


def evaluate(model: SequenceModel, x: np.ndarray, y: np.ndarray, *, batch_size: int = 500,
             mesh: Mesh | None = None) -> dict[str, float]:
    """Mean loss and accuracy (classification) over (x, y), in eval mode, in stored order.

    The last batch is padded to a multiple of the device count and the padding masked out,
    so the numbers are exact whatever the batch size.
    """
    mesh = make_mesh() if mesh is None else mesh
    n_devices = mesh.devices.size
    task = _task_of(model)
    model.eval()
    total_loss = total_correct = 0.0
    for xb, yb in batches(x, y, batch_size):
        n = len(xb)
        pad = -n % n_devices
        mask = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
        if pad:
            xb = np.concatenate([xb, np.repeat(xb[-1:], pad, axis=0)])
            yb = np.concatenate([yb, np.repeat(yb[-1:], pad, axis=0)])
        loss, correct = _eval_step(model, *shard_batch(mesh, xb, yb, mask), task=task)
        total_loss += float(loss)
        total_correct += float(correct)
    result = {"loss": total_loss / len(x)}
    if task == "classification":
        result["accuracy"] = total_correct / len(x)
    return result


# --- The loop -------------------------------------------------------------------------------

def fit(model: SequenceModel, dataset: Dataset, config: TrainConfig | None = None, *,
        optimizer: nnx.Optimizer | None = None, mesh: Mesh | None = None) -> History:
    """Train ``model`` on ``dataset`` and evaluate on its test split after every epoch.

    Shuffling is seeded (epoch e uses ``config.seed + e``) and the last incomplete batch is
    dropped, so two runs with the same seeds produce the same numbers on the same machine.
    Stops early when ``config.max_steps`` or ``config.time_budget`` is reached (the partial
    epoch is still evaluated). Returns the :class:`History`.
    """
    config = TrainConfig() if config is None else config
    check_model_matches(model, dataset)
    check_positive_int("epochs", config.epochs)
    batch_size = check_positive_int("batch_size", config.batch_size)
    mesh = make_mesh() if mesh is None else mesh
    n_devices = mesh.devices.size
    if batch_size % n_devices:
        raise ValueError(f"batch_size must be divisible by the number of devices ({n_devices}) "
                         f"for data parallelism; got {batch_size}.")
    steps_per_epoch = len(dataset.x_train) // batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"batch_size must be <= the number of training samples ({len(dataset.x_train)}); "
                         f"got {batch_size}.")
    total_steps = steps_per_epoch * config.epochs
    step_budget = config.max_steps is not None and check_positive_int("max_steps", config.max_steps) < total_steps
    if step_budget:
        total_steps = config.max_steps
    if optimizer is None:
        optimizer = make_optimizer(model, config, total_steps)
    replicate(model, mesh)
    replicate(optimizer, mesh)

    from tqdm.auto import tqdm

    history = History()
    bar = tqdm(total=total_steps, disable=not config.progress, desc=f"{model.layer_name}", unit="step")
    start, step = time.perf_counter(), 0
    for epoch in range(config.epochs):
        epoch_start = time.perf_counter()
        model.train()
        losses = []
        for xb, yb in batches(dataset.x_train, dataset.y_train, batch_size, seed=config.seed + epoch, drop_last=True):
            losses.append(train_step(model, optimizer, *shard_batch(mesh, xb, yb), task=dataset.task))
            step += 1
            bar.update()
            if step >= total_steps:
                history.stopped = "step budget" if step_budget else ""
                break
            if config.time_budget is not None and time.perf_counter() - start > config.time_budget:
                history.stopped = "time budget"
                break
        train_loss = float(np.mean(jax.device_get(losses)))  # waits for the epoch's steps
        history.epoch_time.append(time.perf_counter() - epoch_start)
        metrics = evaluate(model, dataset.x_test, dataset.y_test, batch_size=config.eval_batch_size, mesh=mesh)
        history.epoch.append(epoch + 1)
        history.steps.append(step)
        history.train_loss.append(train_loss)
        history.test_loss.append(metrics["loss"])
        history.test_accuracy.append(metrics.get("accuracy", float("nan")))
        postfix = {"loss": f"{train_loss:.3f}", "test": f"{metrics['loss']:.3f}"}
        if "accuracy" in metrics:
            postfix["acc"] = f"{metrics['accuracy']:.3f}"
        bar.set_postfix(postfix)
        if history.stopped or step >= total_steps:
            break
    bar.close()
    model.eval()
    return history


# --- Checkpoints ----------------------------------------------------------------------------

def save_checkpoint(path: str | pathlib.Path, model: nnx.Module, optimizer: nnx.Optimizer | None = None) -> pathlib.Path:
    """Save the model's parameters and batch statistics (and the optimiser's state, to resume
    training) with orbax-checkpoint into the directory ``path`` (overwritten if it exists)."""
    import orbax.checkpoint as ocp

    path = pathlib.Path(path).absolute()
    tree = {"model": nnx.to_pure_dict(nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat)))}
    if optimizer is not None:
        tree["optimizer"] = nnx.to_pure_dict(nnx.state(optimizer, nnx.optimizer.OptState))
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, tree, force=True)
    return path


def restore_checkpoint(path: str | pathlib.Path, model: nnx.Module, optimizer: nnx.Optimizer | None = None) -> None:
    """Load a checkpoint written by ``save_checkpoint`` into ``model`` (and ``optimizer``) in
    place. The model must have been built with the same architecture."""
    import orbax.checkpoint as ocp

    path = pathlib.Path(path).absolute()
    target = {"model": nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat))}
    if optimizer is not None:
        target["optimizer"] = nnx.state(optimizer, nnx.optimizer.OptState)
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype),
                            {k: nnx.to_pure_dict(v) for k, v in target.items()})
    with ocp.StandardCheckpointer() as checkpointer:
        try:
            restored = checkpointer.restore(path, abstract)
        except ValueError as error:
            raise ValueError(f"the checkpoint at {path} does not fit this model/optimiser "
                             f"(different architecture?): {error}") from error
    for key, state in target.items():
        nnx.replace_by_pure_dict(state, restored[key])
    nnx.update(model, target["model"])
    if optimizer is not None:
        nnx.update(optimizer, target["optimizer"])


# --- Command line ---------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(
        prog="python -m annotated_ssm.train",
        description="Train a deep SSM (S4, DSS, S4D or S5 blocks) on a sequence dataset.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--layer", default="s4d", help=f"SSM layer: {', '.join(LAYERS)}")
    parser.add_argument("--dataset", default="mnist1d", help=f"dataset: {', '.join(DATASETS)} (smnist and scifar download)")
    parser.add_argument("--d-model", type=int, default=64, help="channels H inside the blocks")
    parser.add_argument("--n-layers", type=int, default=4, help="number of residual blocks")
    parser.add_argument("--state-size", type=int, default=64, help="state size N of each SSM")
    parser.add_argument("--step-min", type=float, default=1e-3, help="smallest initial step size Δ")
    parser.add_argument("--step-max", type=float, default=1e-1, help="largest initial step size Δ")
    parser.add_argument("--layer-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a layer-specific option, e.g. init=rand for s4d (repeatable)")
    parser.add_argument("--norm", default="layer", choices=NORMS, help="pre-norm of each block")
    parser.add_argument("--no-glu", action="store_true", help="plain Linear instead of GLU after the SSM")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--bidirectional", action="store_true", help="bidirectional layers (classification only)")
    parser.add_argument("--pooling", default="mean", choices=POOLINGS, help="how a classifier pools over time")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate (AdamW)")
    parser.add_argument("--ssm-lr", type=float, default=defaults.ssm_lr, help="peak learning rate of the SSM parameters")
    parser.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    parser.add_argument("--warmup-fraction", type=float, default=defaults.warmup_fraction)
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initialisation and the shuffling")
    parser.add_argument("--checkpoint", type=pathlib.Path, default=None, help="save the trained model to this directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _layer_options(items: list[str]) -> dict[str, Any]:
    """Parse ["init=rand", "blocks=4"] into {"init": "rand", "blocks": 4} (Python literals or strings)."""
    import ast

    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--layer-option must look like KEY=VALUE; got {item!r}.")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m annotated_ssm.train`` and ``annotated-ssm-train``."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        dataset = load_dataset(args.dataset)
        model_kwargs: dict[str, Any] = dict(d_model=args.d_model, n_layers=args.n_layers, state_size=args.state_size,
                                            norm=args.norm, glu=not args.no_glu, dropout=args.dropout,
                                            step_min=args.step_min, step_max=args.step_max)
        model_kwargs.update(_layer_options(args.layer_option))
        if dataset.task == "classification":
            model_kwargs.update(bidirectional=args.bidirectional, pooling=args.pooling)
        try:
            model = build_model(args.layer, dataset, seed=args.seed, **model_kwargs)
        except TypeError as error:  # an option the layer does not take
            raise ValueError(f"invalid --layer-option for layer {args.layer!r}: {error}") from error
        config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, ssm_lr=args.ssm_lr,
                             weight_decay=args.weight_decay, warmup_fraction=args.warmup_fraction, seed=args.seed,
                             max_steps=args.max_steps, time_budget=args.time_budget, progress=not args.no_progress)
        print(f"{dataset}\n{args.layer}: {count_params(model):,} parameters on {len(jax.local_devices())} device(s)")
        history = fit(model, dataset, config)
    except (ValueError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    summary = {"layer": args.layer, "dataset": args.dataset, "epochs": len(history.epoch), "steps": history.steps[-1],
               "test_loss": round(history.test_loss[-1], 4), "seconds_per_epoch": round(history.seconds_per_epoch, 2)}
    if dataset.task == "classification":
        summary["test_accuracy"] = round(history.test_accuracy[-1], 4)
    if history.stopped:
        summary["stopped"] = history.stopped
    if args.checkpoint is not None:
        summary["checkpoint"] = str(save_checkpoint(args.checkpoint, model))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
