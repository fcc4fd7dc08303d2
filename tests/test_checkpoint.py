"""Checkpoints: what saving refuses (a user's folder, ``.``, a regular file, an unwritable
path, an optimiser of another model, NaN in the JSON), an interrupted save and a full disk
(the previous version survives, no debris), replacing an earlier checkpoint, rebuilding a
model from the stored architecture (also from a run folder; a tampered size is refused
before building), accurate messages for corrupted metadata, and the README's save /
restore / resume snippets, run as written.

Unwritable paths: the tests run as root, whom file permissions (chmod) do not stop, so
they use a path under a regular file (NotADirectory) and a path in /proc (no new entries
can be made there)."""

import errno
import json
import pathlib
import re

import numpy as np
import pytest
from flax import nnx

from annotated_ssm import __version__, checkpoint
from annotated_ssm.checkpoint import (check_checkpoint_path, load_model, read_checkpoint_info, restore_checkpoint,
                                      save_checkpoint)
from annotated_ssm.model import CausalSequenceModel, SequenceClassifier
from annotated_ssm.runs import RunFolder, TrainingState
from annotated_ssm.train import make_optimizer, TrainConfig

TINY = dict(d_model=8, n_layers=1, state_size=4, step_min=0.01, step_max=1.0)
X = np.random.default_rng(0).standard_normal((3, 12, 2)).astype(np.float32)
pytestmark = pytest.mark.usefixtures("frozen_heap")  # tests/conftest.py: saves collect garbage


def classifier(seed=0, **kwargs):
    model = SequenceClassifier("s4d", 2, 3, rngs=nnx.Rngs(seed), **{**TINY, **kwargs})
    model.eval()
    return model


def listing(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def metadata_file(path: pathlib.Path) -> pathlib.Path:
    """The JSON of the checkpoint's (only) version, as orbax's JSON handler writes it."""
    (file,) = path.glob("*/annotated_ssm/metadata")
    return file


def test_load_model_rebuilds_the_architecture_and_the_weights(tmp_path):
    model = classifier(seed=3, pooling="last", norm="batch", init="legs")
    path = save_checkpoint(tmp_path / "run" / "ckpt", model, config=TrainConfig(epochs=7), extra={"note": "x"})
    assert path == tmp_path / "run" / "ckpt" and listing(path) == ["1"]  # orbax's first version
    assert {"annotated_ssm", "model", "rng"} <= set(listing(path / "1"))
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


def test_saving_refuses_a_folder_holding_a_users_file(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match=r"holds files that are not a checkpoint's.*thesis\.tex"):
        save_checkpoint(folder, classifier())
    assert listing(folder) == ["thesis.tex"] and (folder / "thesis.tex").read_text() == "precious"
    assert listing(tmp_path) == ["mine"]  # and no temporary folder left beside it
    # a checkpoint to which the user added a file, beside or inside a version, is not "one
    # of ours" any more
    path = save_checkpoint(tmp_path / "ckpt", classifier())
    for notes in (path / "notes.txt", path / "1" / "notes.txt"):
        notes.write_text("keep me")
        with pytest.raises(ValueError, match="notes.txt"):
            save_checkpoint(path, classifier(seed=1))
        assert notes.read_text() == "keep me"
        notes.unlink()


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


def fail_on(monkeypatch, item: str, error: BaseException):
    """Make orbax's array writer raise ``error`` when it writes ``item`` (after the model, so
    the save is half-written, in orbax's temporary folder)."""
    real = checkpoint.ocp.StandardCheckpointHandler.async_save
    seen = []

    async def write(self, directory, *args, **kwargs):
        seen.append(directory)
        if directory.name.startswith(item):
            raise error
        return await real(self, directory, *args, **kwargs)

    monkeypatch.setattr(checkpoint.ocp.StandardCheckpointHandler, "async_save", write)
    return seen


def test_an_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    old = classifier(seed=0)
    path = save_checkpoint(tmp_path / "ckpt", old, make_optimizer(old, TrainConfig(), 10))
    before = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    new = classifier(seed=1)
    new_optimizer = make_optimizer(new, TrainConfig(), 10)
    seen = fail_on(monkeypatch, "optimizer", OSError("disk on fire"))
    with pytest.raises(OSError, match="disk on fire"):
        save_checkpoint(path, new, new_optimizer)
    assert any(".orbax-checkpoint-tmp" in str(d) for d in seen)  # writing beside version 1
    # orbax's unfinished save is removed (now, or by the next save if orbax's threads were
    # still writing there): it is never taken for the checkpoint
    assert listing(tmp_path) == ["ckpt"] and listing(path)[0] == "1"
    assert all(re.fullmatch(r"2\.orbax-checkpoint-tmp(-\d+)?", name) for name in listing(path)[1:])
    after = {p.relative_to(path): p.read_bytes() for p in (path / "1").rglob("*") if p.is_file()}
    assert after == before  # byte for byte
    np.testing.assert_array_equal(load_model(path)(X), old(X))

    monkeypatch.undo()
    save_checkpoint(path, new, new_optimizer)  # replacing our own checkpoint is allowed
    assert listing(path) == ["2"]  # the new version, complete; then the old one was deleted
    np.testing.assert_array_equal(load_model(path)(X), new(X))


@pytest.mark.parametrize("error", [ValueError("RESOURCE_EXHAUSTED: Failed to write: No space"),
                                   OSError(errno.ENOSPC, "No space left on device")],
                         ids=["tensorstore", "os"])
def test_a_full_disk_is_an_oserror_naming_the_path_and_the_free_space(error, tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "ckpt", classifier())
    fail_on(monkeypatch, "model", error)
    with pytest.raises(OSError, match=r"no space left to save the checkpoint at .*ckpt'.* MiB "
                                      r"free on its disk; the previous version is kept") as raised:
        save_checkpoint(path, classifier(seed=1))
    assert raised.value.errno == errno.ENOSPC and listing(path)[0] == "1"
    assert read_checkpoint_info(path)["architecture"] == classifier().architecture


def test_an_optimizer_of_another_model_is_refused_when_saving(tmp_path):
    model, other = classifier(), classifier(d_model=16)
    with pytest.raises(ValueError, match="optimizer's state does not belong to the model's "
                                         "current weights .*made for another model"):
        save_checkpoint(tmp_path / "ckpt", model, make_optimizer(other, TrainConfig(), 10))
    assert listing(tmp_path) == []
    save_checkpoint(tmp_path / "ckpt", model, make_optimizer(model, TrainConfig(), 10))


def test_json_gets_no_nan_and_format_version_is_read_strictly(tmp_path):
    model = classifier()
    with pytest.raises(ValueError, match=r"extra must be JSON-serialisable .*extra\['a'\] is nan"):
        save_checkpoint(tmp_path / "ckpt", model, extra={"a": float("nan")})
    with pytest.raises(ValueError, match=r"extra\['b'\]\[1\] is inf"):
        save_checkpoint(tmp_path / "ckpt", model, extra={"b": [1.0, float("inf")]})
    assert listing(tmp_path) == []
    path = save_checkpoint(tmp_path / "ckpt", model, extra={"a": 1.5})
    file = metadata_file(path)
    assert "NaN" not in file.read_text()
    good = json.loads(file.read_text())
    for version in (True, 3.0, "3"):  # JSON's true is not 1, nor "3" 3
        file.write_text(json.dumps({**good, "format_version": version}))
        with pytest.raises(ValueError, match=f"format_version {version!r}; this version"):
            load_model(path)


def test_a_tampered_size_is_refused_before_the_model_is_built(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "ckpt", classifier())
    file = metadata_file(path)
    good = json.loads(file.read_text())
    built = []
    monkeypatch.setattr(checkpoint.model_from_architecture.__globals__["SequenceClassifier"],
                        "__init__", lambda *a, **k: built.append(a))
    for change, message in (({"n_layers": 10**6}, r"n_layers must be an integer in \[1, 1024\]; "
                                                  r"got 1000000"),
                            ({"d_model": 0}, "d_model must be an integer >= 1; got 0"),
                            ({"d_model": 10**9}, r"d_model=1000000000, .* parameters: building "
                                                 r"needs at least .* GiB, and this device has")):
        file.write_text(json.dumps({**good, "architecture": {**good["architecture"], **change}}))
        with pytest.raises(ValueError, match=message):
            load_model(path)
    assert built == []


def test_load_model_reads_a_run_folder_as_its_best_model(tmp_path):
    best, last = classifier(seed=0), classifier(seed=1)
    config = TrainConfig()
    with RunFolder(tmp_path / "run", config) as folder:
        state = TrainingState(total_steps=10, step=1, dataset={"name": "x", "crc32": 0})
        folder.save(state, last, make_optimizer(last, config, 10), config)
        np.testing.assert_array_equal(load_model(tmp_path / "run")(X), last(X))  # no best yet
        state.step = 2
        folder.save(state, best, make_optimizer(best, config, 10), config, score=0.9)
        state.step = 3
        folder.save(state, last, make_optimizer(last, config, 10), config)
    assert listing(tmp_path / "run") == [".annotated_ssm.lock", "2", "3"]
    np.testing.assert_array_equal(load_model(tmp_path / "run")(X), best(X))


def test_a_diverged_model_is_never_saved(tmp_path):
    good = save_checkpoint(tmp_path / "ckpt", classifier())
    before = metadata_file(good).read_text()
    broken = classifier(seed=1)
    broken.decoder.bias[...] = broken.decoder.bias[...] * np.nan
    with pytest.raises(ValueError, match=r"non-finite \(NaN or inf\) parameters in .*decoder.*bias"):
        save_checkpoint(good, broken)
    assert metadata_file(good).read_text() == before and listing(good) == ["1"]


def test_corrupted_or_foreign_checkpoints_get_accurate_messages(tmp_path):
    model = classifier()
    path = save_checkpoint(tmp_path / "ckpt", model)
    metadata = metadata_file(path)
    good = metadata.read_text()

    metadata.write_text(good[: len(good) // 2])  # truncated
    with pytest.raises(ValueError, match=r"could not read annotated_ssm of the checkpoint at "
                                         r".*ckpt/1' \(corrupted or incomplete\)"):
        load_model(path)
    metadata.write_text(json.dumps({**json.loads(good), "format_version": 99}))
    with pytest.raises(ValueError, match="format_version 99; this version .* reads "
                                         "format_version 3"):
        restore_checkpoint(path, model)
    metadata.write_text(json.dumps({**json.loads(good), "architecture": "s4d"}))
    with pytest.raises(ValueError, match="corrupted: 'architecture' should be a dict, got 's4d'"):
        load_model(path)

    metadata.write_text(good)
    optimizer = make_optimizer(model, TrainConfig(), 10)
    with pytest.raises(ValueError, match="holds no optimiser state"):
        restore_checkpoint(path, model, optimizer)
    for file in (path / "1" / "model").rglob("*"):
        if file.is_file() and "manifest" in file.name:
            file.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"could not read model, rng of the checkpoint .*corrupted "
                                         r"or incomplete"):
        load_model(path)

    metadata.unlink()
    with pytest.raises(ValueError, match=r"could not read annotated_ssm of the checkpoint .*not found"):
        load_model(path)
    with pytest.raises(ValueError, match="not a directory"):
        load_model(tmp_path / "missing")
