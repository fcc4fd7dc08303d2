"""Checkpoints that rebuild their model and never delete what they did not write.

A checkpoint is a directory holding two things:

    PATH/annotated_ssm.json   what it is: the model's architecture, the package version,
                              the training configuration and step (if given), written last
    PATH/model/               parameters and batch statistics  } arrays written by
    PATH/optimizer/           the optimiser's state, if saved   } orbax-checkpoint

Saving is safe for the user's files:

1. ``PATH`` may be absent, an empty directory, or an earlier checkpoint of this package
   (``annotated_ssm.json``, ``model/``, ``optimizer/`` and nothing else). Anything else — a regular file,
   a folder with other files, the current directory or one of its parents — is refused
   with a ValueError before anything is written.
2. The new checkpoint is written, synchronously, into a hidden temporary sibling
   ``.NAME.partial-XXXX`` in the same folder. If writing fails the sibling is removed and
   ``PATH`` is untouched.
3. Only when it is complete is it renamed into place: an earlier checkpoint is first moved
   aside (``.NAME.previous-XXXX``), the new one renamed to ``PATH``, then the old one
   deleted. A crash between the two renames leaves both on disk, neither half-written.

``load_model(PATH)`` rebuilds the model from the stored architecture and restores its
weights; ``restore_checkpoint`` loads into a model (and optimiser) you built yourself.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from . import __version__
from .model import SequenceModel, model_from_architecture

__all__ = ["save_checkpoint", "restore_checkpoint", "load_model", "read_checkpoint_info", "check_checkpoint_path",
           "METADATA_FILE", "FORMAT"]

METADATA_FILE = "annotated_ssm.json"
ARRAYS = ("model", "optimizer")  # one orbax directory each
FORMAT = "annotated_ssm checkpoint"
FORMAT_VERSION = 1


def _model_state(model: nnx.Module):
    return nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat))


def _optimizer_state(optimizer: nnx.Optimizer):
    return nnx.state(optimizer, nnx.optimizer.OptState)


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


def check_checkpoint_path(path: str | os.PathLike) -> pathlib.Path:
    """Return ``path`` as an absolute path if a checkpoint may be saved there; else raise.

    Allowed: a path that does not exist yet (its folder is created), an empty directory,
    or an earlier checkpoint of this package. ValueError for anything that saving would
    destroy (a file, a folder with other content, the current directory or a parent of
    it); OSError if the folder cannot be written (found by creating and removing a
    temporary directory there, which also works for root, whom permissions do not stop).
    Nothing is left behind.
    """
    path = pathlib.Path(path).absolute()
    resolved = path.resolve()
    cwd = pathlib.Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ValueError(f"checkpoint path {str(path)!r} is the current directory or contains it; "
                         f"choose a new sub-folder, e.g. {str(path / 'checkpoint')!r}.")
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ValueError(f"checkpoint path {str(path)!r} exists and is not a directory; saving would replace it. "
                         f"Choose another path.")
    if path.is_dir() and any(path.iterdir()) and not _is_own_checkpoint(path):
        shown = sorted(p.name for p in path.iterdir())[:5]
        raise ValueError(f"checkpoint path {str(path)!r} is a non-empty directory that is not an annotated_ssm "
                         f"checkpoint (it holds {shown}); saving would delete those files. Choose a new or empty "
                         f"folder.")
    # The nearest existing ancestor must be a writable directory.
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OSError(f"cannot save a checkpoint at {str(path)!r}: {str(ancestor)!r} is not a directory.")
    try:
        tempfile.TemporaryDirectory(dir=ancestor, prefix=".annotated_ssm-write-test-").cleanup()
    except OSError as error:
        raise OSError(f"cannot save a checkpoint at {str(path)!r}: {str(ancestor)!r} is not writable "
                      f"({error.strerror or error}).") from error
    return path


# --- Saving -------------------------------------------------------------------------------

def _write(directory: pathlib.Path, tree: dict, metadata: dict) -> None:
    """Write the arrays, then the metadata (last: a directory with metadata is complete)."""
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())  # synchronous: no background thread
    try:
        for key, arrays in tree.items():
            checkpointer.save(directory / key, arrays)
    finally:
        checkpointer.close()
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")


def save_checkpoint(path: str | os.PathLike, model: SequenceModel, optimizer: nnx.Optimizer | None = None, *,
                    config: Any = None, extra: dict | None = None) -> pathlib.Path:
    """Save ``model`` (and ``optimizer``, to resume training) into the directory ``path``.

    Args:
        path: a new path, an empty directory, or an earlier checkpoint (replaced only once the
            new one is complete); anything else raises ValueError (see :func:`check_checkpoint_path`).
        model: a ``SequenceClassifier`` or ``CausalSequenceModel``; its ``architecture`` is
            stored so :func:`load_model` can rebuild it.
        optimizer: its state (moments, step count) is saved too when given.
        config: a ``TrainConfig`` (any dataclass) recorded for reference.
        extra: more JSON-serialisable facts to record (e.g. metrics).

    Returns the absolute path. Raises ValueError if a parameter is NaN or infinite: a
    diverged model never replaces a good checkpoint.
    """
    path = check_checkpoint_path(path)
    if not isinstance(getattr(model, "architecture", None), dict):
        raise ValueError(f"model must be a SequenceClassifier or CausalSequenceModel (it records its architecture); "
                         f"got a {type(model).__name__}.")
    tree = {"model": nnx.to_pure_dict(_model_state(model))}
    if optimizer is not None:
        tree["optimizer"] = nnx.to_pure_dict(_optimizer_state(optimizer))
    bad = [jax.tree_util.keystr(p) for p, leaf in jax.tree_util.tree_leaves_with_path(tree["model"])
           if np.issubdtype(np.asarray(leaf).dtype, np.inexact) and not np.all(np.isfinite(np.asarray(leaf)))]
    if bad:
        raise ValueError(f"refusing to save a checkpoint at {str(path)!r}: the model has non-finite (NaN or inf) "
                         f"parameters in {bad[:3]}; training diverged.")
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "architecture": model.architecture,
        "has_optimizer": optimizer is not None,
        "step": int(optimizer.step[...]) if optimizer is not None else None,
        "train_config": _as_json(config),
        "extra": extra or {},
    }
    try:
        json.dumps(metadata)
    except TypeError as error:
        raise ValueError(f"the checkpoint's metadata must be JSON-serialisable (architecture, config, extra): "
                         f"{error}") from error

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.partial-"))
    try:
        _write(partial, tree, metadata)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    previous = None
    if path.exists():  # an earlier checkpoint (checked above) or an empty folder: move it aside first
        previous = pathlib.Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.previous-"))
        os.replace(path, previous)  # previous is an empty directory, so rename may replace it
    try:
        os.replace(partial, path)
    except BaseException:
        if previous is not None:
            os.replace(previous, path)
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
    return path


def _as_json(config: Any) -> Any:
    import dataclasses

    if config is None:
        return None
    if dataclasses.is_dataclass(config):
        return dataclasses.asdict(config)
    return config


# --- Reading ------------------------------------------------------------------------------

def read_checkpoint_info(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path`` (architecture, package version, step, …).

    ValueError with an accurate message for a path that is not a checkpoint, unreadable
    or corrupted metadata, or a checkpoint of an unknown format version.
    """
    path = pathlib.Path(path).absolute()
    file = path / METADATA_FILE
    if not path.is_dir():
        raise ValueError(f"no checkpoint at {str(path)!r}: it is not a directory.")
    if not file.is_file():
        raise ValueError(f"{str(path)!r} is not an annotated_ssm checkpoint: it has no {METADATA_FILE} "
                         f"(an incomplete save, or a folder written by something else).")
    try:
        info = json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the checkpoint metadata {str(file)!r} is corrupted (not valid JSON: {error}).") from error
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ValueError(f"the checkpoint metadata {str(file)!r} is corrupted: it does not say "
                         f"\"format\": {FORMAT!r}.")
    if info.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"the checkpoint at {str(path)!r} has format_version {info.get('format_version')!r}; this "
                         f"version of annotated_ssm ({__version__}) reads format_version {FORMAT_VERSION}.")
    for key, kind in (("architecture", dict), ("has_optimizer", bool)):
        if not isinstance(info.get(key), kind):
            raise ValueError(f"the checkpoint metadata {str(file)!r} is corrupted: {key!r} should be a "
                             f"{kind.__name__}, got {info.get(key)!r}.")
    return info


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
        raise ValueError(f"the checkpoint at {str(path)!r} does not fit this model (different architecture: "
                         f"{'; '.join(differ)}). Use load_model(path) to rebuild the stored one.")
    if optimizer is not None and not info["has_optimizer"]:
        raise ValueError(f"the checkpoint at {str(path)!r} holds no optimiser state (it was saved without one); "
                         f"restore only the model.")
    target = {"model": _model_state(model)}
    if optimizer is not None:
        target["optimizer"] = _optimizer_state(optimizer)
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler())
    try:
        for key, state in target.items():
            abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), nnx.to_pure_dict(state))
            try:
                restored = checkpointer.restore(path / key, args=ocp.args.StandardRestore(abstract))
            except (ValueError, KeyError, OSError) as error:
                raise ValueError(f"could not read the {key} arrays of the checkpoint at {str(path)!r} (corrupted or "
                                 f"incomplete {key}/ folder?): {error}") from error
            nnx.replace_by_pure_dict(state, restored)
    finally:
        checkpointer.close()
    nnx.update(model, target["model"])
    if optimizer is not None:
        nnx.update(optimizer, target["optimizer"])
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
