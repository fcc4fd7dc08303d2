"""The run folder: where ``fit`` keeps a run it can resume, with one writer at a time.

A run folder is one orbax ``CheckpointManager`` (:mod:`annotated_ssm.checkpoint`), opened once
per ``fit``, plus the history::

    RUN/N/                 a save after optimiser update N: model, optimiser, dropout streams,
                           and in its JSON the architecture, the TrainConfig and the
                           TrainingState (update count, this epoch's losses, history, best
                           score, a fingerprint of the data set)
    RUN/history.json, RUN/history.csv
                           the per-epoch history, rewritten at each epoch's end
    RUN/.annotated_ssm.lock
                           held (``flock``) while a process trains here

Orbax's policies decide what is kept and when to save: the newest save and the best epoch's
(saved with its validation score as the version's metric) are kept; a save is made after the
first update, every ``save_every_steps`` updates, when ``save_every_minutes`` have passed, at
each new best epoch, on a signal and at the end. ``load_model(RUN)`` reads the best epoch.

The lock is the operating system's: it is released when the process ends, however it ends
(kill -9 included), so there is never a stale lock to remove by hand and no process id is
trusted. Nothing a run saved is replaced silently: a new run into a folder that holds one is
refused unless it is asked to overwrite (then only the names above are removed) or to resume.
A resumed run may be given more epochs: the learning-rate schedule is recomputed for the new
total and training goes on from the saved update; with the same epochs a resumed run is bit
for bit the uninterrupted one.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import fcntl
import functools
import io
import json
import math
import operator
import os
import pathlib
import shutil
import socket
import tempfile
import zlib
from typing import Any

import numpy as np
import orbax.checkpoint as ocp

from .checkpoint import (METADATA, UNFINISHED, check_checkpoint_path, metadata, open_manager,
                         quiet_orbax, read, restore, save_args, write)
from .config import TrainConfig
from .data import Dataset

__all__ = ["History", "TrainingState", "RunFolder", "fingerprint", "HISTORY_FILES"]

HISTORY_FILES = ("history.json", "history.csv")
LOCK = ".annotated_ssm.lock"
RUN_FILES = (*HISTORY_FILES, LOCK)  # besides orbax's versions, all a run folder may hold
policies = ocp.checkpoint_managers


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

    COLUMNS = ("epoch", "steps", "train_loss", "val_loss", "val_accuracy", "epoch_time")

    @property
    def seconds_per_epoch(self) -> float:
        """Median epoch time, leaving out the first epoch (it includes jit compilation)."""
        times = self.epoch_time[1:] or self.epoch_time
        return float(np.median(times)) if times else float("nan")

    def to_csv(self) -> str:
        """The per-epoch lists as CSV, one row per epoch (NaN as an empty field)."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(self.COLUMNS)
        for row in zip(*(getattr(self, c) for c in self.COLUMNS)):
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


@dataclasses.dataclass
class TrainingState:
    """Where ``fit`` is; the loop owns it, a run folder saves it. ``step`` counts optimiser
    updates (the one name of that counter); ``epoch_losses`` are this epoch's so far."""

    total_steps: int
    step: int = 0
    epoch_losses: list = dataclasses.field(default_factory=list)
    history: History = dataclasses.field(default_factory=History)
    best_score: float = -math.inf
    finished: bool = False
    dataset: dict | None = None
    epoch: int = 0  # the epoch under way, from 0 (the loop's: not saved, the update count says it)

    def to_json(self) -> dict:
        return {"total_steps": self.total_steps, "step": self.step, "finished": self.finished,
                "epoch_losses": [float(v) for v in self.epoch_losses],
                "history": self.history.to_json(), "dataset": self.dataset,
                "best_score": None if self.best_score == -math.inf else self.best_score}

    @classmethod
    def from_json(cls, values: Any, where: pathlib.Path) -> TrainingState:
        """The state stored in ``where``; ValueError naming the field if anything in it is
        of the wrong type, out of range or inconsistent with the rest (a tampered file)."""
        def need(ok: bool, field: str, what: str) -> None:
            if not ok:
                value = values.get(field) if isinstance(values, dict) else values
                raise ValueError(f"the training state in {str(where)!r} is corrupted: {field} is "
                                 f"{value!r:.80}, which is not {what}. Start the run again (or "
                                 "in another folder).")
        def integer(v, low=0, high=2**53):
            return type(v) is int and low <= v <= high
        def numbers(v):
            return isinstance(v, list) and all(x is None or type(x) in (int, float) for x in v)
        need(isinstance(values, dict), "the training state", "a dict")
        need(integer(values.get("total_steps"), 1), "total_steps", "an integer >= 1")
        need(integer(values.get("step"), 0, values["total_steps"]), "step",
             f"an integer in [0, total_steps = {values['total_steps']}]")
        need(type(values.get("finished")) is bool, "finished", "true or false")
        need(numbers(values.get("epoch_losses")), "epoch_losses", "a list of numbers")
        need(values.get("best_score") is None or type(values["best_score"]) in (int, float),
             "best_score", "a number or null")
        dataset = values.get("dataset")
        need(isinstance(dataset, dict) and isinstance(dataset.get("name"), str)
             and integer(dataset.get("crc32"), 0, 2**32), "dataset", "a data set's fingerprint")
        history = values.get("history")
        need(isinstance(history, dict) and set(history) == {
            f.name for f in dataclasses.fields(History)}, "history", "a History's fields")
        for column in History.COLUMNS:
            need(numbers(history[column]) and len(history[column]) == len(history["epoch"]),
                 f"history.{column}", f"a list of {len(history['epoch'])} numbers")
        epochs, steps = history["epoch"], history["steps"]
        need(epochs == list(range(1, len(epochs) + 1)), "history.epoch", "1, 2, …")
        need(all(integer(s, 0, values["step"]) for s in steps) and steps == sorted(steps),
             "history.steps", f"increasing update counts up to step = {values['step']}")
        need(len(values["epoch_losses"]) <= values["step"] - (steps[-1] if steps else 0),
             "epoch_losses", "one loss per update since the last epoch's end")
        need(history["best_epoch"] is None or history["best_epoch"] in epochs,
             "history.best_epoch", "null or one of the epochs")
        state = cls(**{k: values[k] for k in ("total_steps", "step", "finished", "dataset")})
        state.epoch_losses = list(np.asarray(values["epoch_losses"], np.float32))
        state.history = History.from_json(history)
        state.best_score = -math.inf if values["best_score"] is None else values["best_score"]
        return state


def fingerprint(dataset: Dataset) -> dict[str, Any]:
    """What identifies a data set well enough to refuse resuming on another one."""
    def crc(a):
        return zlib.crc32(np.ascontiguousarray(a).view(np.uint8))
    lengths = [] if dataset.lengths_train is None else [crc(dataset.lengths_train)]
    return {"name": dataset.name, "x_train": list(dataset.x_train.shape),
            "x_test": list(dataset.x_test.shape),
            "crc32": functools.reduce(operator.xor, [crc(dataset.x_train), crc(dataset.y_train),
                                                      *lengths])}


class RunFolder:
    """A run folder opened for one ``fit``: locked against other processes, with one orbax
    manager. ``resume``: continue the run there; ``overwrite``: replace it; neither: the
    folder must hold no run. ``config`` sets the save interval. ``dry_run``: only check all
    that (and read), changing nothing. Close it (or use ``with``)."""

    def __init__(self, path: str | os.PathLike, config: TrainConfig, *, resume: bool = False,
                 overwrite: bool = False, dry_run: bool = False):
        self.manager = self.lock = None
        self.metadata = {}  # the JSON of each save read so far, by version
        _refuse_earlier_format(path)
        self.path = check_checkpoint_path(path, allowed=RUN_FILES, kind="run folder")
        self.created = not self.path.exists()
        if self.created and resume:
            raise ValueError(f"there is no run to resume in {str(self.path)!r} (no such folder); "
                             "start the run without resume_from / --resume.")
        if self.created and dry_run:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        self.lock = _lock(self.path)
        try:
            self.manager = self._open_manager(config, read_only=dry_run)
            holds = self.manager.latest_step() is not None
            if resume and not holds:
                raise ValueError(f"there is no run to resume in {str(self.path)!r} (it holds no "
                                 "complete save); start the run without resume_from / --resume.")
            if holds and not (resume or overwrite):
                raise ValueError(
                    f"{str(self.path)!r} holds {self.describe()}, and nothing a run saved is "
                    "replaced without asking: continue it (--resume DIR, or fit(..., "
                    "resume_from=DIR)), replace it (--overwrite, or fit(..., overwrite=True)) or "
                    "choose another folder.")
            if not dry_run:
                _name_holder(self.lock)
            ours = [p for p in self.path.iterdir() if p.name in HISTORY_FILES or (
                p.name.isdigit() or UNFINISHED.match(p.name))]  # what a run creates (checked)
            if not dry_run and (overwrite or not holds) and ours:
                self.manager.close()
                for item in ours:
                    shutil.rmtree(item) if item.is_dir() else item.unlink()
                self.manager = self._open_manager(config)
        except BaseException:
            self.close()
            raise

    def _open_manager(self, config: TrainConfig, read_only: bool = False
                      ) -> ocp.CheckpointManager:
        if read_only:
            return open_manager(self.path, read_only=True)
        save_when = [policies.InitialSavePolicy()]
        if config.save_every_steps is not None:
            save_when.append(policies.FixedIntervalPolicy(config.save_every_steps))
        if config.save_every_minutes is not None:
            save_when.append(policies.ContinuousCheckpointingPolicy(
                minimum_interval_secs=int(60 * config.save_every_minutes)))
        keep = policies.AnyPreservationPolicy([policies.LatestN(1), policies.BestN(
            get_metric_fn=lambda metrics: metrics["score"], reverse=False, n=1,
            keep_checkpoints_without_metrics=False)])
        return open_manager(self.path, cleanup_tmp_directories=True,
                            save_decision_policy=policies.AnySavePolicy(save_when),
                            preservation_policy=keep)

    def describe(self) -> str:
        """"a finished run (120 updates)" or "an unfinished run (update 7 of 120)"."""
        state = self.read_state()
        if state.finished:
            return f"a finished run ({state.step} updates)"
        return f"an unfinished run (update {state.step} of {state.total_steps})"

    def read_metadata(self, version: int | None = None) -> dict:
        """The JSON of the newest save (or of ``version``), read once."""
        version = version or self.manager.latest_step()
        if version not in self.metadata:
            self.metadata[version] = read(self.manager, {METADATA: ocp.args.JsonRestore()},
                                          version)[METADATA]
        return self.metadata[version]

    def read_state(self, version: int | None = None) -> TrainingState:
        version = version or self.manager.latest_step()
        return TrainingState.from_json(self.read_metadata(version).get("training_state"),
                                       self.path / str(version))

    def check_resume(self, config: TrainConfig, architecture: dict,
                     dataset: Dataset | str) -> TrainingState:
        """The saved state, if the run may be resumed with ``config``, a model of
        ``architecture`` (the entries given are compared; of the layer options, those given:
        the package adds S4's reference length itself) and ``dataset`` (or only its name);
        else ValueError naming every difference."""
        info = self.read_metadata()
        state = self.read_state()
        for version in self.manager.all_steps():  # the best epoch's save too
            other = self.read_metadata(version)["architecture"]
            if other != info["architecture"]:
                raise ValueError(f"the save {str(self.path / str(version))!r} holds another "
                                 f"architecture than the newest ({other} against "
                                 f"{info['architecture']}); the run folder was tampered with.")
        stored = {**info["architecture"], **(info.get("train_config") or {})}
        given = {**json.loads(json.dumps(architecture)), **dataclasses.asdict(config)}
        options = stored.get("layer_options") or {}
        given["layer_options"] = {**options, **given.get("layer_options", {})}
        differ = [f"{k}: stored {stored.get(k)!r}, given {v!r}" for k, v in given.items()
                  if k not in TrainConfig.RESUME_IRRELEVANT and stored.get(k) != v
                  and not (k == "epochs" and v > stored.get(k, math.inf))]
        ours = fingerprint(dataset) if isinstance(dataset, Dataset) else {"name": dataset}
        differ += [f"data set {k}: stored {state.dataset.get(k)!r}, given {v!r}"
                   for k, v in ours.items() if state.dataset.get(k) != v]
        if differ:
            raise ValueError(f"the run in {str(self.path)!r} was started with other settings "
                             f"({'; '.join(differ)}); resume it with the same ones (only "
                             f"{', '.join(TrainConfig.RESUME_IRRELEVANT)} may change, and epochs "
                             "may grow).")
        return state

    def should_save(self, step: int) -> bool:
        """Is a save due after update ``step`` by the interval policies?"""
        return self.manager.should_save(step)

    def save(self, state: TrainingState, model, optimizer, config: TrainConfig, *,
             score: float | None = None) -> None:
        """Save ``state`` with the model and optimiser as version ``state.step``; ``score``:
        the epoch's validation score, when it is a new best."""
        values = metadata(model, optimizer, config=config, training_state=state.to_json())
        write(self.manager, state.step, save_args(values, model, optimizer),
              metrics=None if score is None else {"score": score})

    def restore(self, model, optimizer, version: int | None = None) -> None:
        """Load the newest save (or ``version``) into ``model`` and ``optimizer``."""
        version = version or self.manager.latest_step()
        restore(self.manager, model, optimizer, version, self.read_metadata(version))

    def best_version(self) -> int | None:
        return self.manager.best_step()

    def write_history(self, history: History) -> None:
        """``history.json`` and ``history.csv``, each written to a new temporary file (never
        through a link) and renamed over the old one (a reader never sees half a file)."""
        for name, text in ((HISTORY_FILES[0], json.dumps(history.to_json(), indent=1)),
                           (HISTORY_FILES[1], history.to_csv())):
            handle, temporary = tempfile.mkstemp(dir=self.path, prefix=f".{name}.")
            try:
                with os.fdopen(handle, "w") as file:
                    file.write(text)
                os.replace(temporary, self.path / name)
            except BaseException:
                os.unlink(temporary)
                raise

    def close(self) -> None:
        """Close the manager and release the lock; a folder this run created that holds no
        save (its first save failed) is removed again."""
        manager = self.manager
        if manager is not None:
            with quiet_orbax(), contextlib.suppress(Exception):
                empty = manager.latest_step() is None
                manager.close()
                if self.created and empty:  # remove what this run made: nothing else is there
                    for item in self.path.iterdir():
                        if UNFINISHED.match(item.name):
                            shutil.rmtree(item)
                    (self.path / LOCK).unlink()
                    self.path.rmdir()
            self.manager = None
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _refuse_earlier_format(path: str | os.PathLike) -> None:
    """ValueError for a run folder of annotated_ssm 0.2 (``last/`` and ``best/`` checkpoints)."""
    path = pathlib.Path(path)
    with contextlib.suppress(OSError):  # a name too long: checked next
        if not any((path / name).is_dir() for name in ("last", "best")):
            return
        raise ValueError(f"{str(path)!r} holds a run of an earlier annotated_ssm (last/ and best/ "
                         "checkpoints), which this version cannot resume; its best model loads "
                         f"with load_model({str(path / 'best')!r}). Start new runs in another "
                         "folder.")


def _lock(folder: pathlib.Path) -> int:
    """An exclusive ``flock`` on the folder's lock file (created without following a link);
    ValueError naming the holder if another process has it."""
    descriptor = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(descriptor, 200, 0).decode(errors="replace").strip() or "unknown"
        os.close(descriptor)
        raise ValueError(f"run folder {str(folder)!r} is in use by another process ({holder}); "
                         "wait for it to end or stop it, then try again.") from None
    return descriptor


def _name_holder(descriptor: int) -> None:
    """Write who holds the lock into the lock file, for the message another process gives."""
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
