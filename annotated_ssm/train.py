"""Training: optax AdamW with the SSM papers' parameter groups, jitted steps, evaluation,
checkpoints, data parallelism, and runs over several seeds.

The recipe of S4/DSS/S4D/S5:

- AdamW with a cosine learning-rate schedule after a linear warm-up;
- the state-space parameters (Λ or A, P, B, log Δ — everything tagged ``SSMParam``) get
  their own, smaller learning rate and no weight decay: decaying them would pull the
  eigenvalues towards 0 and destroy the long memory the initialisation set up.

Data parallelism: the batch is split along its first axis over a ``Mesh`` of all local
devices and the parameters are replicated; ``jit`` then runs one shard per device and XLA
inserts the gradient all-reduce. On one device the mesh has one entry and nothing changes.

Runs are described by two dataclasses (``annotated_ssm.config``): ``ModelConfig`` (the
architecture) and ``TrainConfig`` (optimiser, step budget, validation split, seed). ``fit``
holds out a seeded validation split, keeps the weights of the best epoch on it, and
evaluates the test set once, at the end; ``fit_seeds`` repeats a run over seeds and
summarises mean ± standard deviation. Checkpoints (``annotated_ssm.checkpoint``) record the
architecture, so ``load_model(path)`` rebuilds a model without repeating it.

Training is a resumable state: given a run folder, ``fit`` saves model, optimiser,
dropout streams, step and history to ``folder/last`` (periodically, on Ctrl-C and at the
end) and the best model on validation to ``folder/best``; ``fit(..., resume_from=folder)``
continues bit for bit where it stopped.

The command line is ``annotated_ssm.cli`` (``python -m annotated_ssm.train`` runs it too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import pathlib
import shutil
import signal
import sys
import threading
import time
import zlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from .checkpoint import (check_checkpoint_path, check_metadata, check_path_names, is_stale,
                         load_model, mark_stale, read_checkpoint_info, recover_checkpoint,
                         restore_checkpoint, save_checkpoint)
from ._validation import check_bool, check_seed
from .config import ModelConfig, TrainConfig
from .data import Dataset, batches, check_dataset, validation_split
from .layers import SSMParam
from .model import CausalSequenceModel, SequenceClassifier, SequenceModel

__all__ = [
    "ModelConfig",
    "TrainConfig",
    "History",
    "DivergedError",
    "TrainingInterrupted",
    "check_run_folder",
    "SeedResults",
    "build_model",
    "check_model_matches",
    "make_optimizer",
    "ssm_labels",
    "make_mesh",
    "replicate",
    "shard_batch",
    "train_step",
    "evaluate",
    "count_steps",
    "fit",
    "fit_seeds",
    "count_params",
    "save_checkpoint",
    "restore_checkpoint",
    "load_model",
    "read_checkpoint_info",
]


@dataclasses.dataclass
class History:
    """What ``fit`` measured.

    Per epoch (lists, one entry per completed or budget-truncated epoch): ``epoch``,
    ``steps`` (optimiser steps so far), ``train_loss``, ``val_loss``, ``val_accuracy``
    (NaN when there is no validation split; accuracy NaN for regression), ``epoch_time``.

    Once, at the end: ``best_epoch`` (the epoch whose weights the model holds after ``fit``:
    the best on validation with ``keep_best``, else the last), ``test_loss`` and
    ``test_accuracy`` (the test set evaluated once, with those weights), ``stopped`` ("step
    budget" when ``max_steps`` ended the run before ``epochs``).
    """

    epoch: list[int] = dataclasses.field(default_factory=list)
    steps: list[int] = dataclasses.field(default_factory=list)
    train_loss: list[float] = dataclasses.field(default_factory=list)
    val_loss: list[float] = dataclasses.field(default_factory=list)
    val_accuracy: list[float] = dataclasses.field(default_factory=list)
    epoch_time: list[float] = dataclasses.field(default_factory=list)
    best_epoch: int | None = None
    test_loss: float = float("nan")
    test_accuracy: float = float("nan")
    stopped: str = ""

    @property
    def seconds_per_epoch(self) -> float:
        """Median epoch time, leaving out the first epoch (it includes jit compilation)."""
        times = self.epoch_time[1:] or self.epoch_time
        return float(np.median(times)) if times else float("nan")


class DivergedError(FloatingPointError):
    """The training loss became NaN or infinite. ``step`` is the first bad optimiser step;
    ``history`` what was measured before it. The model's weights are not trustworthy."""

    def __init__(self, message: str, step: int, history: History):
        super().__init__(message)
        self.step = step
        self.history = history


# --- Model construction and checks ----------------------------------------------------------

def build_model(layer: str | ModelConfig, dataset: Dataset, *, seed: int = 0,
                **kwargs) -> SequenceModel:
    """A model that fits ``dataset``: a ``SequenceClassifier`` with ``dataset.n_classes``
    outputs for classification, a ``CausalSequenceModel`` for per-step regression.

    ``layer`` is a :class:`ModelConfig`, or a layer name with the config's fields and layer
    options as keywords (see :class:`~annotated_ssm.model.SequenceModel`). ``seed`` seeds
    the initialisation.
    """
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
        raise ValueError(f"dataset {dataset.name!r} is a {dataset.task} task, so it needs a "
                         f"{kind}; got a {type(model).__name__}.")
    if model.d_input != dataset.channels:
        raise ValueError(f"the model expects d_input={model.d_input} channels per step, but "
                         f"dataset {dataset.name!r} has {dataset.channels} (x_train shape "
                         f"{dataset.x_train.shape}); build the model with "
                         f"d_input={dataset.channels}.")
    if dataset.task == "classification" and model.n_classes != dataset.n_classes:
        raise ValueError(f"the model has n_classes={model.n_classes} outputs, but dataset "
                         f"{dataset.name!r} has {dataset.n_classes} classes.")
    if dataset.task == "regression" and model.d_output != dataset.n_outputs:
        raise ValueError(f"the model has d_output={model.d_output}, but dataset {dataset.name!r} "
                         f"has {dataset.n_outputs} targets per step (y_train shape "
                         f"{dataset.y_train.shape}).")


def count_params(model: nnx.Module) -> int:
    """Number of trainable scalars (nnx.Param, including SSMParam)."""
    return int(sum(np.size(leaf) for leaf in jax.tree.leaves(nnx.state(model, nnx.Param))))


# --- Optimiser ------------------------------------------------------------------------------

def ssm_labels(model: nnx.Module):
    """A function params → pytree of labels, "ssm" for ``SSMParam`` leaves, "default" else.

    The optimiser sees the parameters as a pytree whose paths start with the attribute path
    of each variable in the model (e.g. ``blocks/0/ssm/log_step_size``); we label a leaf "ssm"
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
        return optax.warmup_cosine_decay_schedule(0.0, peak, warmup, max(total_steps, warmup + 1),
                                                  0.0)

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

def count_steps(config: TrainConfig, dataset: Dataset) -> int:
    """The run's step budget: ``min(epochs × steps per epoch, max_steps)``, where an epoch is
    the training set left after the validation split, in batches (the last partial batch is
    dropped). The learning-rate schedule spans exactly these steps."""
    n_train = len(dataset.x_train) - _n_validation(config, dataset)
    steps_per_epoch = n_train // config.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"batch_size must be <= the number of training samples ({n_train} after "
                         f"the validation split); got {config.batch_size}.")
    total = steps_per_epoch * config.epochs
    return total if config.max_steps is None else min(total, config.max_steps)


def _n_validation(config: TrainConfig, dataset: Dataset) -> int:
    return int(round(config.validation_fraction * len(dataset.x_train)))


def _score(metrics: dict[str, float]) -> float:
    """Higher is better: accuracy for classification, minus the loss for regression."""
    return metrics["accuracy"] if "accuracy" in metrics else -metrics["loss"]


# --- Run folders: the training state and the best model, side by side ----------------------

LAST, BEST = "last", "best"


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped ``fit`` after it saved the training state: ``step`` is the
    last step done, ``path`` the run folder to give ``fit(..., resume_from=path)``."""

    def __init__(self, step: int, path: pathlib.Path):
        super().__init__(f"interrupted at step {step}; the training state is saved in "
                         f"{str(path / LAST)!r}: resume with fit(..., resume_from={str(path)!r}) "
                         "or --resume.")
        self.step = step
        self.path = path


def check_run_folder(path: str | os.PathLike, *, resume: bool = False) -> pathlib.Path:
    """Return ``path`` (absolute) if ``fit`` may keep a run there; else raise ValueError.

    A run folder holds ``last/`` (the training state: model, optimiser, dropout streams,
    step, history) and ``best/`` (the best epoch's model on validation), both checkpoints
    (:mod:`annotated_ssm.checkpoint`), and nothing else but their save's temporary siblings.
    Every name a save will create is checked here (see ``check_checkpoint_path``). Without
    ``resume``, an unfinished training state is refused (it would be overwritten).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("checkpoint must be a str or os.PathLike (a run folder); got "
                        f"{type(path).__name__}.")
    path = check_path_names(path)  # names too long, before anything looks at them
    cwd = pathlib.Path.cwd().resolve()
    if path.resolve() == cwd or path.resolve() in cwd.parents:
        raise ValueError(f"checkpoint folder {str(path)!r} is the current directory or contains "
                         f"it; choose a new sub-folder, e.g. {str(path / 'runs' / 'run')!r}.")
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ValueError(f"checkpoint folder {str(path)!r} exists and is not a directory; choose "
                         "another path.")
    if path.is_dir():
        ours = (LAST, BEST, f".{LAST}.", f".{BEST}.")  # the two and their temporary siblings
        foreign = sorted(p.name for p in path.iterdir()
                         if p.name not in ours[:2] and not p.name.startswith(ours[2:]))
        if foreign:
            raise ValueError(f"checkpoint folder {str(path)!r} holds files that are not a training "
                             f"run's ({foreign[:5]}); choose a new or empty folder.")
    for name in (LAST, BEST):
        check_checkpoint_path(path / name)
    if not resume and (path / LAST).exists():
        state = read_checkpoint_info(path / LAST).get("training_state") or {}
        if not state.get("finished", True):
            raise ValueError(f"{str(path)!r} holds an unfinished run (step {state.get('step')} of "
                             f"{state.get('total_steps')}); resume it (fit(..., resume_from=...) "
                             "or --resume), or choose another folder.")
    return path


def _fingerprint(dataset: Dataset) -> dict[str, Any]:
    """What identifies a data set well enough to refuse resuming on another one."""
    def crc(a):
        return zlib.crc32(np.ascontiguousarray(a).view(np.uint8))
    return {"name": dataset.name, "x_train": list(dataset.x_train.shape),
            "x_test": list(dataset.x_test.shape),
            "crc32": crc(dataset.x_train) ^ crc(dataset.y_train)}


def _config_differences(stored: dict | None, config: TrainConfig) -> list[str]:
    ours = dataclasses.asdict(config)
    stored = stored or {}
    return [f"{k}: stored {stored.get(k)!r}, given {ours[k]!r}" for k in ours
            if k not in TrainConfig.RESUME_IRRELEVANT and stored.get(k) != ours[k]]


def _saved_training_state(folder: pathlib.Path) -> tuple[dict, dict]:
    """(metadata, training state) of the run saved in ``folder/last``, after recovering a
    save that crashed between its two renames; ValueError if ``fit`` did not save it."""
    recover_checkpoint(folder / LAST)
    if not (folder / LAST).exists():
        raise ValueError(f"there is no run to resume in {str(folder)!r} (it holds no {LAST!r} "
                         "checkpoint); start the run without resume_from / --resume.")
    info = read_checkpoint_info(folder / LAST)
    state = info.get("training_state")
    if not isinstance(state, dict) or "history" not in state:
        raise ValueError(f"{str(folder / LAST)!r} holds no training state (it was not saved by "
                         "fit); resume from a run folder that fit or the command line saved to.")
    return info, state


class _Run:
    """Where ``fit`` is: history, best score, this epoch's losses; saves and restores them.

    Without a folder (``path`` None) it only keeps the numbers; with one it saves the
    training state to ``path/last`` and each new best model to ``path/best``.
    """

    def __init__(self, path: pathlib.Path | None, config: TrainConfig, dataset: Dataset,
                 total_steps: int):
        self.path, self.config, self.total_steps = path, config, total_steps
        self.fingerprint = _fingerprint(dataset) if path is not None else None
        self.history = History()
        self.best_score, self.best_state, self.best_dirty = -math.inf, None, False
        self.epoch_losses: list = []  # this epoch's step losses (device arrays or floats)
        self.saved_step, self.saved_time = None, time.monotonic()
        self.finished = False  # resumed from a run that had ended: nothing left to train

    def training_state(self, step: int, finished: bool) -> dict:
        best = None if self.history.best_epoch is None else {"epoch": self.history.best_epoch,
                                                            "score": self.best_score}
        return {"step": step, "total_steps": self.total_steps, "finished": finished,
                "epoch_losses": [float(v) for v in jax.device_get(self.epoch_losses)],
                "history": dataclasses.asdict(self.history), "best": best,
                "dataset": self.fingerprint}

    def due(self, step: int, interrupted: bool) -> bool:
        """Is a save of the training state due after ``step``?"""
        if self.path is None or step == self.saved_step:
            return False
        every, minutes = self.config.save_every_steps, self.config.save_every_minutes
        return (interrupted or (every is not None and step - (self.saved_step or 0) >= every)
                or (minutes is not None and time.monotonic() - self.saved_time >= 60 * minutes))

    def save(self, model, optimizer, step: int, *, finished: bool = False) -> None:
        if self.best_dirty:  # resumed from another folder: carry its best model over
            self.save_best(model)
        save_checkpoint(self.path / LAST, model, optimizer, config=self.config,
                        training_state=self.training_state(step, finished))
        self.saved_step, self.saved_time = step, time.monotonic()

    def new_best(self, model, score: float, epoch: int) -> None:
        self.best_score, self.history.best_epoch = score, epoch
        self.best_state = jax.device_get(nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat)))
        if self.path is not None:
            self.save_best(model)

    def save_best(self, model) -> None:
        best = model
        if self.best_state is not None:  # the best weights, in a copy of the model
            best = nnx.clone(model)
            nnx.update(best, self.best_state)
        save_checkpoint(self.path / BEST, best, config=self.config,
                        training_state={"epoch": self.history.best_epoch, "score": self.best_score})
        self.best_dirty = False

    def resume(self, folder: pathlib.Path, model, optimizer, dataset: Dataset) -> int:
        """Restore model, optimiser, dropout streams and progress from ``folder/last``;
        return the step to continue from."""
        info, state = _saved_training_state(folder)
        differ = _config_differences(info.get("train_config"), self.config)
        if differ:
            raise ValueError(f"the run in {str(folder)!r} was trained with another TrainConfig "
                             f"({'; '.join(differ)}); resume it with the same one (only "
                             f"{', '.join(TrainConfig.RESUME_IRRELEVANT)} may change).")
        if state["dataset"] != _fingerprint(dataset):
            raise ValueError(f"the run in {str(folder)!r} was trained on another data set "
                             f"({state['dataset']}); this one is {_fingerprint(dataset)}.")
        restore_checkpoint(folder / LAST, model, optimizer)
        self.finished = bool(state["finished"])
        self.history = History(**state["history"])
        self.epoch_losses = list(np.asarray(state["epoch_losses"], np.float32))
        if state["best"] is not None:
            self.best_score = state["best"]["score"]
            best_info = read_checkpoint_info(folder / BEST)
            if best_info["training_state"]["epoch"] == state["best"]["epoch"]:
                best = load_model(folder / BEST)
                self.best_state = jax.device_get(nnx.state(best, nnx.Any(nnx.Param, nnx.BatchStat)))
                self.best_dirty = self.path is not None and self.path != folder
            # else: best/ was written by a later epoch just before a crash; that epoch is
            # trained again and, being better, saved again, with the same weights.
        self.saved_step = state["step"] if self.path == folder else None
        return state["step"]


@contextlib.contextmanager
def _ctrl_c_saves(active: bool):
    """While ``active``: the first Ctrl-C only sets ``flag["set"]`` (``fit`` then saves and
    stops at the next step boundary); a second one raises KeyboardInterrupt at once (a save
    it interrupts leaves the previous state intact)."""
    flag = {"set": False}
    if not active or threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag["set"]:
            raise KeyboardInterrupt
        flag["set"] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _check_losses(losses, first_step: int, epoch: int, history: History, bar) -> np.ndarray:
    """The step losses as an array; DivergedError naming the first NaN or infinite one."""
    losses = np.asarray(jax.device_get(losses), np.float32)
    if not np.all(np.isfinite(losses)):
        bad = first_step + 1 + int(np.argmin(np.isfinite(losses)))
        bar.close()
        raise DivergedError(f"the training loss became {losses[bad - first_step - 1]} at step "
                            f"{bad} (epoch {epoch + 1}); training stopped. Try a smaller lr or "
                            "ssm_lr.", bad, history)
    return losses


def fit(model: SequenceModel, dataset: Dataset, config: TrainConfig | None = None, *,
        optimizer: nnx.Optimizer | None = None, mesh: Mesh | None = None,
        checkpoint: str | os.PathLike | None = None,
        resume_from: str | os.PathLike | None = None, test: bool = True) -> History:
    """Train ``model`` on ``dataset``; select on a validation split; test once at the end.

    1. ``config.validation_fraction`` of the training set is held out (a permutation seeded
       by ``config.seed``); the rest is shuffled each epoch (epoch e uses ``seed + e``).
    2. The step budget is :func:`count_steps`; the optimiser's warm-up + cosine schedule
       spans it. With the same config every layer takes the same steps.
    3. After each epoch the validation set is evaluated. With ``keep_best`` the model ends
       with the weights of the best epoch on validation (accuracy; loss for regression).
    4. The test set is evaluated once, at the end, into ``history.test_*`` (not with
       ``test=False``: a run that chooses hyper-parameters never looks at it).

    ``checkpoint``: a run folder (see :func:`check_run_folder`). ``fit`` saves the training
    state to ``checkpoint/last`` every ``config.save_every_steps`` steps or
    ``save_every_minutes`` minutes, on Ctrl-C (then raises :class:`TrainingInterrupted`)
    and at the end; each new best epoch goes to ``checkpoint/best``. Everything a save
    needs is checked before training starts.

    ``resume_from``: a run folder that ``fit`` saved to; training continues where it
    stopped, and the result is bit for bit the one of an uninterrupted run (on the same
    device; dropout included). Give the same ``config`` (only the fields in
    ``TrainConfig.RESUME_IRRELEVANT`` may change) and data set. The returned history
    covers the whole run. A run that had ended is not trained again: the model gets its
    final (or best) weights and the test set is evaluated, so a script that resumes may
    simply be run again until it completes.

    A given ``optimizer`` (e.g. restored with ``restore_checkpoint``) is used as it is,
    schedule included, and training starts at its step count.

    Raises :class:`DivergedError` (naming the step) when the loss becomes NaN or infinite;
    it is checked at the end of every epoch and before every save.
    """
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):  # a TrainConfig is checked when it is built
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}.")
    if not isinstance(dataset, Dataset):
        raise TypeError("dataset must be an annotated_ssm.data.Dataset; got "
                        f"{type(dataset).__name__}.")
    check_dataset(dataset)  # again: its arrays may have been changed in place since it was built
    check_model_matches(model, dataset)
    test = check_bool("test", test)
    mesh = make_mesh() if mesh is None else mesh
    n_devices = mesh.devices.size
    batch_size = config.batch_size
    if batch_size % n_devices:
        raise ValueError(f"batch_size must be divisible by the number of devices ({n_devices}) "
                         f"for data parallelism; got {batch_size}.")
    total_steps = count_steps(config, dataset)
    x_train, y_train, x_val, y_val = validation_split(dataset.x_train, dataset.y_train,
                                                      config.validation_fraction, seed=config.seed)
    if config.validation_fraction > 0 and len(x_val) == 0:
        raise ValueError(f"validation_fraction={config.validation_fraction} of "
                         f"{len(dataset.x_train)} training samples leaves no validation sample; "
                         "use a larger fraction or 0.")
    steps_per_epoch = len(x_train) // batch_size
    if is_stale(optimizer):
        raise ValueError("this optimizer's model holds the best epoch's weights (an earlier fit "
                         "with keep_best put them back), not the weights its state belongs to; "
                         "training them together would not continue the run. Resume from a run "
                         "folder instead (fit(checkpoint=...), then fit(resume_from=...)).")
    path = None
    if checkpoint is not None:
        path = check_run_folder(checkpoint, resume=resume_from is not None)
    if path is not None:
        check_metadata(model, config)  # a value JSON cannot store fails now, not after training
    if resume_from is not None and not isinstance(resume_from, (str, os.PathLike)):
        raise TypeError("resume_from must be a str or os.PathLike (a run folder); got "
                        f"{type(resume_from).__name__}.")
    run = _Run(path, config, dataset, total_steps)
    if optimizer is None:
        optimizer = make_optimizer(model, config, total_steps)
    if resume_from is not None:
        start = run.resume(pathlib.Path(resume_from).absolute(), model, optimizer, dataset)
    else:
        start = int(optimizer.step[...])
        if path is not None and (path / BEST).exists():
            shutil.rmtree(path / BEST)  # an earlier run's best model (ours: checked above)
    if start >= total_steps and not run.finished:
        raise ValueError(f"the optimizer is already at step {start}, which is the end of this "
                         f"config's budget ({total_steps} steps); raise epochs or max_steps to "
                         "train on.")
    if int(optimizer.step[...]) != start:
        raise ValueError(f"the optimizer is at step {int(optimizer.step[...])}, the run at step "
                         f"{start}.")
    replicate(model, mesh)
    replicate(optimizer, mesh)

    # The step with model and optimizer bound once: nnx.jit would otherwise walk both object
    # graphs on every call (benchmarks/README.md measures what that costs). The bound copy
    # shares the parameters but keeps the mode it had when bound: train mode (dropout on),
    # whatever `evaluate` does to `model` between epochs.
    model.train()
    step_on = nnx.cached_partial(train_step, model, optimizer)
    history = run.history
    bar = tqdm(total=total_steps, initial=start, disable=not config.progress,
               desc=f"{model.layer_name}", unit="step")
    step = start
    with _ctrl_c_saves(path is not None and not run.finished) as ctrl_c:

        def save_if_due(epoch: int, first_step: int) -> None:
            if run.due(step, ctrl_c["set"]):
                _check_losses(run.epoch_losses, first_step, epoch, history, bar)  # never save NaN
                run.save(model, optimizer, step)
            if ctrl_c["set"]:  # also when it came during that save: this step's state is saved
                bar.close()
                raise TrainingInterrupted(step, path)

        for epoch in range(start // steps_per_epoch, config.epochs if not run.finished else 0):
            epoch_start = time.perf_counter()
            skip = step - epoch * steps_per_epoch  # resuming mid-epoch: batches trained on before
            first_step = step - len(run.epoch_losses)
            epoch_batches = batches(x_train, y_train, batch_size, seed=config.seed + epoch,
                                    drop_last=True)
            for i, (xb, yb) in enumerate(epoch_batches):
                if i < skip:
                    continue
                run.epoch_losses.append(step_on(*shard_batch(mesh, xb, yb), task=dataset.task))
                step += 1
                bar.update()
                if step >= total_steps:
                    break
                if i + 1 < steps_per_epoch:  # at an epoch's end, save after its validation
                    save_if_due(epoch, first_step)
            losses = _check_losses(run.epoch_losses, first_step, epoch, history, bar)  # waits
            run.epoch_losses = []
            history.epoch_time.append(time.perf_counter() - epoch_start)
            history.epoch.append(epoch + 1)
            history.steps.append(step)
            history.train_loss.append(float(np.mean(losses)))
            postfix = {"loss": f"{history.train_loss[-1]:.3f}"}
            if len(x_val):
                metrics = evaluate(model, x_val, y_val, batch_size=config.eval_batch_size,
                                   mesh=mesh)
                history.val_loss.append(metrics["loss"])
                history.val_accuracy.append(metrics.get("accuracy", float("nan")))
                postfix["val"] = f"{metrics['loss']:.3f}"
                if "accuracy" in metrics:
                    postfix["val_acc"] = f"{metrics['accuracy']:.3f}"
                if config.keep_best and _score(metrics) > run.best_score:
                    run.new_best(model, _score(metrics), epoch + 1)
            else:
                history.val_loss.append(float("nan"))
                history.val_accuracy.append(float("nan"))
            bar.set_postfix(postfix)
            if step >= total_steps:
                break
            save_if_due(epoch + 1, step)
        bar.close()
        budget_ended = config.max_steps is not None and step == config.max_steps
        if budget_ended and step < steps_per_epoch * config.epochs:
            history.stopped = "step budget"
        if path is not None and not run.finished:
            run.save(model, optimizer, step, finished=True)
    if run.best_state is not None and history.best_epoch != history.epoch[-1]:
        nnx.update(model, run.best_state)
        replicate(model, mesh)
        mark_stale(optimizer)  # the pair (best weights, last optimiser state) cannot resume
    elif run.best_state is None:
        history.best_epoch = history.epoch[-1]
    if test:
        metrics = evaluate(model, dataset.x_test, dataset.y_test,
                           batch_size=config.eval_batch_size, mesh=mesh)
        history.test_loss = metrics["loss"]
        history.test_accuracy = metrics.get("accuracy", float("nan"))
    model.eval()
    return history


@dataclasses.dataclass
class SeedResults:
    """Runs of one configuration with several seeds (see :func:`fit_seeds`).

    ``seeds``, ``histories`` and ``n_params`` per run; ``test_accuracy`` / ``test_loss`` the
    per-seed test values as arrays; ``mean`` and ``std`` (sample standard deviation, ddof=1)
    of a metric; ``str()`` a one-line summary such as ``93.8 ± 1.1 % (seeds 0: 95.0, …)``.
    """

    seeds: list[int]
    histories: list[History]
    n_params: int

    @property
    def test_accuracy(self) -> np.ndarray:
        return np.array([h.test_accuracy for h in self.histories])

    @property
    def test_loss(self) -> np.ndarray:
        return np.array([h.test_loss for h in self.histories])

    def mean(self, metric: str = "test_accuracy") -> float:
        return float(np.mean(getattr(self, metric)))

    def std(self, metric: str = "test_accuracy") -> float:
        """Sample standard deviation over seeds (NaN for a single seed)."""
        values = getattr(self, metric)
        return float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")

    def summary(self, metric: str = "test_accuracy") -> dict[str, Any]:
        """``{"mean": …, "std": …, "per_seed": {seed: value}}`` of ``metric``."""
        values = getattr(self, metric)
        return {"mean": self.mean(metric), "std": self.std(metric),
                "per_seed": {seed: float(v) for seed, v in zip(self.seeds, values)}}

    def __str__(self) -> str:
        metric, scale, unit = "test_accuracy", 100.0, " %"
        if np.all(np.isnan(self.test_accuracy)):  # regression: report the loss
            metric, scale, unit = "test_loss", 1.0, ""
        values = getattr(self, metric)
        per_seed = ", ".join(f"{s}: {scale * v:.{1 if scale > 1 else 4}f}"
                             for s, v in zip(self.seeds, values))
        digits = 1 if scale > 1 else 4
        return (f"{scale * self.mean(metric):.{digits}f} ± "
                f"{scale * self.std(metric):.{digits}f}{unit} (seeds {per_seed})")


def fit_seeds(model_config: ModelConfig, dataset: Dataset, config: TrainConfig | None = None, *,
              seeds=(0, 1, 2), mesh: Mesh | None = None) -> SeedResults:
    """Build and train one model per seed (initialisation, validation split and shuffling
    all seeded by it; ``config.seed`` is replaced) and collect the results::

        results = fit_seeds(ModelConfig(layer="s4d", d_model=64), data, TrainConfig(epochs=15))
        print(results)                    # 93.8 ± 1.1 % (seeds 0: 95.0, 1: 93.4, 2: 92.9)
        results.summary()["per_seed"]     # {0: 0.95, 1: 0.934, 2: 0.929}
    """
    config = TrainConfig() if config is None else config
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a sequence of integers; got {seeds!r}.")
    seeds = list(seeds)
    for seed in seeds:  # 1.7 is refused, not truncated to 1
        check_seed("each seed", seed)
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a non-empty sequence of distinct integers; got {seeds}.")
    histories, n_params = [], 0
    for seed in seeds:
        model = build_model(model_config, dataset, seed=seed)
        n_params = count_params(model)
        histories.append(fit(model, dataset, dataclasses.replace(config, seed=seed), mesh=mesh))
    return SeedResults(seeds, histories, n_params)


if __name__ == "__main__":  # ``python -m annotated_ssm.train``: the command line, as before
    from annotated_ssm.cli import main

    sys.exit(main())
