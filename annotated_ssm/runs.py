"""The run folder: where ``fit`` keeps a run it can resume, and the checks that it may.

A run folder holds two checkpoints (:mod:`annotated_ssm.checkpoint`, each a folder of orbax's
numbered versions, the newest complete one counting), never mixed::

    RUN/last/N/   the training state: model, optimiser, dropout streams, and in its JSON the
                  update count, this epoch's losses, the history, the best score and a
                  fingerprint of the data set
    RUN/best/N/   the best epoch's model on validation
    RUN/history.json, RUN/history.csv
                  the per-epoch history (JSON adds the test result at the end), rewritten
                  at each epoch's end (written to a temporary file, then renamed)

``last`` is saved after the first update (so a run stopped at any later time has something
to resume), at every multiple of ``save_every_steps`` updates and when ``save_every_minutes``
minutes have passed since the last save, when the
process gets SIGINT (Ctrl-C) or SIGTERM (``kill``, ``docker stop``, a cluster's preemption),
and at the end; SIGKILL (``kill -9``) cannot be caught and loses what was trained since the
last save. ``best`` is saved after each new best epoch. A save that is stopped leaves the
previous version; a crash between the two checkpoints' saves leaves a ``best`` newer than
``last``, which the resumed run recomputes. :func:`check_resume` is the one check that a
run may be resumed with given settings (``fit`` and the command line both call it).

Nothing a run saved is replaced silently: a new run into a folder that holds one is refused
unless it is asked to overwrite (then only the names above are removed) or to resume. A
resumed run may be given more epochs than it was started with: the warm-up + cosine
learning-rate schedule is then recomputed for the new total of updates and training goes on
from the saved update on that new schedule (the learning rate there is the new schedule's, so
it steps up from where the old schedule had brought it); with the same epochs a resumed run is
bit for bit the uninterrupted one.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import pathlib
import shutil
import signal
import threading
import time
import zlib
from typing import Any

import jax
import numpy as np
from flax import nnx

from .checkpoint import (BEST, LAST, as_json, check_checkpoint_path, check_folder,
                         checkpoint_metadata, load_model, read_checkpoint_info,
                         remove_unfinished_saves, restore_checkpoint, save_checkpoint)
from .config import TrainConfig
from .data import Dataset

__all__ = ["History", "TrainingInterrupted", "Run", "open_run", "check_run_folder",
           "check_resume", "read_run", "fingerprint", "BEST", "LAST", "HISTORY_FILES",
           "SAVING_SIGNALS"]

SAVING_SIGNALS = (signal.SIGINT, signal.SIGTERM)
HISTORY_FILES = ("history.json", "history.csv")
# Every name a run creates in its folder (with the temporary files of an atomic write): the
# only names a run folder may hold, and the only ones --overwrite removes.
RUN_NAMES = (LAST, BEST, *HISTORY_FILES, *(f"{name}.tmp" for name in HISTORY_FILES))


@dataclasses.dataclass
class History:
    """What ``fit`` measured.

    Per epoch (lists, one entry per completed or budget-truncated epoch): ``epoch``,
    ``steps`` (optimiser updates so far), ``train_loss``, ``val_loss``, ``val_accuracy``
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

    def to_csv(self) -> str:
        """The per-epoch lists as CSV, one row per epoch (NaN as an empty field)."""
        columns = ("epoch", "steps", "train_loss", "val_loss", "val_accuracy", "epoch_time")
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(columns)
        for row in zip(*(getattr(self, c) for c in columns)):
            writer.writerow("" if isinstance(v, float) and math.isnan(v) else v for v in row)
        return text.getvalue()

    def to_json(self) -> dict:
        """The history as JSON stores it: NaN (no validation, regression) as None."""
        def plain(v):
            return [plain(x) for x in v] if isinstance(v, list) else (
                None if isinstance(v, float) and math.isnan(v) else v)
        return {k: plain(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, values: dict) -> History:
        def number(v):
            return [number(x) for x in v] if isinstance(v, list) else (
                float("nan") if v is None else v)
        return cls(**{k: v if k == "best_epoch" else number(v) for k, v in values.items()})


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM stopped ``fit`` after it saved the training state: ``step``
    is the last optimiser update done, ``signal`` the signal's number, ``path`` the run folder
    to give ``fit(..., resume_from=path)`` (or ``annotated-ssm-train --resume path``)."""

    def __init__(self, step: int, path: pathlib.Path, signum: int = signal.SIGINT):
        super().__init__(f"interrupted by {signal.Signals(signum).name} at update {step}; the "
                         f"training state is saved in {str(path / LAST)!r}: resume with "
                         f"fit(..., resume_from={str(path)!r}).")
        self.step, self.path, self.signal = step, path, signum


def _not_a_runs(path: pathlib.Path) -> list[str]:
    return [p.name for p in path.iterdir() if p.name not in RUN_NAMES]


def _describe_run(path: pathlib.Path) -> str:
    """"a finished run (120 updates)", "an unfinished run (update 7 of 120)" or "files of a run"."""
    if not (path / LAST).exists():
        return f"files of a run ({sorted(p.name for p in path.iterdir())})"
    state = read_checkpoint_info(path / LAST).get("training_state") or {}
    if state.get("finished", True):
        return f"a finished run ({state.get('step')} updates)"
    return f"an unfinished run (update {state.get('step')} of {state.get('total_steps')})"


def check_run_folder(path: str | os.PathLike, *, resume: bool = False,
                     overwrite: bool = False) -> pathlib.Path:
    """``path`` (absolute) if ``fit`` may keep a run there; else ValueError or OSError.

    Allowed: a new path, an empty folder, or a run folder (only the names a run creates:
    ``last/`` and ``best/``, each a checkpoint ``check_checkpoint_path`` accepts, and the
    history files). A folder that holds a run, finished or not, is refused unless ``resume``
    (it is continued) or ``overwrite`` (a new run replaces it) is given.
    """
    path = check_folder(path, _not_a_runs, "run folder")
    for name in (LAST, BEST):
        check_checkpoint_path(path / name)
    if not (resume or overwrite) and path.is_dir() and any(path.iterdir()):
        raise ValueError(f"{str(path)!r} holds {_describe_run(path)}, and nothing a run saved is "
                         "replaced without asking: continue it (--resume DIR, or fit(..., "
                         "resume_from=DIR)), replace it (--overwrite, or fit(..., overwrite=True)) "
                         "or choose another folder.")
    return path


def remove_run(path: pathlib.Path) -> None:
    """Remove what a run created in ``path`` (``RUN_NAMES``; ``check_run_folder`` has made sure
    that the folder holds nothing else)."""
    for name in RUN_NAMES:
        if (path / name).is_dir():
            shutil.rmtree(path / name)
        elif (path / name).exists():
            (path / name).unlink()


def fingerprint(dataset: Dataset) -> dict[str, Any]:
    """What identifies a data set well enough to refuse resuming on another one."""
    def crc(a):
        return zlib.crc32(np.ascontiguousarray(a).view(np.uint8))
    return {"name": dataset.name, "x_train": list(dataset.x_train.shape),
            "x_test": list(dataset.x_test.shape),
            "crc32": crc(dataset.x_train) ^ crc(dataset.y_train)}


def check_resume(folder: str | os.PathLike, config: TrainConfig, architecture: dict,
                 dataset: Dataset | str) -> tuple[dict, dict]:
    """(metadata, training state) of the run saved in ``folder``, if it may be resumed with
    ``config``, a model of ``architecture`` (the entries given are compared: a model's
    ``architecture``, or a ``ModelConfig.to_dict()`` before the data is known) and
    ``dataset`` (a data set, or only its name); else ValueError naming every difference."""
    folder = pathlib.Path(folder).absolute()
    info, state = read_run(folder)
    stored = {**info["architecture"], **(info.get("train_config") or {})}
    given = {**as_json(architecture), **dataclasses.asdict(config)}
    differ = [f"{k}: stored {stored.get(k)!r}, given {v!r}" for k, v in given.items()
              if k not in TrainConfig.RESUME_IRRELEVANT and stored.get(k) != v
              and not (k == "epochs" and isinstance(stored.get(k), int) and v > stored[k])]
    ours = fingerprint(dataset) if isinstance(dataset, Dataset) else {"name": dataset}
    differ += [f"data set {k}: stored {state['dataset'].get(k)!r}, given {v!r}"
               for k, v in ours.items() if state["dataset"].get(k) != v]
    if differ:
        raise ValueError(f"the run in {str(folder)!r} was started with other settings "
                         f"({'; '.join(differ)}); resume it with the same ones (only "
                         f"{', '.join(TrainConfig.RESUME_IRRELEVANT)} may change, and epochs "
                         "may grow).")
    return info, state


def read_run(folder: str | os.PathLike) -> tuple[dict, dict]:
    """(metadata, training state) of the run saved in ``folder/last``; ValueError if there is
    none. The metadata holds the run's ``architecture`` and ``train_config``; the training
    state its ``step``, ``total_steps``, ``finished``, ``history`` and ``dataset``."""
    folder = pathlib.Path(folder).absolute()
    if not (folder / LAST).is_dir():
        raise ValueError(f"there is no run to resume in {str(folder)!r} (it holds no {LAST!r} "
                         "checkpoint); start the run without resume_from / --resume.")
    info = read_checkpoint_info(folder / LAST)
    state = info.get("training_state")
    if not isinstance(state, dict) or "history" not in state:
        raise ValueError(f"{str(folder / LAST)!r} holds no training state (it was not saved by "
                         "fit); resume from a run folder that fit or the command line saved to.")
    return info, state


class Run:
    """Where ``fit`` is (``update``, history, best score, this epoch's losses), saved to and
    restored from a run folder. Without a folder (``path`` None) it only keeps the numbers."""

    def __init__(self, path: pathlib.Path | None, config: TrainConfig, dataset: Dataset,
                 total_steps: int):
        self.path, self.config, self.total_steps = path, config, total_steps
        self.fingerprint = fingerprint(dataset) if path is not None else None
        self.history = History()
        self.update = 0
        self.best_score, self.best_state, self.best_unsaved = -math.inf, None, False
        self.epoch_losses: list = []  # this epoch's losses (device arrays or floats)
        self.saved_update, self.saved_time = None, time.monotonic()
        self.finished = False  # resumed from a run that had ended: nothing left to train
        self.signal = None  # the number of a signal that asked to save and stop

    def training_state(self, finished: bool) -> dict:
        best = None if self.history.best_epoch is None else {"epoch": self.history.best_epoch,
                                                            "score": self.best_score}
        return {"step": self.update, "total_steps": self.total_steps, "finished": finished,
                "epoch_losses": [float(v) for v in jax.device_get(self.epoch_losses)],
                "history": self.history.to_json(), "best": best, "dataset": self.fingerprint}

    def save_due(self) -> bool:
        """Is a save of the training state due now? The first update of a run is saved at
        once, so that a run stopped later always has something to resume."""
        if self.path is None or self.update == self.saved_update:
            return False
        every, minutes = self.config.save_every_steps, self.config.save_every_minutes
        return (self.signal is not None or self.saved_update is None
                or (every is not None and self.update % every == 0)
                or (minutes is not None and time.monotonic() - self.saved_time >= 60 * minutes))

    def save(self, model, optimizer, *, finished: bool = False) -> None:
        if self.best_unsaved:  # resumed from another folder: carry its best model over
            self.save_best(model)
        save_checkpoint(self.path / LAST, model, optimizer, config=self.config,
                        training_state=self.training_state(finished))
        self.saved_update, self.saved_time = self.update, time.monotonic()

    def new_best(self, model, score: float, epoch: int) -> None:
        self.best_score, self.history.best_epoch = score, epoch
        self.best_state = jax.device_get(nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat)))
        if self.path is not None:
            self.save_best(model)

    def save_best(self, model) -> None:
        best = nnx.clone(model)
        nnx.update(best, self.best_state)
        save_checkpoint(self.path / BEST, best, config=self.config,
                        training_state={"epoch": self.history.best_epoch, "score": self.best_score})
        self.best_unsaved = False

    def resume(self, folder: str | os.PathLike, model, optimizer, dataset: Dataset) -> None:
        """Restore model, optimiser, dropout streams and progress from ``folder/last``."""
        folder = pathlib.Path(folder).absolute()
        _, state = check_resume(folder, self.config, model.architecture, dataset)
        restore_checkpoint(folder / LAST, model, optimizer)
        self.update = state["step"]
        # a finished run given more epochs (check_resume allows it) trains on
        self.finished = bool(state["finished"]) and self.update >= self.total_steps
        self.history = History.from_json(state["history"])
        self.epoch_losses = list(np.asarray(state["epoch_losses"], np.float32))
        if state["best"] is not None:
            self.best_score = state["best"]["score"]
            best_state = read_checkpoint_info(folder / BEST)["training_state"]
            if best_state["epoch"] == state["best"]["epoch"]:
                best = load_model(folder / BEST)
                self.best_state = jax.device_get(nnx.state(best, nnx.Any(nnx.Param, nnx.BatchStat)))
                self.best_unsaved = self.path is not None and self.path != folder
            # else: best/ was saved by a later epoch just before a crash; that epoch is trained
            # again and, being better, saved again, with the same weights.
        self.saved_update = self.update if self.path == folder else None

    def write_history(self) -> None:
        """``history.json`` and ``history.csv`` in the run folder, each written to a temporary
        file and renamed over the old one (a reader never sees half a file)."""
        if self.path is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        for name, text in ((HISTORY_FILES[0], json.dumps(self.history.to_json(), indent=1)),
                           (HISTORY_FILES[1], self.history.to_csv())):
            temporary = self.path / f"{name}.tmp"
            temporary.write_text(text)
            os.replace(temporary, self.path / name)

    @contextlib.contextmanager
    def saving_on_signals(self):
        """While training with a folder: SIGINT or SIGTERM only sets ``self.signal`` (``fit``
        then saves and stops after the update under way); a second one raises
        KeyboardInterrupt at once (a save it stops leaves the previous version intact)."""
        if self.path is None or threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            if self.signal is not None:
                raise KeyboardInterrupt
            self.signal = signum

        previous = {s: signal.signal(s, handler) for s in SAVING_SIGNALS}
        try:
            yield
        finally:
            for s, old in previous.items():
                signal.signal(s, old)



def open_run(model, optimizer, dataset: Dataset, config: TrainConfig, total_steps: int,
             checkpoint: str | os.PathLike | None, resume_from: str | os.PathLike | None,
             overwrite: bool = False) -> Run:
    """The run ``fit`` starts or resumes: with ``checkpoint``, in that folder (checked, with
    everything a save needs, before training; a run there is replaced only with
    ``overwrite``); with ``resume_from``, restored from there."""
    path = None if checkpoint is None else check_run_folder(
        checkpoint, resume=resume_from is not None, overwrite=overwrite)
    if path is not None:
        checkpoint_metadata(model, config)  # a value JSON cannot store fails now, not later
        for name in (LAST, BEST):  # what kill -9 left in a save: never a checkpoint
            remove_unfinished_saves(path / name)
    run = Run(path, config, dataset, total_steps)
    if resume_from is not None:
        run.resume(resume_from, model, optimizer, dataset)
    else:
        run.update = int(optimizer.step[...])
        if path is not None and path.is_dir():
            remove_run(path)  # a run that overwrite=True replaces (checked above)
    if run.update >= total_steps and not run.finished:
        raise ValueError(f"the optimizer is already at update {run.update}, the end of this "
                         f"config's budget ({total_steps} updates); raise epochs or max_steps to "
                         "train on.")
    if int(optimizer.step[...]) != run.update:
        raise ValueError(f"the optimizer is at update {int(optimizer.step[...])}, the run at "
                         f"update {run.update}.")
    return run
