"""Model I/O on orbax-checkpoint: save a model (and optimiser), rebuild it from its checkpoint.

A checkpoint is a folder kept by one ``orbax.checkpoint.CheckpointManager``, one numbered
version per save: ``PATH/N/`` holds ``annotated_ssm`` (JSON: format, package version, the
architecture — ModelConfig's ``to_dict()`` and the data's shapes — the training
configuration, update count, extra facts), ``model`` (parameters, batch statistics),
``optimizer`` (if saved) and ``rng`` (dropout streams). Orbax writes a save into a temporary
folder and renames it to ``PATH/N`` only when it is complete, so whatever stops a save (an
exception, kill -9, a full disk) leaves the earlier versions. A version saved with metrics
(a run folder's best epoch, :mod:`annotated_ssm.runs`) is what :func:`load_model` reads
first; otherwise the newest.

What this module adds to orbax: the architecture (``load_model(PATH)`` rebuilds the model),
refusing to write over a user's files, and one-line errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import json
import logging
import math
import os
import pathlib
import re
import shutil
import sys
import tempfile
import threading
import traceback
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from . import __version__
from .model import SequenceModel, model_from_architecture

__all__ = ["save_checkpoint", "restore_checkpoint", "load_model", "read_checkpoint_info",
           "check_checkpoint_path", "check_optimizer"]

FORMAT, FORMAT_VERSION = "annotated_ssm checkpoint", 3
METADATA = "annotated_ssm"  # the JSON item of each version
ARRAYS = ("model", "optimizer", "rng")  # one orbax item each
ORBAX_FILES = ("_CHECKPOINT_METADATA", "commit_success.txt", "metrics")
UNFINISHED = re.compile(r"^\d+\.orbax-checkpoint-tmp(-\d+)?$")  # orbax's name for a save under way
PARAMETERS = nnx.Any(nnx.Param, nnx.BatchStat)


# --- Where a save may write -----------------------------------------------------------------

def foreign_names(folder: pathlib.Path, allowed: tuple[str, ...] = ()) -> list[str]:
    """What in the checkpoint folder ``folder`` no save of ours wrote (a user's files, a
    symlink): ``allowed`` names (files a run adds) are ours too."""
    def version_foreign(version: pathlib.Path) -> list[str]:
        if version.is_symlink() or not version.is_dir():
            return [version.name]
        names = {re.sub(r"\.orbax-checkpoint-tmp.*$", "", p.name) for p in version.iterdir()}
        return [f"{version.name}/{n}" for n in names - {METADATA, *ARRAYS, *ORBAX_FILES}]
    return [n for p in folder.iterdir() for n in (
        version_foreign(p) if p.name.isdigit() or UNFINISHED.match(p.name) else
        [] if p.name in allowed and p.is_file() and not p.is_symlink() else [p.name])]


def check_checkpoint_path(path: str | os.PathLike, allowed: tuple[str, ...] = (),
                          kind: str = "checkpoint") -> pathlib.Path:
    """``path``, absolute with a symlink to a folder followed, if a save may create or add to
    it: a new path, an empty folder or an earlier checkpoint of this package. ValueError for
    what a save could destroy (a file, a user's files in the folder, the current directory or a
    parent of it, a name too long); OSError if the nearest existing folder cannot be written."""
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise TypeError(f"a {kind} path must be a non-empty str or os.PathLike; got {path!r}.")
    path = pathlib.Path(path).absolute()
    with contextlib.suppress(OSError):  # (a name too long is no link)
        if path.is_symlink() and path.is_dir():  # runs -> /scratch/runs: follow the link
            path = path.resolve()
    ancestor = path
    while not _exists(ancestor):
        ancestor = ancestor.parent
    name_max = 255
    with contextlib.suppress(OSError, ValueError, AttributeError):
        name_max = os.pathconf(ancestor, "PC_NAME_MAX")
    if too_long := [n for n in path.relative_to(ancestor).parts if len(n.encode()) > name_max]:
        raise ValueError(f"{kind} path {str(path)!r} has a name too long for this file system: "
                         f"{too_long[0][:40]!r}… ({len(too_long[0].encode())} bytes; at most "
                         f"{name_max}).")
    cwd = pathlib.Path.cwd().resolve()
    if path.resolve() == cwd or path.resolve() in cwd.parents:
        raise ValueError(f"{kind} path {str(path)!r} is the current directory or contains it; "
                         f"choose a new sub-folder, e.g. {str(path / 'runs')!r}.")
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ValueError(f"{kind} path {str(path)!r} exists and is not a directory; saving would "
                         "replace it. Choose another path.")
    if path.is_dir() and (shown := sorted(foreign_names(path, allowed))[:5]):
        raise ValueError(f"{kind} path {str(path)!r} holds files that are not a {kind}'s "
                         f"({shown}); saving could delete them. Choose a new or empty folder.")
    if not ancestor.is_dir():
        raise OSError(f"cannot save a {kind} at {str(path)!r}: {str(ancestor)!r} is not a "
                      "directory.")
    try:  # making a folder there is the test (root ignores permissions)
        tempfile.TemporaryDirectory(dir=ancestor, prefix=".annotated_ssm-write-test-").cleanup()
    except OSError as error:
        raise OSError(f"cannot save a {kind} at {str(path)!r}: {str(ancestor)!r} is not "
                      f"writable ({error.strerror or error}).") from None
    return path


def _exists(path: pathlib.Path) -> bool:
    with contextlib.suppress(OSError):  # a name too long does not exist
        return path.exists()
    return False


# --- What a save holds ----------------------------------------------------------------------

def metadata(model: SequenceModel, optimizer: nnx.Optimizer | None = None, *, config: Any = None,
             extra: dict | None = None, training_state: dict | None = None) -> dict:
    """The JSON a version stores; ValueError naming the first value JSON cannot store exactly
    (a layer option ``b'yes'``, ``extra={"a": nan}``), so a run fails before it trains."""
    if not isinstance(getattr(model, "architecture", None), dict):
        raise ValueError("model must be a SequenceClassifier or CausalSequenceModel (it records "
                         f"its architecture); got a {type(model).__name__}.")
    values = {"format": FORMAT, "format_version": FORMAT_VERSION, "package_version": __version__,
              "architecture": model.architecture, "has_optimizer": optimizer is not None,
              "step": None if optimizer is None else int(optimizer.step[...]),
              "train_config": dataclasses.asdict(config) if dataclasses.is_dataclass(config)
              else config, "extra": extra or {}, "training_state": training_state}
    for name, value in values.items():
        if problem := _json_problem(value, name):
            raise ValueError(f"the checkpoint's {name} must be JSON-serialisable (str, finite "
                             f"numbers, bools, None, lists, dicts with str keys): {problem}.")
    return json.loads(json.dumps(values))  # tuples read back as lists


def _json_problem(value: Any, where: str) -> str | None:
    """Where ``value`` holds something JSON cannot store exactly, or None."""
    if isinstance(value, dict):
        items = list(value.items())
        if bad := [k for k, _ in items if not isinstance(k, str)]:
            return f"{where} has the key {bad[0]!r} (JSON keys are str)"
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        ok = value is None or isinstance(value, (str, bool, int)) or (
            isinstance(value, float) and math.isfinite(value))
        return None if ok else f"{where} is {value!r}, a {type(value).__name__}"
    return next((p for k, v in items if (p := _json_problem(v, f"{where}[{k!r}]"))), None)


def check_optimizer(model: SequenceModel, optimizer: nnx.Optimizer | None) -> None:
    """ValueError unless ``optimizer``'s state has the shapes of ``model``'s parameters."""
    if optimizer is None:
        return
    def shapes(tree):
        return sorted((np.shape(a), str(a.dtype)) for a in jax.tree.leaves(tree))
    if shapes(jax.eval_shape(optimizer.tx.init, nnx.state(model, optimizer.wrt))) != shapes(
            optimizer.opt_state):
        raise ValueError("this optimizer's state does not belong to the model's current weights "
                         "(it was made for another model), so the pair could never train on. "
                         "Save the model alone.")


def arrays(model: SequenceModel, optimizer: nnx.Optimizer | None = None) -> dict[str, dict]:
    """The arrays of a version, as plain dicts (the dropout keys as their uint32 key data)."""
    def plain(v):
        return np.asarray(jax.random.key_data(v) if _is_key(v) else v)
    tree = {"model": nnx.to_pure_dict(nnx.state(model, PARAMETERS)),
            "rng": jax.tree.map(plain, nnx.to_pure_dict(nnx.state(model, nnx.RngState)))}
    if optimizer is not None:
        tree["optimizer"] = nnx.to_pure_dict(nnx.state(optimizer, nnx.optimizer.OptState))
    return {key: value for key, value in tree.items() if value}


def _is_key(value) -> bool:
    return jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key)


def save_args(values: dict, model: SequenceModel, optimizer: nnx.Optimizer | None = None):
    """Orbax's arguments saving ``values`` (:func:`metadata`) and the arrays; ValueError for
    a NaN or infinite parameter (a diverged model is never saved)."""
    tree = arrays(model, optimizer)
    bad = [jax.tree_util.keystr(p) for p, leaf in jax.tree_util.tree_leaves_with_path(tree["model"])
           if np.issubdtype(np.asarray(leaf).dtype, np.inexact) and not np.all(np.isfinite(leaf))]
    if bad:
        raise ValueError(f"refusing to save: the model has non-finite (NaN or inf) parameters in "
                         f"{bad[:3]}; training diverged.")
    return ocp.args.Composite(**{METADATA: ocp.args.JsonSave(values)},
                              **{key: ocp.args.StandardSave(a) for key, a in tree.items()})


# --- Orbax's manager ------------------------------------------------------------------------

class _OrbaxLeftovers(logging.Filter):
    """Drops what orbax's threads and futures report of a failed save after the one-line
    error that already said what failed (orbax-checkpoint 0.11-0.12): asyncio's report of a
    future whose exception nobody retrieved, and absl's of a thread that ended on a full
    disk. Either may come whenever the thread ends or the future is collected: at exit, say."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage() + (  # the traceback too: orbax's frames are named there
            "".join(traceback.format_exception(*record.exc_info)) if record.exc_info else "")
        full_disk = "RESOURCE_EXHAUSTED" in text or "No space left" in text
        return not ("orbax" in record.pathname + text and
                    ("never retrieved" in text or full_disk))


for _name in ("asyncio", "absl"):
    logging.getLogger(_name).addFilter(_OrbaxLeftovers())
# The same after a failed save: the write coroutines of the futures orbax dropped are
# collected, perhaps only at exit, and Python warns that they were never awaited.
warnings.filterwarnings("ignore", r"coroutine 'async_serialize_from_host\.", RuntimeWarning)


@contextlib.contextmanager
def quiet_orbax(collect: bool = False):
    """Orbax's threads log and print tracebacks for failures the error we raise already names
    (orbax-checkpoint 0.11–0.12): silence absl's and asyncio's loggers, unraisable exceptions
    and exceptions ending a thread meanwhile. ``collect``: end with a garbage collection, so
    that the futures of a failed save or read are collected (and report) now, quietly, and not
    at some later moment on the user's terminal (only after a failure: a full collection walks
    every object, a third of a second in a process that holds jax's caches)."""
    loggers, hook = [logging.getLogger(name) for name in ("absl", "asyncio")], sys.unraisablehook
    levels, thread_hook = [logger.level for logger in loggers], threading.excepthook
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    sys.unraisablehook = threading.excepthook = lambda unraisable: None
    try:
        yield
    finally:
        if collect:
            gc.collect()  # failed futures and coroutines are reported when collected: now
        sys.unraisablehook, threading.excepthook = hook, thread_hook
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def open_manager(path: pathlib.Path, best: bool = True, **options) -> ocp.CheckpointManager:
    """Orbax's synchronous manager of ``path``; with ``best``, a version saved with
    ``metrics={"score": s}`` is the best (highest score). ``options``: more
    ``CheckpointManagerOptions``."""
    if best:
        options.update(best_fn=lambda metrics: metrics["score"], best_mode="max")
    # orbax warns that a read-only manager saves nothing and reads a read-only folder: asked
    with quiet_orbax() if options.get("read_only") else contextlib.nullcontext():
        options = ocp.CheckpointManagerOptions(enable_async_checkpointing=False,
                                               **{"create": False, **options})
        return ocp.CheckpointManager(path, options=options)


def write(manager: ocp.CheckpointManager, step: int, args, *, metrics: dict | None = None,
          force: bool = True) -> bool:
    """``manager.save`` with a full disk as one OSError that says whether an earlier version
    is kept, and nothing of orbax's on the terminal."""
    path = pathlib.Path(manager.directory)
    try:
        with quiet_orbax():
            return manager.save(step, args=args, metrics=metrics, force=force)
    except (OSError, ValueError) as error:
        with quiet_orbax(), contextlib.suppress(Exception):  # collected below, error let go
            manager.wait_until_finished()
            for thread in threading.enumerate():  # the failed save's threads (orbax 0.11-0.12
                if type(thread).__module__.startswith("orbax"):  # write its metadata after the
                    thread.join(timeout=60)  # commit): done now, quietly, not at exit
        if getattr(error, "errno", None) != errno.ENOSPC and "RESOURCE_EXHAUSTED" not in str(error):
            raise
    # Raised here, not in the handler: the error orbax raised (its traceback holds orbax's
    # failed futures, which asyncio reports when they are collected) is then let go and
    # collected now, quietly.
    with quiet_orbax(collect=True):
        pass
    free = shutil.disk_usage(path).free / 2**20
    kept = ("the previous version is kept" if manager.latest_step() is not None else
            "nothing was saved before, and the folder holds no checkpoint; free some space "
            "and run the same command again")
    full = OSError(f"no space left to save the checkpoint at {str(path)!r}: {free:,.1f} MiB "
                   f"free on its disk; {kept}.")
    full.errno = errno.ENOSPC
    raise full


def save_checkpoint(path: str | os.PathLike, model: SequenceModel,
                    optimizer: nnx.Optimizer | None = None, *, config: Any = None,
                    extra: dict | None = None) -> pathlib.Path:
    """Save ``model`` (a ``SequenceClassifier`` or ``CausalSequenceModel``: weights, dropout
    streams, architecture) and ``optimizer`` (its state must fit ``model``) as the checkpoint
    ``path``: a new path, an empty folder or an earlier checkpoint, replaced once the new one
    is complete. ``config`` (a dataclass) and ``extra`` (JSON facts) are recorded. Returns the
    absolute path. ValueError for a NaN or infinite parameter or a value JSON cannot store;
    OSError with the free space on a full disk. For example:

    >>> import shutil, tempfile
    >>> from annotated_ssm.model import SequenceClassifier
    >>> model = SequenceClassifier("s4d", 1, 3, d_model=8, n_layers=1, rngs=nnx.Rngs(0))
    >>> folder = tempfile.mkdtemp()
    >>> save_checkpoint(f"{folder}/model", model).name
    'model'
    >>> load_model(f"{folder}/model").architecture == model.architecture
    True
    >>> shutil.rmtree(folder)
    """
    path = check_checkpoint_path(path)
    check_optimizer(model, optimizer)
    args = save_args(metadata(model, optimizer, config=config, extra=extra), model, optimizer)
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(open_manager(path, best=False, max_to_keep=1,
                                                cleanup_tmp_directories=True)) as m:
        write(m, (m.latest_step() or 0) + 1, args)
    return path


# --- Reading --------------------------------------------------------------------------------

def read(manager: ocp.CheckpointManager, items: dict, version: int | None = None) -> dict:
    """The ``items`` restored from ``version`` (default: the best, else the newest);
    ValueError saying what is wrong with a folder that holds no complete save or a bad file."""
    path = pathlib.Path(manager.directory)
    version = version or manager.best_step() or manager.latest_step()
    if version is None:
        left = [p.name for p in path.iterdir() if UNFINISHED.match(p.name)]
        raise ValueError(f"{str(path)!r} is not an annotated_ssm checkpoint: it holds no complete "
                         "save" + (f" (only an interrupted one, {left})" if left else
                                   f" ({sorted(os.listdir(path))[:5]})") + ".")
    try:
        with quiet_orbax():
            restored = manager.restore(version, args=ocp.args.Composite(**items))
    except Exception as error:  # orbax and tensorstore raise many kinds on a bad file
        failure = (str(error).splitlines() or [type(error).__name__])[0][:300]
    else:
        failure = None
    if failure is not None:
        # Raised here, not in the handler (as in write): orbax's error and its failed futures
        # are let go and collected now, quietly, not later on the user's terminal.
        with quiet_orbax(collect=True):
            pass
        raise ValueError(f"could not read {', '.join(items)} of the checkpoint at "
                         f"{str(path / str(version))!r} (corrupted or incomplete): {failure}")
    if METADATA in restored:
        check_metadata(restored[METADATA], path / str(version))
    return restored


def check_metadata(info: Any, where: pathlib.Path) -> None:
    """ValueError unless ``info`` is this format's metadata."""
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ValueError(f"the checkpoint metadata in {str(where)!r} is corrupted: it does not "
                         f"say \"format\": {FORMAT!r}.")
    version = info.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # strict: true is not 1
        raise ValueError(f"the checkpoint at {str(where)!r} has format_version {version!r}; this "
                         f"version of annotated_ssm ({__version__}) reads format_version "
                         f"{FORMAT_VERSION}.")
    for key, kind in (("architecture", dict), ("has_optimizer", bool)):
        if not isinstance(info.get(key), kind):
            raise ValueError(f"the checkpoint metadata in {str(where)!r} is corrupted: {key!r} "
                             f"should be a {kind.__name__}, got {info.get(key)!r}.")


@contextlib.contextmanager
def reading(path: str | os.PathLike):
    """Orbax's manager of the existing checkpoint folder ``path``, closed afterwards."""
    path = pathlib.Path(path).absolute()
    if not path.is_dir():
        raise ValueError(f"no checkpoint at {str(path)!r}: it is not a directory.")
    with quiet_orbax():
        manager = open_manager(path, read_only=True)
        try:
            yield manager
        finally:
            manager.close()


def read_checkpoint_info(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path`` (of the version :func:`load_model` reads);
    ValueError saying what is wrong with a path that is not one, corrupted metadata, or
    another format version."""
    with reading(path) as manager:
        return read(manager, {METADATA: ocp.args.JsonRestore()})[METADATA]


def restore(manager: ocp.CheckpointManager, model: SequenceModel,
            optimizer: nnx.Optimizer | None = None, version: int | None = None,
            info: dict | None = None) -> dict[str, Any]:
    """Load ``version`` (default: the best, else the newest) into ``model`` (and
    ``optimizer``) in place; return its metadata (``info``: already read). ValueError, before
    any array is read, if the architecture differs from the stored one (naming the entries),
    or an optimiser state is asked for and there is none."""
    path = pathlib.Path(manager.directory)
    version = version or manager.best_step() or manager.latest_step()
    if info is None:
        info = read(manager, {METADATA: ocp.args.JsonRestore()}, version)[METADATA]
    stored, ours = info["architecture"], json.loads(json.dumps(model.architecture))
    if ours != stored:
        differ = [f"{k}: checkpoint {stored.get(k)!r}, model {ours.get(k)!r}"
                  for k in sorted(set(stored) | set(ours)) if ours.get(k) != stored.get(k)]
        raise ValueError(f"the checkpoint at {str(path)!r} does not fit this model (different "
                         f"architecture: {'; '.join(differ)}). Use load_model(path) to rebuild the "
                         "stored one.")
    if optimizer is not None and not info["has_optimizer"]:
        raise ValueError(f"the checkpoint at {str(path)!r} holds no optimiser state (it was saved "
                         "without one); restore only the model.")
    # Each array is restored where the model's array lives (its sharding): orbax need not guess.
    restored = read(manager, {key: ocp.args.StandardRestore(jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype, sharding=getattr(a, "sharding", None)),
        tree)) for key, tree in arrays(model, optimizer).items()}, version)
    for key, owner, kind in (("model", model, PARAMETERS), ("rng", model, nnx.RngState),
                             ("optimizer", optimizer, nnx.optimizer.OptState)):
        if key in restored:
            state = nnx.state(owner, kind)
            nnx.replace_by_pure_dict(state, jax.tree.map(
                lambda o, n: jax.random.wrap_key_data(np.asarray(n), impl=jax.random.key_impl(o))
                if _is_key(o) else jnp.asarray(n, o.dtype), nnx.to_pure_dict(state), restored[key]))
            nnx.update(owner, state)
    return info


def restore_checkpoint(path: str | os.PathLike, model: SequenceModel,
                       optimizer: nnx.Optimizer | None = None) -> dict[str, Any]:
    """Load the checkpoint at ``path`` (a run folder: its best epoch, else its newest save)
    into ``model`` (and ``optimizer``) in place and return its metadata (see :func:`restore`)."""
    with reading(path) as manager:
        return restore(manager, model, optimizer)


def load_model(path: str | os.PathLike, *, seed: int = 0) -> SequenceModel:
    """Rebuild the model stored at ``path`` (a checkpoint, or a run folder: its best epoch's
    model, else its newest) from its recorded architecture (its sizes checked by
    ``ModelConfig`` first: a tampered ``n_layers=10**6`` is refused, not built) and restore
    its weights; returned in eval mode. ``seed`` seeds only dropout. For example, a model
    saved and rebuilt gives the same outputs:

    >>> import shutil, tempfile
    >>> from annotated_ssm.model import CausalSequenceModel
    >>> model = CausalSequenceModel("s4d", 1, 1, d_model=8, n_layers=1, rngs=nnx.Rngs(0))
    >>> folder = tempfile.mkdtemp()
    >>> loaded = load_model(save_checkpoint(f"{folder}/model", model))
    >>> x = jnp.ones((2, 16, 1))
    >>> bool(jnp.all(loaded(x) == model(x))), type(loaded).__name__
    (True, 'CausalSequenceModel')
    >>> shutil.rmtree(folder)
    """
    with reading(path) as manager:
        info = read(manager, {METADATA: ocp.args.JsonRestore()})[METADATA]
        model = model_from_architecture(info["architecture"], rngs=nnx.Rngs(seed))
        restore(manager, model, info=info)
    model.eval()
    return model
