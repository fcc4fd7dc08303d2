"""Checkpoints that rebuild their model and never delete what they did not write.

A checkpoint is a directory holding two things:

    PATH/annotated_ssm.json   what it is: the model's architecture (``model.architecture``:
                              its ModelConfig's ``to_dict()`` and the data's shapes), the
                              package version, the training configuration and step (if
                              given); written last
    PATH/model/               parameters and batch statistics  } arrays written by
    PATH/optimizer/           the optimiser's state, if saved   } orbax-checkpoint
    PATH/rng/                 the dropout streams' keys and counts }

Saving is safe for the user's files:

1. ``PATH`` may be absent, an empty directory, or an earlier checkpoint of this package
   (``annotated_ssm.json``, ``model/``, ``optimizer/``, ``rng/`` and nothing else). Anything
   else — a regular file, a folder with other files, the current directory or one of its
   parents — is refused with a ValueError before anything is written.
2. The new checkpoint is written, synchronously, into a hidden temporary sibling
   ``.NAME.partial-PID-XXXXXXXX`` in the same folder (PID: the saving process). If writing
   fails the sibling is removed and ``PATH`` is untouched. Every name a save will create is
   checked first (length, writability), so a save cannot fail on a name after training.
3. Only when it is complete is it renamed into place: an earlier checkpoint is first moved
   aside (``.NAME.previous-PID-XXXXXXXX``), the new one renamed to ``PATH``, then the old
   one deleted. A crash between the two renames leaves both on disk, neither half-written.
4. Leftovers of a crashed process (``kill -9``, a power cut) are removed by the next save
   to the same path: a ``.partial-``/``.previous-`` sibling whose process is gone and which
   holds only what a save writes. A missing ``PATH`` with such a sibling is recovered by
   :func:`recover_checkpoint` (which the next save and a resume call) and named in errors.

``load_model(PATH)`` rebuilds the model from the stored architecture and restores its
weights; ``restore_checkpoint`` loads into a model (and optimiser) you built yourself.

Format versions: 2 stores the layer's options under ``architecture["layer_options"]``; 1
(annotated_ssm 0.2.0 before the config became the schema) stored them beside the other
entries and left out the step bounds it did not set. A version-1 checkpoint is converted
when read (:func:`read_checkpoint_info`), so it loads, restores and resumes as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import glob
import json
import logging
import os
import pathlib
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
from .config import ModelConfig
from .model import DATA_KEYS, SequenceModel, model_from_architecture

__all__ = ["save_checkpoint", "restore_checkpoint", "load_model", "read_checkpoint_info",
           "check_checkpoint_path", "check_metadata", "check_path_names", "recover_checkpoint",
           "METADATA_FILE", "FORMAT"]

METADATA_FILE = "annotated_ssm.json"
ARRAYS = ("model", "optimizer", "rng")  # one orbax directory each
FORMAT = "annotated_ssm checkpoint"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1 is converted when read
RANDOM_SUFFIX = 8  # tempfile.mkdtemp's random characters
_stale_optimizers = weakref.WeakSet()  # optimisers whose model fit gave other weights


def mark_stale(optimizer: nnx.Optimizer) -> None:
    """Record that ``optimizer``'s model no longer holds the weights its state belongs to
    (``fit`` with ``keep_best`` put the best epoch's weights back): saving or training the
    pair together is refused, since it could never resume exactly."""
    _stale_optimizers.add(optimizer)


def is_stale(optimizer: nnx.Optimizer | None) -> bool:
    return optimizer is not None and optimizer in _stale_optimizers


def _model_state(model: nnx.Module):
    return nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat))


def _optimizer_state(optimizer: nnx.Optimizer):
    return nnx.state(optimizer, nnx.optimizer.OptState)


def _is_key(value) -> bool:
    return jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key)


def _rng_arrays(model: nnx.Module) -> dict:
    """The model's random streams (dropout) as a dict of plain arrays: each key as its
    uint32 key data, each count as it is."""
    pure = nnx.to_pure_dict(nnx.state(model, nnx.RngState))
    return jax.tree.map(lambda v: np.asarray(jax.random.key_data(v) if _is_key(v) else v), pure)


def _restore_rng_arrays(model: nnx.Module, arrays: dict) -> None:
    """Put the streams saved by :func:`_rng_arrays` back into ``model``."""
    state = nnx.state(model, nnx.RngState)
    pure = nnx.to_pure_dict(state)
    restored = jax.tree.map(
        lambda old, new: jax.random.wrap_key_data(np.asarray(new), impl=jax.random.key_impl(old))
        if _is_key(old) else jnp.asarray(new, old.dtype), pure, arrays)
    nnx.replace_by_pure_dict(state, restored)
    nnx.update(model, state)


# --- Where a checkpoint may go ----------------------------------------------------------

def _is_own_checkpoint(path: pathlib.Path) -> bool:
    """True if ``path`` is a directory holding exactly what ``save_checkpoint`` writes."""
    if not path.is_dir() or path.is_symlink():
        return False
    names = {p.name for p in path.iterdir()}
    if not names <= {METADATA_FILE, *ARRAYS} or METADATA_FILE not in names:
        return False
    try:
        return json.loads((path / METADATA_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _temporary_prefixes(path: pathlib.Path) -> dict[str, str]:
    """The hidden siblings a save of ``path`` creates (before mkdtemp's random suffix)."""
    return {kind: f".{path.name}.{kind}-{os.getpid()}-" for kind in ("partial", "previous")}


def _limits(folder: pathlib.Path) -> tuple[int, int]:
    """(longest file name, longest path) on the file system of an existing ``folder``."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # not POSIX, or unknown: the common limits
        return 255, 4096


def _nearest_existing(path: pathlib.Path) -> pathlib.Path:
    """``path`` or its nearest ancestor that exists (a name too long does not exist)."""
    while True:
        try:
            if path.exists():
                return path
        except OSError:  # e.g. ENAMETOOLONG
            pass
        path = path.parent


def check_path_names(path: str | os.PathLike, siblings: tuple[str, ...] = ()) -> pathlib.Path:
    """Return ``path`` as an absolute path; ValueError if a name a save will create — a
    folder of ``path`` that does not exist yet, or a sibling of ``path`` named in
    ``siblings`` — is too long for the file system, or files inside would exceed its path
    limit. Touches nothing."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"checkpoint path must be a str or os.PathLike; got {type(path).__name__}.")
    if str(path) == "":
        raise ValueError("checkpoint path must not be empty.")
    path = pathlib.Path(path).absolute()
    ancestor = _nearest_existing(path)
    name_max, path_max = _limits(ancestor)
    names = [*path.relative_to(ancestor).parts, *siblings]
    too_long = [n for n in names if len(n.encode()) > name_max]
    if too_long:
        allowed = name_max - max((len(s) - len(path.name) for s in siblings), default=0)
        raise ValueError(f"checkpoint path {str(path)!r} has a name too long for this file system: "
                         f"saving creates {too_long[0]!r} ({len(too_long[0].encode())} bytes; at "
                         f"most {name_max}). Use a folder name of at most {allowed} characters.")
    inner = 160  # the longest path orbax writes inside a checkpoint, with room to spare
    if len(str(path).encode()) + inner > path_max:
        raise ValueError(f"checkpoint path {str(path)!r} is too long ({len(str(path).encode())} "
                         f"bytes): files inside it would exceed this file system's {path_max}-byte "
                         "path limit.")
    return path


def check_checkpoint_path(path: str | os.PathLike) -> pathlib.Path:
    """Return ``path`` as an absolute path if a checkpoint may be saved there; else raise.

    Allowed: a path that does not exist yet (its folder is created), an empty directory,
    or an earlier checkpoint of this package. ValueError for anything that saving would
    destroy (a file, a folder with other content, the current directory or a parent of
    it) and for names too long for the file system (including the hidden temporary
    siblings a save creates, see :func:`check_path_names`); OSError if the folder cannot
    be written (found by creating and removing a directory with the save's own temporary
    name there, which also works for root, whom permissions do not stop). Nothing is left
    behind.
    """
    prefixes = _temporary_prefixes(pathlib.Path(str(path) or "."))
    path = check_path_names(path, tuple(p + "X" * RANDOM_SUFFIX for p in prefixes.values()))
    resolved = path.resolve()
    cwd = pathlib.Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ValueError(f"checkpoint path {str(path)!r} is the current directory or contains it; "
                         f"choose a new sub-folder, e.g. {str(path / 'checkpoint')!r}.")
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ValueError(f"checkpoint path {str(path)!r} exists and is not a directory; saving "
                         "would replace it. Choose another path.")
    if path.is_dir() and any(path.iterdir()) and not _is_own_checkpoint(path):
        shown = sorted(p.name for p in path.iterdir())[:5]
        raise ValueError(f"checkpoint path {str(path)!r} is a non-empty directory that is not an "
                         f"annotated_ssm checkpoint (it holds {shown}); saving would delete those "
                         "files. Choose a new or empty folder.")
    # The nearest existing ancestor must be a writable directory.
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        raise OSError(f"cannot save a checkpoint at {str(path)!r}: {str(ancestor)!r} is not a "
                      "directory.")
    try:
        prefix = prefixes["partial"] if ancestor == path.parent else ".annotated_ssm-write-test-"
        tempfile.TemporaryDirectory(dir=ancestor, prefix=prefix).cleanup()
    except OSError as error:
        raise OSError(f"cannot save a checkpoint at {str(path)!r}: {str(ancestor)!r} is not "
                      f"writable ({error.strerror or error}).") from error
    return path


def check_metadata(model: SequenceModel, config: Any = None, extra: dict | None = None) -> dict:
    """The JSON-ready parts of a checkpoint's metadata; ValueError naming the first value
    that JSON cannot store (e.g. a layer option ``b'yes'``), so a run fails before it trains."""
    if not isinstance(getattr(model, "architecture", None), dict):
        raise ValueError("model must be a SequenceClassifier or CausalSequenceModel (it records "
                         f"its architecture); got a {type(model).__name__}.")
    parts = {"architecture": model.architecture, "train_config": _as_json(config),
             "extra": extra or {}}
    for name, value in parts.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"the checkpoint's {name} must be JSON-serialisable (str, numbers, "
                             "bools, None, lists, dicts with str keys); got "
                             f"{value!r}: {error}.") from error
    return parts


# --- Leftovers of interrupted saves ---------------------------------------------------------

def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):  # it exists (another user's), or we cannot tell
        return False
    return False


def _leftovers(path: pathlib.Path, kind: str) -> list[pathlib.Path]:
    """Hidden ``.NAME.<kind>-PID-XXXXXXXX`` siblings of ``path`` left by a process that is
    gone and holding only what a save writes (so never a user's file), newest first."""
    if not path.parent.is_dir():
        return []
    found = []
    for sibling in path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"):
        pid, sep, rest = sibling.name[len(f".{path.name}.{kind}-"):].partition("-")
        well_named = sep and pid.isdigit() and len(rest) == RANDOM_SUFFIX
        if not well_named or not sibling.is_dir() or sibling.is_symlink():
            continue
        if int(pid) == os.getpid() or not _process_is_gone(int(pid)):
            continue  # a save in progress
        names = {p.name for p in sibling.iterdir()}
        ours = all(n == METADATA_FILE or n.split(".")[0] in ARRAYS for n in names)
        if ours and (METADATA_FILE not in names or _is_own_checkpoint(sibling)):
            found.append(sibling)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def recover_checkpoint(path: str | os.PathLike) -> pathlib.Path | None:
    """If ``path`` is missing because a save crashed between its two renames, put the
    newest complete leftover (``.NAME.partial-…``, else ``.NAME.previous-…``) back at
    ``path`` and return it; else return None. Then remove the remaining leftovers."""
    path = pathlib.Path(path).absolute()
    recovered = None
    if not path.exists():
        for candidate in _leftovers(path, "partial") + _leftovers(path, "previous"):
            if _is_own_checkpoint(candidate):
                os.replace(candidate, path)
                recovered = path
                break
    if path.exists():
        for leftover in _leftovers(path, "partial") + _leftovers(path, "previous"):
            shutil.rmtree(leftover, ignore_errors=True)
    return recovered


def _leftover_note(path: pathlib.Path) -> str:
    """A sentence naming a complete leftover of an interrupted save of ``path``, or ''."""
    leftovers = _leftovers(path, "partial") + _leftovers(path, "previous")
    complete = [p for p in leftovers if _is_own_checkpoint(p)]
    if not complete:
        return ""
    return (f" An interrupted save left a complete checkpoint at {str(complete[0])!r}: rename it "
            f"to {str(path)!r}, or call recover_checkpoint({str(path)!r}).")


# --- Saving -------------------------------------------------------------------------------

def _write(directory: pathlib.Path, tree: dict, metadata: dict) -> None:
    """Write the arrays, then the metadata (last: a directory with metadata is complete)."""
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())  # synchronous: no thread
    with _quiet_orbax():  # a full disk: our caller reports the OSError, orbax need not log it
        try:
            for key, arrays in tree.items():
                checkpointer.save(directory / key, arrays)
        finally:
            checkpointer.close()
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")


def save_checkpoint(path: str | os.PathLike, model: SequenceModel,
                    optimizer: nnx.Optimizer | None = None, *,
                    config: Any = None, extra: dict | None = None,
                    training_state: dict | None = None) -> pathlib.Path:
    """Save ``model`` (and ``optimizer``, to resume training) into the directory ``path``.

    Args:
        path: a new path, an empty directory, or an earlier checkpoint (replaced only once the
            new one is complete); anything else raises ValueError (see
            :func:`check_checkpoint_path`).
        model: a ``SequenceClassifier`` or ``CausalSequenceModel``; its ``architecture`` is
            stored so :func:`load_model` can rebuild it. Its dropout streams are saved too.
        optimizer: its state (moments, step count) is saved too when given.
        config: a ``TrainConfig`` (any dataclass) recorded for reference.
        extra: more JSON-serialisable facts to record (e.g. metrics).
        training_state: where ``fit`` was (epoch, history, …), recorded to resume a run.

    Returns the absolute path. Raises ValueError if a parameter is NaN or infinite (a
    diverged model never replaces a good checkpoint), and if ``optimizer`` belongs to other
    weights than the model holds (after ``fit`` kept the best epoch's weights).
    """
    path = check_checkpoint_path(path)
    parts = check_metadata(model, config, extra)
    if is_stale(optimizer):
        raise ValueError("this optimizer's model holds the best epoch's weights (fit with "
                         "keep_best put them back), not the weights the optimizer's state belongs "
                         "to: together they could not resume training. Save the model alone, or "
                         "give fit a checkpoint folder, which saves the training state and the "
                         "best model separately.")
    tree = {"model": nnx.to_pure_dict(_model_state(model))}
    if optimizer is not None:
        tree["optimizer"] = nnx.to_pure_dict(_optimizer_state(optimizer))
    rng = _rng_arrays(model)
    if rng:
        tree["rng"] = rng
    bad = [jax.tree_util.keystr(p) for p, leaf in jax.tree_util.tree_leaves_with_path(tree["model"])
           if np.issubdtype(np.asarray(leaf).dtype, np.inexact)
           and not np.all(np.isfinite(np.asarray(leaf)))]
    if bad:
        raise ValueError(f"refusing to save a checkpoint at {str(path)!r}: the model has "
                         f"non-finite (NaN or inf) parameters in {bad[:3]}; training diverged.")
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "architecture": parts["architecture"],
        "has_optimizer": optimizer is not None,
        "step": int(optimizer.step[...]) if optimizer is not None else None,
        "train_config": parts["train_config"],
        "extra": parts["extra"],
        "training_state": training_state,
    }
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as error:
        raise ValueError("the checkpoint's training_state must be JSON-serialisable: "
                         f"{error}") from error

    path.parent.mkdir(parents=True, exist_ok=True)
    recover_checkpoint(path)  # a crashed earlier save: put its checkpoint back, remove its debris
    prefixes = _temporary_prefixes(path)
    partial = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=prefixes["partial"]))
    try:
        _write(partial, tree, metadata)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    previous = None
    try:
        if path.exists():  # an earlier checkpoint (checked above) or an empty folder: aside first
            previous = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=prefixes["previous"]))
            os.replace(path, previous)  # previous is an empty directory, so rename may replace it
        os.replace(partial, path)
    except BaseException:
        if previous is not None and not path.exists():
            os.replace(previous, path)
        shutil.rmtree(partial, ignore_errors=True)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
    return path


def _as_json(config: Any) -> Any:
    if config is None:
        return None
    if dataclasses.is_dataclass(config):
        return dataclasses.asdict(config)
    return config


@contextlib.contextmanager
def _quiet_orbax():
    """Silence orbax while reading: on a corrupted file its reader threads log warnings and
    print each failed coroutine's traceback ("Exception ignored in …", dozens of lines),
    although the error we raise already says what is wrong."""
    absl_logger = logging.getLogger("absl")
    level, hook = absl_logger.level, sys.unraisablehook
    absl_logger.setLevel(logging.CRITICAL)
    sys.unraisablehook = lambda unraisable: None
    try:
        yield
    finally:
        gc.collect()  # the failed coroutines are reported when collected: collect them now
        sys.unraisablehook = hook
        absl_logger.setLevel(level)


# --- Reading ------------------------------------------------------------------------------

def read_checkpoint_info(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path`` (architecture, package version, step, …).

    ValueError with an accurate message for a path that is not a checkpoint, unreadable
    or corrupted metadata, or a checkpoint of an unknown format version.
    """
    path = pathlib.Path(path).absolute()
    file = path / METADATA_FILE
    if not path.is_dir():
        raise ValueError(f"no checkpoint at {str(path)!r}: it is not a "
                         f"directory.{_leftover_note(path)}")
    if not file.is_file():
        runs = [name for name in ("best", "last") if (path / name / METADATA_FILE).is_file()]
        if runs:
            raise ValueError(f"{str(path)!r} is a training run folder, not a checkpoint: load "
                             f"{' or '.join(repr(str(path / name)) for name in runs)} (best: the "
                             "best epoch on validation; last: the training state).")
        raise ValueError(f"{str(path)!r} is not an annotated_ssm checkpoint: it has no "
                         f"{METADATA_FILE} (an incomplete save, or a folder written by something "
                         "else).")
    try:
        info = json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the checkpoint metadata {str(file)!r} is corrupted (not valid JSON: "
                         f"{error}).") from error
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ValueError(f"the checkpoint metadata {str(file)!r} is corrupted: it does not say "
                         f"\"format\": {FORMAT!r}.")
    if info.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"the checkpoint at {str(path)!r} has format_version "
                         f"{info.get('format_version')!r}; this version of annotated_ssm "
                         f"({__version__}) reads format_version "
                         f"{' or '.join(map(str, READABLE_VERSIONS))}.")
    for key, kind in (("architecture", dict), ("has_optimizer", bool)):
        if not isinstance(info.get(key), kind):
            raise ValueError(f"the checkpoint metadata {str(file)!r} is corrupted: {key!r} should "
                             f"be a {kind.__name__}, got {info.get(key)!r}.")
    if info["format_version"] == 1:
        info["architecture"] = _architecture_from_version_1(info["architecture"])
    return info


def _architecture_from_version_1(architecture: dict[str, Any]) -> dict[str, Any]:
    """A version-1 architecture in the layout of version 2: the entries that are not
    ModelConfig fields (nor the data's shapes) become ``layer_options``, and the fields it
    left out (step bounds it did not set, a causal model's pooling) get their defaults.
    Only the layout changes; the values are checked when the model is built."""
    fields = set(ModelConfig.__dataclass_fields__)
    options = {k: v for k, v in architecture.items() if k not in fields | set(DATA_KEYS)}
    known = {k: v for k, v in architecture.items() if k not in options}
    defaults = {name: field.default for name, field in ModelConfig.__dataclass_fields__.items()
                if name != "layer_options"}
    return {**defaults, **known, "layer_options": options}


def restore_checkpoint(path: str | os.PathLike, model: SequenceModel,
                       optimizer: nnx.Optimizer | None = None) -> dict[str, Any]:
    """Load the checkpoint at ``path`` into ``model`` (and ``optimizer``) in place; return
    its metadata (see :func:`read_checkpoint_info`).

    ValueError, before any array is read, if ``model``'s architecture differs from the
    stored one (naming the entries that differ), or if an optimiser state is asked for and
    the checkpoint has none.
    """
    info = read_checkpoint_info(path)
    path = pathlib.Path(path).absolute()
    stored, ours = info["architecture"], getattr(model, "architecture", None)
    if ours is not None and _jsonable(ours) != stored:
        keys = sorted(set(stored) | set(ours))
        differ = [f"{k}: checkpoint {stored.get(k)!r}, model {ours.get(k)!r}" for k in keys
                  if _jsonable(ours.get(k)) != stored.get(k)]
        raise ValueError(f"the checkpoint at {str(path)!r} does not fit this model (different "
                         f"architecture: {'; '.join(differ)}). Use load_model(path) to rebuild the "
                         "stored one.")
    if optimizer is not None and not info["has_optimizer"]:
        raise ValueError(f"the checkpoint at {str(path)!r} holds no optimiser state (it was saved "
                         "without one); restore only the model.")
    target = {"model": nnx.to_pure_dict(_model_state(model))}
    if optimizer is not None:
        target["optimizer"] = nnx.to_pure_dict(_optimizer_state(optimizer))
    rng = _rng_arrays(model)
    if rng and (path / "rng").is_dir():  # checkpoints of version 0.x before the streams were saved
        target["rng"] = rng
    restored = {}
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())
    with _quiet_orbax():
        try:
            for key, pure in target.items():
                # Each array is restored where the model's array lives (its sharding): orbax
                # need not guess from the file, and does not warn that it did.
                abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(
                    np.shape(a), a.dtype, sharding=getattr(a, "sharding", None)), pure)
                try:
                    restored[key] = checkpointer.restore(path / key,
                                                         args=ocp.args.StandardRestore(abstract))
                except Exception as error:  # orbax and tensorstore raise many kinds on a bad file
                    first_line = (str(error).splitlines() or [type(error).__name__])[0][:300]
                    raise ValueError(f"could not read the {key} arrays of the checkpoint at "
                                     f"{str(path)!r} (corrupted or incomplete {key}/ folder?): "
                                     f"{first_line}") from error
        finally:
            checkpointer.close()
    for key, owner, state in (("model", model, _model_state(model)),
                              ("optimizer", optimizer, optimizer and _optimizer_state(optimizer))):
        if key in restored:
            nnx.replace_by_pure_dict(state, restored[key])
            nnx.update(owner, state)
    if "rng" in restored:
        _restore_rng_arrays(model, restored["rng"])
    return info


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def load_model(path: str | os.PathLike, *, seed: int = 0) -> SequenceModel:
    """Rebuild the model stored at ``path`` from its recorded architecture and restore its
    weights; returned in eval mode. ``seed`` seeds only the dropout stream."""
    info = read_checkpoint_info(path)
    model = model_from_architecture(info["architecture"], rngs=nnx.Rngs(seed))
    restore_checkpoint(path, model)
    model.eval()
    return model
