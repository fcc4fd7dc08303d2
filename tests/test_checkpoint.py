"""Checkpoints: what saving refuses (a user's folder, ``.``, a regular file, an unwritable
path), an interrupted save (the previous checkpoint survives, no debris), replacing an
earlier checkpoint, rebuilding a model from the stored architecture, accurate messages
for corrupted metadata, and the README's save / restore / resume snippets, run as written.

Unwritable paths: the tests run as root, whom file permissions (chmod) do not stop, so
they use a path under a regular file (NotADirectory) and a path in /proc (no new entries
can be made there)."""

import json
import pathlib
import re

import numpy as np
import pytest
from flax import nnx

from annotated_ssm import __version__, checkpoint
from annotated_ssm.checkpoint import (check_checkpoint_path, load_model, read_checkpoint_info, restore_checkpoint,
                                      save_checkpoint)
from annotated_ssm.data import Dataset
from annotated_ssm.model import CausalSequenceModel, SequenceClassifier
from annotated_ssm.train import make_optimizer, TrainConfig

TINY = dict(d_model=8, n_layers=1, state_size=4, step_min=0.01, step_max=1.0)
X = np.random.default_rng(0).standard_normal((3, 12, 2)).astype(np.float32)


def classifier(seed=0, **kwargs):
    model = SequenceClassifier("s4d", 2, 3, rngs=nnx.Rngs(seed), **{**TINY, **kwargs})
    model.eval()
    return model


def listing(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_load_model_rebuilds_the_architecture_and_the_weights(tmp_path):
    model = classifier(seed=3, pooling="last", norm="batch", init="legs")
    path = save_checkpoint(tmp_path / "run" / "ckpt", model, config=TrainConfig(epochs=7), extra={"note": "x"})
    assert path == tmp_path / "run" / "ckpt" and listing(path) == ["annotated_ssm.json", "model", "rng"]
    info = read_checkpoint_info(path)
    assert info["package_version"] == __version__ and info["train_config"]["epochs"] == 7
    assert info["architecture"] == dict(model.architecture) and info["extra"] == {"note": "x"}
    assert info["architecture"]["layer_options"] == {"init": "legs"}
    assert not info["has_optimizer"] and info["step"] is None
    loaded = load_model(path)
    assert isinstance(loaded, SequenceClassifier) and loaded.pooling == "last"
    np.testing.assert_array_equal(loaded(X), model(X))
    causal = CausalSequenceModel("s4d", 2, 2, rngs=nnx.Rngs(0), **TINY)
    causal.eval()
    loaded = load_model(save_checkpoint(tmp_path / "causal", causal))
    assert isinstance(loaded, CausalSequenceModel)
    np.testing.assert_array_equal(loaded(X), causal(X))


# The architectures annotated_ssm 0.2.0 stored (format_version 1): the layer options beside
# the other entries, the step bounds only when set, no pooling for a causal model.
VERSION_1 = {
    "classifier": {"layer": "s4d", "d_input": 2, "d_model": 8, "n_layers": 1, "state_size": 4,
                   "norm": "batch", "glu": True, "dropout": 0.0, "bidirectional": False,
                   "step_min": 0.01, "step_max": 1.0, "init": "legs", "model": "SequenceClassifier",
                   "n_classes": 3, "pooling": "last"},
    "causal": {"layer": "s4d", "d_input": 2, "d_model": 8, "n_layers": 1, "state_size": 4,
               "norm": "layer", "glu": True, "dropout": 0.0, "bidirectional": False,
               "model": "CausalSequenceModel", "d_output": 2},
}


def test_a_format_version_1_checkpoint_is_converted_when_read(tmp_path):
    models = {"classifier": classifier(pooling="last", norm="batch", init="legs"),
              "causal": CausalSequenceModel("s4d", 2, 2, rngs=nnx.Rngs(0), d_model=8, n_layers=1,
                                            state_size=4)}
    for name, model in models.items():
        model.eval()
        path = save_checkpoint(tmp_path / name, model)  # the arrays are laid out as in version 1
        metadata = json.loads((path / "annotated_ssm.json").read_text())
        assert metadata["format_version"] == 2
        metadata.update(format_version=1, architecture=VERSION_1[name])
        (path / "annotated_ssm.json").write_text(json.dumps(metadata))
        assert read_checkpoint_info(path)["architecture"] == model.architecture
        np.testing.assert_array_equal(load_model(path)(X), model(X))
        restore_checkpoint(path, model)  # into a model built today: the same architecture
    assert models["classifier"].architecture["layer_options"] == {"init": "legs"}


def test_saving_refuses_a_folder_holding_a_users_file(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match=r"non-empty directory that is not an annotated_ssm checkpoint.*thesis\.tex"):
        save_checkpoint(folder, classifier())
    assert listing(folder) == ["thesis.tex"] and (folder / "thesis.tex").read_text() == "precious"
    assert listing(tmp_path) == ["mine"]  # and no temporary folder left beside it
    # a checkpoint to which the user added a file is not "one of ours" any more
    path = save_checkpoint(tmp_path / "ckpt", classifier())
    (path / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="notes.txt"):
        save_checkpoint(path, classifier(seed=1))
    assert (path / "notes.txt").read_text() == "keep me"


def test_saving_refuses_the_current_directory_and_its_parents(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for target in (".", str(work), "..", str(tmp_path)):
        with pytest.raises(ValueError, match="is the current directory or contains it"):
            save_checkpoint(target, classifier())
    assert listing(work) == [] and listing(tmp_path) == ["work"]


def test_saving_refuses_to_replace_a_regular_file(tmp_path):
    file = tmp_path / "model.ckpt"
    file.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        save_checkpoint(file, classifier())
    assert file.read_bytes() == b"not a checkpoint" and listing(tmp_path) == ["model.ckpt"]


def test_unwritable_paths_fail_before_anything_is_written(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(OSError, match="is not a directory"):
        check_checkpoint_path(file / "sub" / "ckpt")
    with pytest.raises(OSError, match="is not a directory"):
        save_checkpoint(file / "ckpt", classifier())
    if pathlib.Path("/proc/self").exists():  # Linux: no new entries can be made in /proc, even by root
        with pytest.raises(OSError, match="'/proc' is not writable"):
            save_checkpoint("/proc/annotated_ssm_checkpoint", classifier())
    assert listing(tmp_path) == ["file"]


def test_an_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    old = classifier(seed=0)
    path = save_checkpoint(tmp_path / "ckpt", old, make_optimizer(old, TrainConfig(), 10))
    before = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    new = classifier(seed=1)
    new_optimizer = make_optimizer(new, TrainConfig(), 10)
    real_save = checkpoint.ocp.Checkpointer.save
    saved = []

    def save_then_fail(self, directory, *args, **kwargs):  # writes the model, dies on the optimiser
        if saved:
            raise OSError("No space left on device")
        saved.append(directory)
        return real_save(self, directory, *args, **kwargs)

    monkeypatch.setattr(checkpoint.ocp.Checkpointer, "save", save_then_fail)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(path, new, new_optimizer)
    assert saved and ".ckpt.partial-" in str(saved[0])  # it was writing beside, not into, the checkpoint
    assert listing(tmp_path) == ["ckpt"]  # the partial copy is gone
    after = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    assert after == before  # byte for byte
    np.testing.assert_array_equal(load_model(path)(X), old(X))

    monkeypatch.setattr(checkpoint.ocp.Checkpointer, "save", real_save)
    save_checkpoint(path, new, new_optimizer)  # replacing our own checkpoint is allowed
    assert listing(tmp_path) == ["ckpt"]  # the previous one was moved aside, then deleted
    np.testing.assert_array_equal(load_model(path)(X), new(X))


def test_a_diverged_model_is_never_saved(tmp_path):
    good = save_checkpoint(tmp_path / "ckpt", classifier())
    before = (good / "annotated_ssm.json").read_text()
    broken = classifier(seed=1)
    broken.decoder.bias[...] = broken.decoder.bias[...] * np.nan
    with pytest.raises(ValueError, match=r"non-finite \(NaN or inf\) parameters in .*decoder.*bias"):
        save_checkpoint(good, broken)
    assert (good / "annotated_ssm.json").read_text() == before and listing(tmp_path) == ["ckpt"]


def test_corrupted_or_foreign_checkpoints_get_accurate_messages(tmp_path):
    model = classifier()
    path = save_checkpoint(tmp_path / "ckpt", model)
    metadata = path / "annotated_ssm.json"
    good = metadata.read_text()

    metadata.write_text(good[: len(good) // 2])  # truncated
    with pytest.raises(ValueError, match=r"annotated_ssm.json' is corrupted \(not valid JSON"):
        load_model(path)
    # a corrupted checkpoint is no longer recognised as ours, so saving will not delete it
    with pytest.raises(ValueError, match="not an annotated_ssm checkpoint"):
        save_checkpoint(path, model)

    metadata.write_text(json.dumps({**json.loads(good), "format_version": 99}))
    with pytest.raises(ValueError, match="format_version 99; this version .* reads "
                                         "format_version 1"):
        restore_checkpoint(path, model)
    metadata.write_text(json.dumps({**json.loads(good), "architecture": "s4d"}))
    with pytest.raises(ValueError, match="corrupted: 'architecture' should be a dict, got 's4d'"):
        load_model(path)

    metadata.write_text(good)
    optimizer = make_optimizer(model, TrainConfig(), 10)
    with pytest.raises(ValueError, match="holds no optimiser state"):
        restore_checkpoint(path, model, optimizer)
    for file in (path / "model").rglob("*"):
        if file.is_file() and "manifest" in file.name:
            file.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"could not read the model arrays .*corrupted or incomplete model/"):
        load_model(path)

    metadata.unlink()
    with pytest.raises(ValueError, match="not an annotated_ssm checkpoint: it has no "
                                         "annotated_ssm.json"):
        load_model(path)
    with pytest.raises(ValueError, match="not a directory"):
        load_model(tmp_path / "missing")


def readme_section(title: str) -> list[str]:
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    section = readme.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_save_restore_and_resume_snippets_run(tmp_path, monkeypatch, capsys):
    snippets = readme_section("Save, restore and resume")
    assert len(snippets) == 3
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for code in snippets:
        exec(compile(code, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "True"  # the restored model's test accuracy equals the trained one's
    assert " ± " in printed[1] and "seeds 0:" in printed[1]
    assert namespace["history"].epoch == [1, 2, 3, 4]  # the whole run's history
    assert listing(tmp_path / "runs") == ["s4d", "s4d-run"] and listing(tmp_path / "runs" / "s4d-run") == [
        "best", "last"]
    assert isinstance(namespace["data"], Dataset)
