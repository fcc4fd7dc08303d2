"""Training: optax AdamW with the SSM papers' parameter groups, jitted updates, evaluation,
data parallelism, and runs over several seeds.

The recipe of S4/DSS/S4D/S5:

- AdamW with a cosine learning-rate schedule after a linear warm-up;
- the state-space parameters (Λ or A, P, B, log Δ — everything tagged ``SSMParam``) get
  their own, smaller learning rate and no weight decay: decaying them would pull the
  eigenvalues towards 0 and destroy the long memory the initialisation set up.

Data parallelism: the batch is split along its first axis over a ``Mesh`` of all local
devices and the parameters are replicated; ``jit`` then runs one shard per device and XLA
inserts the gradient all-reduce. On one device the mesh has one entry and nothing changes.

Runs are described by two dataclasses (``annotated_ssm.config``): ``ModelConfig`` (the
architecture) and ``TrainConfig`` (optimiser, update budget, validation split, seed). ``fit``
holds out a seeded validation split, keeps the weights of the best epoch on it, and
evaluates the test set once, at the end; ``fit_seeds`` repeats a run over seeds and
summarises mean ± standard deviation. Given a run folder (``annotated_ssm.runs``), ``fit``
saves the training state and the best model there, and ``fit(..., resume_from=folder)``
continues bit for bit where it stopped. "Step" in ``TrainConfig`` and ``History`` counts
optimiser updates (not the layers' recurrence steps).

The command line is ``annotated_ssm.cli``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import os
import pathlib
import signal
import sys
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from ._validation import check_bool, check_seed
from .checkpoint import PARAMETERS, check_optimizer, metadata
from .config import ModelConfig, TrainConfig
from .data import Dataset, batches, validation_split
from .layers import LAYERS, SSMParam
from .model import CausalSequenceModel, SequenceClassifier, SequenceModel
from .runs import History, RunFolder, TrainingState, fingerprint

__all__ = ["DivergedError", "TrainingInterrupted", "SeedResults", "build_model",
           "check_model_matches", "make_optimizer", "ssm_labels", "make_mesh", "replicate",
           "shard_batch", "train_step", "evaluate", "count_steps", "fit", "fit_seeds",
           "count_params"]


class DivergedError(FloatingPointError):
    """The training loss became NaN or infinite. ``step`` is the first bad optimiser update;
    ``history`` what was measured before it. The model's weights are not trustworthy."""

    def __init__(self, message: str, step: int, history: History):
        super().__init__(message)
        self.step = step
        self.history = history


# --- Model construction and checks ----------------------------------------------------------

# The layer option naming the length a layer's kernel parameters are defined for (S4's L₀).
REFERENCE_LENGTH = "kernel_length"


def build_model(layer: str | ModelConfig, dataset: Dataset, *, seed: int = 0,
                **kwargs) -> SequenceModel:
    """A model that fits ``dataset``: a ``SequenceClassifier`` with ``dataset.n_classes``
    outputs for classification, a ``CausalSequenceModel`` for per-step regression.

    ``layer`` is a :class:`ModelConfig`, or a layer name with the config's fields and layer
    options as keywords (see :class:`~annotated_ssm.model.SequenceModel`). ``seed`` seeds
    the initialisation.

    A layer whose kernel is defined for a reference length (S4's ``kernel_length`` L₀, the
    length its parameter C̃ stands for) gets the data's length unless the options set one,
    as the official S4 sets its ``l_max`` from the data: a kernel of 1024 taps for
    sequences of 40 steps would cost 25 times the work for nothing.
    """
    config = ModelConfig.of(layer, **kwargs)
    if (REFERENCE_LENGTH in inspect.signature(LAYERS[config.layer].__init__).parameters
            and REFERENCE_LENGTH not in config.layer_options):
        config = dataclasses.replace(
            config, layer_options={**config.layer_options, REFERENCE_LENGTH: dataset.length})
    rngs = nnx.Rngs(seed)
    if dataset.task == "classification":
        return SequenceClassifier(config, dataset.channels, dataset.n_classes, rngs=rngs)
    return CausalSequenceModel(config, dataset.channels, dataset.n_outputs, rngs=rngs)


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

def _losses(model, x, y, task, lengths=None):
    """Per-example loss and correctness (classification) or per-example MSE (regression; with
    ``lengths``, over each sequence's real steps)."""
    out = model(x) if lengths is None else model(x, lengths)
    if task == "classification":
        loss = optax.softmax_cross_entropy_with_integer_labels(out, y)
        correct = (jnp.argmax(out, -1) == y).astype(jnp.float32)
    elif lengths is None:
        loss = jnp.mean((out - y) ** 2, axis=tuple(range(1, out.ndim)))
        correct = jnp.zeros_like(loss)
    else:  # the model's outputs are 0 at padded steps: the targets there must not count
        squares = (out - y * model.mask(x, lengths)) ** 2
        loss = jnp.sum(squares, axis=(-2, -1)) / (lengths * out.shape[-1])
        correct = jnp.zeros_like(loss)
    return loss, correct


@functools.partial(nnx.jit, static_argnames="task")
def train_step(model, optimizer, x, y, lengths=None, task: str = "classification"):
    """One AdamW step on a batch (``lengths``: each sequence's own, or None); returns the
    mean loss before the update."""

    def loss_fn(model):
        return _losses(model, x, y, task, lengths)[0].mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


@functools.partial(nnx.jit, static_argnames="task")
def _eval_step(model, x, y, mask, lengths, task: str):
    loss, correct = _losses(model, x, y, task, lengths)
    return jnp.sum(loss * mask), jnp.sum(correct * mask)


def evaluate(model: SequenceModel, x: np.ndarray, y: np.ndarray, *, batch_size: int = 500,
             mesh: Mesh | None = None, lengths: np.ndarray | None = None) -> dict[str, float]:
    """Mean loss and accuracy (classification) over (x, y), in eval mode, in stored order
    (``lengths``: each sequence's own, padding ignored).

    The last batch is padded to a multiple of the device count and the padding masked out,
    so the numbers are exact whatever the batch size.
    """
    mesh = make_mesh() if mesh is None else mesh
    n_devices = mesh.devices.size
    task = _task_of(model)
    model.eval()
    total_loss = total_correct = 0.0
    for xb, yb, *lb in batches(x, y, batch_size, lengths=lengths):
        n = len(xb)
        pad = -n % n_devices
        mask = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
        if pad:
            xb, yb, *lb = (np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]) for a in (xb, yb, *lb))
        xb, yb, mask, *lb = shard_batch(mesh, xb, yb, mask, *lb)
        loss, correct = _eval_step(model, xb, yb, mask, lb[0] if lb else None, task=task)
        total_loss += float(loss)
        total_correct += float(correct)
    result = {"loss": total_loss / len(x)}
    if task == "classification":
        result["accuracy"] = total_correct / len(x)
    return result


# --- The loop -------------------------------------------------------------------------------

def count_steps(config: TrainConfig, dataset: Dataset) -> int:
    """The run's update budget: ``min(epochs × updates per epoch, max_steps)``, where an epoch
    is the training set left after the validation split, in batches (the last partial batch is
    dropped). The learning-rate schedule spans exactly these updates. ValueError if the split
    leaves no validation sample or fewer training samples than a batch."""
    n_validation = int(round(config.validation_fraction * len(dataset.x_train)))
    if config.validation_fraction > 0 and n_validation == 0:
        raise ValueError(f"validation_fraction={config.validation_fraction} of "
                         f"{len(dataset.x_train)} training samples leaves no validation sample; "
                         "use a larger fraction or 0.")
    n_train = len(dataset.x_train) - n_validation
    if n_train < config.batch_size:
        raise ValueError(f"batch_size must be <= the number of training samples ({n_train} after "
                         f"holding out validation_fraction={config.validation_fraction} of "
                         f"{len(dataset.x_train)}); got {config.batch_size}.")
    total = n_train // config.batch_size * config.epochs
    return total if config.max_steps is None else min(total, config.max_steps)


def check_fit_arguments(model: SequenceModel, dataset: Dataset, config: TrainConfig | None,
                        optimizer: nnx.Optimizer | None, mesh: Mesh | None
                        ) -> tuple[TrainConfig, Mesh, int]:
    """Every check of ``fit``'s arguments, before anything is compiled; returns the config and
    the mesh (defaults filled in) and the update budget. (The data set checked its arrays when
    it was built, a TrainConfig its values.)"""
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}.")
    if not isinstance(dataset, Dataset):
        raise TypeError("dataset must be an annotated_ssm.data.Dataset; got "
                        f"{type(dataset).__name__}.")
    check_model_matches(model, dataset)
    mesh = make_mesh() if mesh is None else mesh
    if config.batch_size % mesh.devices.size:
        raise ValueError(f"batch_size must be divisible by the number of devices "
                         f"({mesh.devices.size}) for data parallelism; got {config.batch_size}.")
    check_optimizer(model, optimizer)
    return config, mesh, count_steps(config, dataset)


class Signals:
    """SIGINT (Ctrl-C), SIGTERM (``kill``, a cluster's preemption) and SIGHUP (a closed
    terminal) set ``stop``; SIGUSR1 (SLURM's ``--signal=USR1@…``) sets ``save``. The loop reads
    them between updates: a signal never raises inside a JAX call. (Only in the main thread,
    where Python delivers signals.)"""

    STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.stop: int | None = None
        self.save = False
        self.previous = {}

    def handle(self, signum, frame) -> None:
        if signum == signal.SIGUSR1:
            self.save = True
        elif self.stop is None:
            self.stop = signum
        else:  # a second one: the first is being honoured, after the update or save under way
            os.write(2, b"stopping after the update under way (kill -9 stops at once, losing "
                        b"what was trained since the last save)\n")

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            outer = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
            if isinstance(outer, Signals):  # nested (the command line's): what it caught holds
                self.stop, self.save = outer.stop, outer.save
            self.previous = {s: signal.signal(s, self.handle)
                             for s in (*self.STOPPING, signal.SIGUSR1)}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


class TrainingInterrupted(KeyboardInterrupt):
    """A signal stopped ``fit`` after update ``step`` (``signal``: its number); ``path``: the
    run folder holding that state (None: nothing was saved), to resume with
    ``fit(..., resume_from=path)`` or ``annotated-ssm-train --resume path``."""

    def __init__(self, step: int, path: pathlib.Path | None, signum: int = signal.SIGINT):
        where = (f"the training state is saved in {str(path)!r}: resume with fit(..., "
                 f"resume_from={str(path)!r})." if path is not None else
                 "nothing was saved (give a run folder, checkpoint=DIR, to save the state).")
        super().__init__(f"interrupted by {signal.Signals(signum).name} at update {step}; {where}")
        self.step, self.path, self.signal = step, path, signum


class Progress:
    """The loop's progress hook (``enabled``: ``config.progress``): a bar per epoch on a
    terminal, started after the run's first update has finished (so its rate and ETA leave
    out compilation), and a line per epoch that stays (loss, validation, time)."""

    def __init__(self, enabled: bool, name: str, epochs: int, steps_per_epoch: int):
        self.enabled, self.name, self.epochs = enabled, name, epochs
        self.steps_per_epoch, self.compiled, self.bar = steps_per_epoch, False, None

    def after_update(self, state: TrainingState, done: int) -> None:
        """``done`` updates of the epoch under way are finished."""
        if not self.enabled:
            return
        if self.bar is None:
            if not self.compiled:  # the first update compiles: start timing after it
                jax.block_until_ready(state.epoch_losses[-1])
                self.compiled = True
            self.bar = tqdm(total=self.steps_per_epoch, initial=done, leave=False, unit="update",
                            desc=f"{self.name} epoch {state.epoch + 1}/{self.epochs}",
                            disable=not sys.stderr.isatty())  # a log file gets the lines only
        else:
            self.bar.update()

    def after_epoch(self, state: TrainingState, score: float | None) -> None:
        self.close()
        history = state.history
        if self.enabled:
            accuracy = history.val_accuracy[-1]
            tqdm.write(f"epoch {history.epoch[-1]}/{self.epochs}: loss "
                       f"{history.train_loss[-1]:.4f}, validation loss {history.val_loss[-1]:.4f}"
                       + ("" if np.isnan(accuracy) else f", accuracy {accuracy:.4f}")
                       + f" ({history.epoch_time[-1]:.1f} s)" + (" best" if score else ""))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class Keeper:
    """The loop's hook that keeps what a run must keep. With a run folder it saves the
    training state there (``saving``) when orbax's policy says a save is due, at each new best
    epoch (with its score: orbax keeps the best), at the end and on a signal; the best epoch's
    model and optimiser it does not save, it keeps in memory. SIGINT, SIGTERM or SIGHUP stop
    the loop, after that save, with :class:`TrainingInterrupted`; SIGUSR1 saves and trains on.
    A diverged state is never saved."""

    def __init__(self, folder: RunFolder | None, saving: bool, signals: Signals, model,
                 optimizer, config: TrainConfig, saved: int | None):
        self.folder, self.saving, self.signals, self.saved = folder, saving, signals, saved
        self.model, self.optimizer, self.config, self.best = model, optimizer, config, None

    def after_update(self, state: TrainingState, done: int = 0, score: float | None = None
                     ) -> None:
        signals = self.signals
        if score is not None and not self.saving:
            self.best = jax.device_get((nnx.state(self.model, PARAMETERS),
                                        nnx.state(self.optimizer, nnx.optimizer.OptState)))
        due = (signals.stop or signals.save or state.finished or score is not None
               or (self.saving and self.folder.should_save(state.step)))
        if due and self.saved != state.step:
            _finite_losses(state)  # a diverged state is never saved
            if self.saving:
                self.folder.save(state, self.model, self.optimizer, self.config, score=score)
                self.saved = state.step
        signals.save = False
        if signals.stop:
            raise TrainingInterrupted(state.step, self.folder.path if self.saving else None,
                                      signals.stop)

    def after_epoch(self, state: TrainingState, score: float | None) -> None:
        if self.saving:
            self.folder.write_history(state.history)
        self.after_update(state, score=score)

    def restore_best(self) -> None:
        """The model and optimiser back as they were after the best epoch."""
        if self.best is None:
            self.folder.restore(self.model, self.optimizer, self.folder.best_version())
        else:
            nnx.update(self.model, self.best[0])
            nnx.update(self.optimizer, self.best[1])


def _finite_losses(state: TrainingState) -> np.ndarray:
    """This epoch's losses as an array; DivergedError naming the first NaN or infinite one."""
    losses = np.asarray(jax.device_get(state.epoch_losses), np.float32)
    if not np.all(np.isfinite(losses)):
        bad = int(np.argmin(np.isfinite(losses)))
        step = state.step - len(losses) + bad + 1
        raise DivergedError(f"the training loss became {losses[bad]} at update {step} (epoch "
                            f"{state.epoch + 1}); training stopped. Try a smaller lr or ssm_lr.",
                            step, state.history)
    return losses


def _open_run(model, optimizer, dataset: Dataset, config: TrainConfig, total_steps: int,
              checkpoint, resume_from, overwrite: bool) -> tuple[RunFolder | None, TrainingState]:
    """The run folder ``fit`` reads and saves to (None: none), and the state it starts from."""
    for name, value in (("checkpoint", checkpoint), ("resume_from", resume_from)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a str or os.PathLike (a run folder); got "
                            f"{type(value).__name__}.")
    check_bool("overwrite", overwrite)
    if resume_from is not None and checkpoint is not None and (
            pathlib.Path(checkpoint).absolute() != pathlib.Path(resume_from).absolute()):
        raise ValueError("a resumed run saves to its own folder: give checkpoint=resume_from or "
                         f"leave it out (given {str(checkpoint)!r} and {str(resume_from)!r}).")
    if resume_from is not None and overwrite:
        raise ValueError("resume_from continues a run, overwrite=True replaces it: give one.")
    if checkpoint is not None:
        metadata(model, optimizer, config=config)  # a value JSON cannot store fails now
    path = resume_from if resume_from is not None else checkpoint
    if path is None:
        return None, TrainingState(total_steps, step=int(optimizer.step[...]))
    folder = RunFolder(path, config, resume=resume_from is not None, overwrite=overwrite)
    try:
        state = TrainingState(total_steps, step=int(optimizer.step[...]))
        if resume_from is not None:
            state = folder.check_resume(config, model.architecture, dataset)
            folder.restore(model, optimizer)
            # a finished run given more epochs (check_resume allows it) trains on
            state.finished = state.finished and state.step >= total_steps
            state.total_steps = total_steps
    except BaseException:
        folder.close()
        raise
    return folder, state


def fit(model: SequenceModel, dataset: Dataset, config: TrainConfig | None = None, *,
        optimizer: nnx.Optimizer | None = None, mesh: Mesh | None = None,
        checkpoint: str | os.PathLike | None = None,
        resume_from: str | os.PathLike | None = None, overwrite: bool = False,
        test: bool = True) -> History:
    """Train ``model`` on ``dataset``; select on a validation split; test once at the end.

    1. ``config.validation_fraction`` of the training set is held out (a permutation seeded
       by ``config.seed``); the rest is shuffled each epoch (epoch e uses ``seed + e``).
    2. The update budget is :func:`count_steps`; the optimiser's warm-up + cosine schedule
       spans it. With the same config every layer makes the same updates.
    3. After each epoch the validation set is evaluated. With ``keep_best`` the model and the
       optimiser end as they were after the best epoch on validation (accuracy; loss for
       regression), a pair that can be saved and trained on.
    4. The test set is evaluated once, at the end, into ``history.test_*`` (not with
       ``test=False``: a run that chooses hyper-parameters never looks at it).

    ``checkpoint``: a run folder (:mod:`annotated_ssm.runs`, which says what is saved when),
    locked while ``fit`` runs. A folder that holds a run is refused unless ``overwrite=True``
    (the run's own files are replaced, nothing else) or it is resumed.
    ``resume_from``: a run folder ``fit`` saved to; training continues where it stopped, bit
    for bit as an uninterrupted run (same device; dropout included), given the same config
    (but ``TrainConfig.RESUME_IRRELEVANT``), model and data, and saves there again if
    ``checkpoint`` names it too; a finished run is only evaluated. ``config.epochs`` may be
    larger than the run's: the schedule is then recomputed for the new total.
    On SIGINT (Ctrl-C), SIGTERM or SIGHUP, ``fit`` finishes the update under way, saves (with
    a run folder) and raises :class:`TrainingInterrupted`; SIGUSR1 saves and trains on.
    With ``config.progress``, a bar per epoch on a terminal and a line per epoch.
    A given ``optimizer`` is used as it is, schedule included, from its update count.

    Raises :class:`DivergedError` (naming the update) when the loss becomes NaN or infinite;
    it is checked at the end of every epoch and before every save.

    For example, an epoch on 50 sequences whose class is the sign of their mean (45 to train
    on in batches of 15, 5 to validate on), saved in a run folder:

    >>> import numpy as np, shutil, tempfile
    >>> x = np.random.default_rng(0).standard_normal((60, 16, 1)).astype(np.float32)
    >>> y = (x.mean(axis=(1, 2)) > 0).astype(np.int32)
    >>> data = Dataset("sign", x[:50], y[:50], x[50:], y[50:], "classification", n_classes=2)
    >>> model = build_model("s4d", data, d_model=8, n_layers=1, state_size=4)
    >>> folder = tempfile.mkdtemp()
    >>> history = fit(model, data, TrainConfig(epochs=1, batch_size=15, progress=False),
    ...               checkpoint=f"{folder}/run")
    >>> history.epoch, history.steps, 0 <= history.test_accuracy <= 1
    ([1], [3], True)
    >>> sorted(p.name for p in pathlib.Path(folder, "run").iterdir())
    ['.annotated_ssm.lock', '3', 'history.csv', 'history.json']
    >>> shutil.rmtree(folder)
    """
    config, mesh, total_steps = check_fit_arguments(model, dataset, config, optimizer, mesh)
    check_bool("test", test)
    # sequences of different lengths: each part carries its lengths, padding ignored
    (x_train, y_train, *l_train), (x_val, y_val, *l_val) = _split(dataset, config)
    optimizer = make_optimizer(model, config, total_steps) if optimizer is None else optimizer
    steps_per_epoch = len(x_train) // config.batch_size
    with Signals() as signals, contextlib.ExitStack() as stack:
        folder, state = _open_run(model, optimizer, dataset, config, total_steps, checkpoint,
                                  resume_from, overwrite)
        if folder is not None:
            stack.callback(folder.close)
        if state.step >= total_steps and not state.finished:
            raise ValueError(f"the optimizer is already at update {state.step}, the end of this "
                             f"config's budget ({total_steps} updates); raise epochs or max_steps "
                             "to train on.")
        state.dataset = fingerprint(dataset)
        keeper = Keeper(folder, checkpoint is not None, signals, model, optimizer, config,
                        saved=state.step if resume_from is not None else None)
        hooks = (keeper, stack.enter_context(contextlib.closing(Progress(
            config.progress, model.layer_name, config.epochs, steps_per_epoch))))
        replicate(model, mesh)
        replicate(optimizer, mesh)
        # The update with model and optimizer bound once: nnx.jit would otherwise walk both
        # object graphs on every call (benchmarks/README.md measures what that costs). The
        # bound copy shares the parameters but keeps the mode it had when bound: train mode
        # (dropout on), whatever `evaluate` does to `model` between epochs.
        model.train()
        take_step = nnx.cached_partial(train_step, model, optimizer)
        history, state.epoch = state.history, state.step // steps_per_epoch
        while not state.finished:
            start, done = time.perf_counter(), state.step - state.epoch * steps_per_epoch
            epoch_batches = batches(x_train, y_train, config.batch_size,
                                    seed=config.seed + state.epoch, drop_last=True,
                                    lengths=(l_train or [None])[0])
            for i, batch in enumerate(itertools.islice(epoch_batches, done, None), done):
                state.epoch_losses.append(take_step(*shard_batch(mesh, *batch),
                                                    task=dataset.task))
                state.step += 1
                if state.step >= total_steps or i + 1 == steps_per_epoch:
                    break  # the epoch's end: save after its validation
                for hook in hooks:
                    hook.after_update(state, i + 1)
            # the epoch's end: its loss, validation and best model into the history
            history.train_loss.append(float(np.mean(_finite_losses(state))))
            state.epoch_losses = []
            history.epoch_time.append(time.perf_counter() - start)
            history.epoch.append(state.epoch + 1)
            history.steps.append(state.step)
            metrics, score = {"loss": float("nan")}, None
            if len(x_val):
                metrics = evaluate(model, x_val, y_val, batch_size=config.eval_batch_size,
                                   mesh=mesh, lengths=(l_val or [None])[0])
                if config.keep_best and _score(metrics) > state.best_score:
                    state.best_score = score = _score(metrics)
                    history.best_epoch = history.epoch[-1]
            history.val_loss.append(metrics["loss"])
            history.val_accuracy.append(metrics.get("accuracy", float("nan")))
            if state.step >= total_steps:
                state.finished = True
                if config.max_steps == state.step < steps_per_epoch * config.epochs:
                    history.stopped = "step budget"
            for hook in reversed(hooks):  # the epoch's line first, then the save
                hook.after_epoch(state, score)
            state.epoch += 1
        if history.best_epoch is None:
            history.best_epoch = history.epoch[-1]
        elif history.best_epoch != history.epoch[-1]:  # back to the best epoch's pair
            keeper.restore_best()
            replicate(model, mesh)
            replicate(optimizer, mesh)
        if test:
            metrics = evaluate(model, dataset.x_test, dataset.y_test,
                               batch_size=config.eval_batch_size, mesh=mesh,
                               lengths=dataset.lengths_test)
            history.test_loss = metrics["loss"]
            history.test_accuracy = metrics.get("accuracy", float("nan"))
        if checkpoint is not None:
            folder.write_history(history)
    model.eval()
    return history


def _split(dataset: Dataset, config: TrainConfig) -> tuple[tuple, tuple]:
    """(training part, validation part) of the training set: (x, y) or (x, y, lengths)."""
    parts = validation_split(dataset.x_train, dataset.y_train, config.validation_fraction,
                             seed=config.seed, lengths=dataset.lengths_train)
    half = len(parts) // 2
    return parts[:half], parts[half:]


def _score(metrics: dict[str, float]) -> float:
    """Higher is better: accuracy for classification, minus the loss for regression."""
    return metrics["accuracy"] if "accuracy" in metrics else -metrics["loss"]


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
