"""Checkpoints on orbax-checkpoint that rebuild their model and never delete a user's file.

A checkpoint is a folder kept by ``orbax.checkpoint.CheckpointManager``, one numbered version
per save, the newest complete one counting: ``PATH/N/`` holds ``annotated_ssm`` (JSON: the
architecture, i.e. ModelConfig's ``to_dict()`` and the data's shapes, format, package
version, training configuration, update count, extra facts), ``model`` (parameters, batch
statistics), ``optimizer`` (if saved) and ``rng`` (dropout streams). Orbax writes a save into
``PATH/N.orbax-checkpoint-tmp…`` and renames it to ``PATH/N`` only when it is complete, then
deletes version N-1: whatever stops a save (Ctrl-C, an exception, kill -9, a full disk)
leaves the previous version, and what it left is known by orbax's unfinished name alone, not
by a process id. This module adds what orbax does not do: the architecture (so
``load_model(PATH)`` rebuilds the model), refusing to write over a user's files, clear errors.
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
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from . import __version__
from .model import SequenceModel, model_from_architecture

__all__ = ["save_checkpoint", "restore_checkpoint", "load_model", "read_checkpoint_info",
           "check_checkpoint_path", "check_folder", "checkpoint_metadata", "check_optimizer",
           "mark_stale", "as_json", "remove_unfinished_saves", "BEST", "LAST", "FORMAT"]

FORMAT, FORMAT_VERSION = "annotated_ssm checkpoint", 3
METADATA = "annotated_ssm"  # the JSON item of each version
ARRAYS = ("model", "optimizer", "rng")  # one orbax item each
BEST, LAST = "best", "last"  # a run folder's two checkpoints (annotated_ssm.runs)
_UNFINISHED = re.compile(r"^\d+\.orbax-checkpoint-tmp(-\d+)?$")  # orbax's name for a save under way
_ORBAX_FILES = ("_CHECKPOINT_METADATA", "commit_success.txt")
_stale_optimizers = weakref.WeakSet()  # optimisers whose model fit gave other weights


# --- Where a save may write -----------------------------------------------------------------

def _not_ours(folder: pathlib.Path, finished: bool) -> list[str]:
    """The names in a version folder (``finished``) or an unfinished save that no save of ours
    writes (a user's file), or the folder itself if it is not one."""
    if folder.is_symlink() or not folder.is_dir():
        return [folder.name]
    names = {re.sub(r"\.orbax-checkpoint-tmp.*$", "", p.name): p.name for p in folder.iterdir()}
    other = [f"{folder.name}/{name}" for key, name in names.items()
             if key not in (METADATA, *ARRAYS, *_ORBAX_FILES)]
    return other + ([f"{folder.name} (no {METADATA})"] if finished and METADATA not in names else [])


def _unfinished_saves(path: pathlib.Path) -> list[pathlib.Path]:
    """What interrupted saves left in the checkpoint folder ``path`` (and nothing else)."""
    if not path.is_dir() or path.is_symlink():
        return []
    return [p for p in path.iterdir() if _UNFINISHED.match(p.name) and not _not_ours(p, False)]


def remove_unfinished_saves(path: str | os.PathLike) -> None:
    """Remove what interrupted saves left in the checkpoint folder ``path``: folders under
    orbax's unfinished name holding only what a save writes. Orbax renames a save to its
    version number only when it is complete, so none of them holds a checkpoint."""
    for leftover in _unfinished_saves(pathlib.Path(path)):
        shutil.rmtree(leftover, ignore_errors=True)


def _not_a_checkpoints(path: pathlib.Path) -> list[str]:
    """The names in ``path`` that are not a checkpoint's versions or unfinished saves."""
    return [n for p in path.iterdir() for n in (
        _not_ours(p, True) if p.name.isdigit() else
        _not_ours(p, False) if _UNFINISHED.match(p.name) else [p.name])]


def _exists(path: pathlib.Path) -> bool:
    with contextlib.suppress(OSError):  # a name too long does not exist
        return path.exists()
    return False


def check_folder(path: str | os.PathLike, not_ours, kind: str) -> pathlib.Path:
    """``path``, absolute, if a save may create or replace it. ValueError for what a save would
    destroy: a file, a folder with files ``not_ours(path)`` names (not a ``kind``'s), the
    current directory or a parent of it, a name too long; OSError if the nearest existing
    folder cannot be written (tried by making a directory there: root ignores permissions)."""
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise TypeError(f"a {kind} path must be a non-empty str or os.PathLike; got {path!r}.")
    path = ancestor = pathlib.Path(path).absolute()
    while not _exists(ancestor):
        ancestor = ancestor.parent
    try:
        name_max = os.pathconf(ancestor, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # not POSIX, or unknown: the common limit
        name_max = 255
    too_long = [n for n in path.relative_to(ancestor).parts if len(n.encode()) > name_max]
    if too_long:
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
    if path.is_dir() and (shown := sorted(not_ours(path))[:5]):
        raise ValueError(f"{kind} path {str(path)!r} holds files that are not a {kind}'s "
                         f"({shown}); saving could delete them. Choose a new or empty folder.")
    if not ancestor.is_dir():
        raise OSError(f"cannot save a {kind} at {str(path)!r}: {str(ancestor)!r} is not a "
                      "directory.")
    try:
        tempfile.TemporaryDirectory(dir=ancestor, prefix=".annotated_ssm-write-test-").cleanup()
    except OSError as error:
        raise OSError(f"cannot save a {kind} at {str(path)!r}: {str(ancestor)!r} is not "
                      f"writable ({error.strerror or error}).") from error
    return path


def check_checkpoint_path(path: str | os.PathLike) -> pathlib.Path:
    """``path`` (absolute) if a checkpoint may be saved there: a new path, an empty folder or
    an earlier checkpoint of this package; else ValueError or OSError (see :func:`check_folder`)."""
    return check_folder(path, _not_a_checkpoints, "checkpoint")


# --- What a save holds ----------------------------------------------------------------------

def _json_problem(value: Any, where: str) -> str | None:
    """Where ``value`` holds something JSON cannot store exactly, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value} (JSON has no NaN or infinity)"
    if isinstance(value, dict):
        bad = next((k for k in value if not isinstance(k, str)), None)
        if bad is not None:
            return f"{where} has the key {bad!r} (JSON keys are str)"
        return next((p for k, v in value.items() if (p := _json_problem(v, f"{where}[{k!r}]"))), None)
    if isinstance(value, (list, tuple)):
        return next((p for i, v in enumerate(value) if (p := _json_problem(v, f"{where}[{i}]"))), None)
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    return f"{where} is {value!r}, a {type(value).__name__}"


def checkpoint_metadata(model: SequenceModel, config: Any = None, extra: dict | None = None,
                        training_state: dict | None = None,
                        optimizer: nnx.Optimizer | None = None) -> dict:
    """The JSON a checkpoint of ``model`` stores; ValueError naming the first value JSON cannot
    store exactly (a layer option ``b'yes'``, ``extra={"a": nan}``), so a run fails before it
    trains."""
    if not isinstance(getattr(model, "architecture", None), dict):
        raise ValueError("model must be a SequenceClassifier or CausalSequenceModel (it records "
                         f"its architecture); got a {type(model).__name__}.")
    metadata = {"format": FORMAT, "format_version": FORMAT_VERSION, "package_version": __version__,
                "architecture": model.architecture, "has_optimizer": optimizer is not None,
                "step": None if optimizer is None else int(optimizer.step[...]),
                "train_config": dataclasses.asdict(config) if dataclasses.is_dataclass(config)
                else config, "extra": extra or {}, "training_state": training_state}
    for name, value in metadata.items():
        if problem := _json_problem(value, name):
            raise ValueError(f"the checkpoint's {name} must be JSON-serialisable (str, finite "
                             f"numbers, bools, None, lists, dicts with str keys): {problem}.")
    return metadata


def mark_stale(optimizer: nnx.Optimizer) -> None:
    """Record that ``optimizer``'s model now holds other weights than its state belongs to."""
    _stale_optimizers.add(optimizer)


def check_optimizer(model: SequenceModel, optimizer: nnx.Optimizer | None) -> None:
    """ValueError unless ``optimizer``'s state belongs to ``model``'s current weights: saving
    or training the pair could never continue a run."""
    if optimizer is None:
        return
    def shapes(tree):
        return sorted((np.shape(a), str(a.dtype)) for a in jax.tree.leaves(tree))
    expected = jax.eval_shape(optimizer.tx.init, nnx.state(model, optimizer.wrt))
    if shapes(expected) != shapes(optimizer.opt_state) or optimizer in _stale_optimizers:
        raise ValueError("this optimizer's state does not belong to the model's current weights "
                         "(it was made for another model, or fit with keep_best put the best "
                         "epoch's weights back into its model), so they could not train on "
                         "together. Save the model alone, or give fit a run folder.")


def _arrays(model: SequenceModel, optimizer: nnx.Optimizer | None) -> dict[str, dict]:
    """The arrays of a checkpoint, as plain dicts: the dropout keys as their uint32 key data."""
    def plain(v):
        return np.asarray(jax.random.key_data(v) if _is_key(v) else v)
    tree = {"model": nnx.to_pure_dict(nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat))),
            "rng": jax.tree.map(plain, nnx.to_pure_dict(nnx.state(model, nnx.RngState)))}
    if optimizer is not None:
        tree["optimizer"] = nnx.to_pure_dict(nnx.state(optimizer, nnx.optimizer.OptState))
    return {key: arrays for key, arrays in tree.items() if arrays}


def _is_key(value) -> bool:
    return jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key)


# --- Saving and reading ---------------------------------------------------------------------

@contextlib.contextmanager
def _manager(path: pathlib.Path, *, create: bool):
    """Orbax's manager of ``path`` (one version kept, synchronous), quiet (on a bad file orbax's
    threads log and print tracebacks the error we raise makes redundant). Unfinished saves are
    removed here: orbax 0.12's own clean-up runs in the background and misses some names."""
    absl_logger, hook = logging.getLogger("absl"), sys.unraisablehook
    level = absl_logger.level
    absl_logger.setLevel(logging.CRITICAL)
    sys.unraisablehook = lambda unraisable: None
    manager = None
    try:
        if create:
            remove_unfinished_saves(path)
        options = ocp.CheckpointManagerOptions(max_to_keep=1, create=create,
                                               enable_async_checkpointing=False)
        manager = ocp.CheckpointManager(path, options=options)
        yield manager
    finally:
        if manager is not None:
            manager.close()
        gc.collect()  # failed coroutines are reported when collected: collect them now
        sys.unraisablehook = hook
        absl_logger.setLevel(level)


def save_checkpoint(path: str | os.PathLike, model: SequenceModel,
                    optimizer: nnx.Optimizer | None = None, *, config: Any = None,
                    extra: dict | None = None, training_state: dict | None = None) -> pathlib.Path:
    """Save ``model`` (a ``SequenceClassifier`` or ``CausalSequenceModel``: its weights, dropout
    streams, architecture) and ``optimizer`` (its state must belong to ``model``) as the
    checkpoint ``path``: a new path, an empty folder or an earlier checkpoint, replaced once the
    new one is complete. ``config`` (a dataclass), ``extra`` (JSON facts) and ``training_state``
    (where ``fit`` was) are recorded. Returns the absolute path. ValueError for a NaN or
    infinite parameter or a value JSON cannot store; OSError with the free space on a full disk.
    """
    path = check_checkpoint_path(path)
    check_optimizer(model, optimizer)
    metadata = checkpoint_metadata(model, config, extra, training_state, optimizer)
    tree = _arrays(model, optimizer)
    bad = [jax.tree_util.keystr(p) for p, leaf in jax.tree_util.tree_leaves_with_path(tree["model"])
           if np.issubdtype(np.asarray(leaf).dtype, np.inexact) and not np.all(np.isfinite(leaf))]
    if bad:
        raise ValueError(f"refusing to save a checkpoint at {str(path)!r}: the model has "
                         f"non-finite (NaN or inf) parameters in {bad[:3]}; training diverged.")
    path.mkdir(parents=True, exist_ok=True)
    args = ocp.args.Composite(**{METADATA: ocp.args.JsonSave(metadata)},
                              **{key: ocp.args.StandardSave(arrays) for key, arrays in tree.items()})
    try:
        with _manager(path, create=True) as manager:
            manager.save((manager.latest_step() or 0) + 1, args=args)
    except (OSError, ValueError) as error:
        if getattr(error, "errno", None) != errno.ENOSPC and "RESOURCE_EXHAUSTED" not in str(error):
            raise
        free = shutil.disk_usage(path).free
        raise OSError(errno.ENOSPC, f"no space left to save the checkpoint at {str(path)!r}: "
                      f"{free / 2**20:,.1f} MiB free on its disk; the previous version is "
                      "kept.") from error
    finally:  # this save's folder, if it failed (orbax's threads may still be writing
        remove_unfinished_saves(path)  # there: then the next save removes it)
    return path


def _read(path: str | os.PathLike, items: dict) -> tuple[pathlib.Path, dict]:
    """(the checkpoint's path, the ``items`` restored from its newest version); a run folder
    stands for its best checkpoint, else its last."""
    path = pathlib.Path(path).absolute()
    path = next((path / name for name in (BEST, LAST) if (path / name).is_dir()), path)
    if not path.is_dir():
        raise ValueError(f"no checkpoint at {str(path)!r}: it is not a directory.")
    with _manager(path, create=False) as manager:
        version = manager.latest_step()
        if version is None or _not_a_checkpoints(path):
            left = [p.name for p in _unfinished_saves(path)]
            raise ValueError(f"{str(path)!r} is not an annotated_ssm checkpoint: it holds no "
                             "complete save" + (f" (only an interrupted one, {left})" if left
                                                else f" ({sorted(os.listdir(path))[:5]})") + ".")
        try:
            return path, manager.restore(version, args=ocp.args.Composite(**items))
        except Exception as error:  # orbax and tensorstore raise many kinds on a bad file
            first_line = (str(error).splitlines() or [type(error).__name__])[0][:300]
            raise ValueError(f"could not read {', '.join(items)} of the checkpoint at "
                             f"{str(path / str(version))!r} (corrupted or incomplete): "
                             f"{first_line}") from error


def read_checkpoint_info(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path`` (a run folder: its best, else its last);
    ValueError saying what is wrong with a path that is not one, corrupted metadata, or
    another format version."""
    path, restored = _read(path, {METADATA: ocp.args.JsonRestore()})
    info = restored[METADATA]
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ValueError(f"the checkpoint metadata in {str(path)!r} is corrupted: it does not say "
                         f"\"format\": {FORMAT!r}.")
    version = info.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # strict: true is not 1
        raise ValueError(f"the checkpoint at {str(path)!r} has format_version {version!r}; this "
                         f"version of annotated_ssm ({__version__}) reads format_version "
                         f"{FORMAT_VERSION}.")
    for key, kind in (("architecture", dict), ("has_optimizer", bool)):
        if not isinstance(info.get(key), kind):
            raise ValueError(f"the checkpoint metadata in {str(path)!r} is corrupted: {key!r} "
                             f"should be a {kind.__name__}, got {info.get(key)!r}.")
    return info


def restore_checkpoint(path: str | os.PathLike, model: SequenceModel,
                       optimizer: nnx.Optimizer | None = None) -> dict[str, Any]:
    """Load the checkpoint at ``path`` into ``model`` (and ``optimizer``) in place; return its
    metadata. ValueError, before any array is read, if ``model``'s architecture differs from
    the stored one (naming the entries), or an optimiser state is asked for and there is none.
    """
    info = read_checkpoint_info(path)
    stored, ours = info["architecture"], as_json(getattr(model, "architecture", None))
    if ours is not None and ours != stored:
        differ = [f"{k}: checkpoint {stored.get(k)!r}, model {ours.get(k)!r}"
                  for k in sorted(set(stored) | set(ours)) if ours.get(k) != stored.get(k)]
        raise ValueError(f"the checkpoint at {str(path)!r} does not fit this model (different "
                         f"architecture: {'; '.join(differ)}). Use load_model(path) to rebuild the "
                         "stored one.")
    if optimizer is not None and not info["has_optimizer"]:
        raise ValueError(f"the checkpoint at {str(path)!r} holds no optimiser state (it was saved "
                         "without one); restore only the model.")
    # Each array is restored where the model's array lives (its sharding): orbax need not guess.
    _, restored = _read(path, {key: ocp.args.StandardRestore(jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype, sharding=getattr(a, "sharding", None)),
        arrays)) for key, arrays in _arrays(model, optimizer).items()})
    for key, owner, kind in (("model", model, nnx.Any(nnx.Param, nnx.BatchStat)),
                             ("optimizer", optimizer, nnx.optimizer.OptState),
                             ("rng", model, nnx.RngState)):
        if key in restored:
            state = nnx.state(owner, kind)
            nnx.replace_by_pure_dict(state, jax.tree.map(
                lambda o, n: jax.random.wrap_key_data(np.asarray(n), impl=jax.random.key_impl(o))
                if _is_key(o) else jnp.asarray(n, o.dtype), nnx.to_pure_dict(state), restored[key]))
            nnx.update(owner, state)
    return info


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def load_model(path: str | os.PathLike, *, seed: int = 0) -> SequenceModel:
    """Rebuild the model stored at ``path`` (a checkpoint, or a run folder: its best model, else
    its last) from its recorded architecture (its sizes checked by ``ModelConfig`` first: a
    tampered ``n_layers=10**6`` is refused, not built) and restore its weights; returned in
    eval mode. ``seed`` seeds only dropout."""
    model = model_from_architecture(read_checkpoint_info(path)["architecture"],
                                    rngs=nnx.Rngs(seed))
    restore_checkpoint(path, model)
    model.eval()
    return model
