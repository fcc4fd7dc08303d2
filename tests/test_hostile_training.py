"""Training, checkpoints and the command line against hostile use: one
test per cause, each named after it.

1. resuming is exact: interrupted anywhere (between steps, at an epoch's end, during a
   save, a crash in a save), ``fit(resume_from=...)`` gives the bit-identical weights and
   history of an uninterrupted run, in the four layers, with and without a validation split;
   the best model is its own checkpoint, never mixed with the training state;
2. the command line saves during training and on Ctrl-C, resumes exactly, and refuses before
   loading data what would fail at save time (a 245-character folder name, a layer option
   JSON cannot store);
3. labels and data are checked (integers in [0, n_classes), finite after the cast);
4. step sizes are checked in float32, the dtype they are computed in;
5. split fractions, sequence lengths and seeds are checked;
6. errors are ValueErrors naming the argument (a huge d_model, fractional seeds);
7. crash leftovers are removed (never a user's file), recovered or named; orbax is quiet.

Tiny models (d_model 4, state 4, one block) on a synthetic data set of 50 sequences of
length 12, so each run takes a few steps; the reference runs are shared by the tests.
"""

import dataclasses
import json
import os
import pathlib
import re
import signal
import subprocess

import jax
import numpy as np
import pytest
from flax import nnx

from annotated_ssm import checkpoint, train
from annotated_ssm import cli as command_line
from annotated_ssm.checkpoint import (load_model, read_checkpoint_info, recover_checkpoint,
                                      save_checkpoint)
from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.data import Dataset, load_dataset
from annotated_ssm.train import TrainingInterrupted, build_model, fit, fit_seeds
from test_cli import no_data  # noqa: F401  (a fixture: fail if the command loads data)
from test_cli import run as cli  # main(argv) -> (exit status, stdout, stderr)

LAYERS = ("s4", "dss", "s4d", "s5")
TINY = dict(d_model=4, n_layers=1, state_size=4, step_min=0.01, step_max=1.0, dropout=0.1)
CONFIG = TrainConfig(epochs=4, batch_size=10, lr=2e-2, validation_fraction=0.2, progress=False)


def synthetic(n=50, length=12, n_classes=3, seed=0) -> Dataset:
    """Sequences whose class is the sign pattern of their mean: learnable in a few steps."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n + 10, length, 1)).astype(np.float32)
    y = np.digitize(x.mean(axis=(1, 2)), [-0.15, 0.15]).astype(np.int32)
    return Dataset("synthetic", x[:n], y[:n], x[n:], y[n:], "classification", n_classes)


DATA = synthetic()


def model_of(layer: str):
    return build_model(ModelConfig(layer=layer, **TINY), DATA)


def weights(model) -> list[np.ndarray]:
    state = nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat))
    return [np.asarray(leaf) for leaf in jax.tree.leaves(state)]


def assert_same_run(a, b):
    """Two (model, history) pairs are the same run: every weight bit-identical, every
    number of the history equal (NaN equals NaN), except the wall-clock epoch times."""
    (model_a, history_a), (model_b, history_b) = a, b
    for x, y in zip(weights(model_a), weights(model_b), strict=True):
        np.testing.assert_array_equal(x, y)
    for field in dataclasses.fields(history_a):
        if field.name != "epoch_time":
            a, b = getattr(history_a, field.name), getattr(history_b, field.name)
            np.testing.assert_array_equal(a, b, err_msg=field.name)


_REFERENCE = {}


def reference(layer: str, config: TrainConfig):
    """The uninterrupted run (computed once per layer and config)."""
    key = (layer, config)
    if key not in _REFERENCE:
        model = model_of(layer)
        _REFERENCE[key] = (model, fit(model, DATA, config))
    return _REFERENCE[key]


class Crash(BaseException):
    """Stands for the process dying (kill -9, power cut) at that point."""


def interrupt_then_resume(layer, config, folder, monkeypatch, where: str, at: int):
    """Train in ``folder``, stopped at ``where`` ("step": Ctrl-C after training step ``at``;
    "save": Ctrl-C during save number ``at``; "crash": the process dies in save number
    ``at``), then resume with a fresh model; returns (model, history) and the step it
    stopped at."""
    real_shard, real_save = train.shard_batch, checkpoint.ocp.Checkpointer.save
    counts = {"steps": 0, "saves": 0}

    def shard(mesh, *arrays):
        if len(arrays) == 2:  # a training batch (evaluation batches carry a mask too)
            counts["steps"] += 1
            if where == "step" and counts["steps"] == at:
                os.kill(os.getpid(), signal.SIGINT)  # arrives between this step and the next
        return real_shard(mesh, *arrays)

    def save(self, directory, *args, **kwargs):
        if directory.name == "model" and ".last.partial-" in directory.parent.name:
            counts["saves"] += 1
            if counts["saves"] == at and where == "save":
                os.kill(os.getpid(), signal.SIGINT)  # the save goes on; fit stops after it
            if counts["saves"] == at and where == "crash":
                raise Crash()
        return real_save(self, directory, *args, **kwargs)

    monkeypatch.setattr(train, "shard_batch", shard)
    monkeypatch.setattr(checkpoint.ocp.Checkpointer, "save", save)
    with pytest.raises(Crash if where == "crash" else TrainingInterrupted) as stopped:
        fit(model_of(layer), DATA, config, checkpoint=folder)
    monkeypatch.setattr(train, "shard_batch", real_shard)
    monkeypatch.setattr(checkpoint.ocp.Checkpointer, "save", real_save)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []  # no debris
    if where == "crash":
        saved = (at - 1) * config.save_every_steps  # the save before the one that died
        assert read_checkpoint_info(folder / "last")["step"] == saved
    model = model_of(layer)
    return (model, fit(model, DATA, config, checkpoint=folder, resume_from=folder)), stopped.value


# --- 1. Resuming is exact -------------------------------------------------------------------

@pytest.mark.parametrize("layer", LAYERS)
def test_resume_after_ctrl_c_between_steps_is_exact_in_every_layer(layer, tmp_path, monkeypatch):
    folder = tmp_path / "run"
    resumed, stopped = interrupt_then_resume(layer, CONFIG, folder, monkeypatch, "step", at=6)
    assert stopped.step == 6 and "resume with" in str(stopped)  # mid-epoch 2 (4 steps an epoch)
    assert_same_run(resumed, reference(layer, CONFIG))


@pytest.mark.parametrize("where, at", [("step", 4), ("save", 2), ("crash", 2)],
                         ids=["ctrl-c-at-an-epoch-end", "ctrl-c-during-a-save",
                              "crash-during-a-save"])
def test_resume_after_an_interrupted_or_crashed_save_is_exact(where, at, tmp_path, monkeypatch):
    config = dataclasses.replace(CONFIG, save_every_steps=3)  # saves at steps 3, 6, 9, ...
    folder = tmp_path / "run"
    resumed, stopped = interrupt_then_resume("s4d", config, folder, monkeypatch, where, at)
    # stopped after step 4 (its epoch's validation done), after the step-6 save, or dead in
    # the step-6 save (the step-3 state on disk: the resumed run redid steps 4 to 6)
    if where != "crash":
        assert stopped.step == {"step": 4, "save": 6}[where]
    assert_same_run(resumed, reference("s4d", config))


def test_resume_without_a_validation_split_is_bit_identical(tmp_path, monkeypatch):
    config = dataclasses.replace(CONFIG, validation_fraction=0.0, max_steps=14)  # ends mid-epoch 3
    resumed, _ = interrupt_then_resume("s4d", config, tmp_path / "run", monkeypatch, "step", at=9)
    assert resumed[1].epoch == [1, 2, 3] and resumed[1].steps == [5, 10, 14]
    assert_same_run(resumed, reference("s4d", config))


def test_the_best_model_is_its_own_checkpoint_never_mixed_with_the_state(tmp_path, monkeypatch):
    scores = iter([0.9, 0.5, 0.4, 0.3])  # validation accuracy per epoch: epoch 1 is the best
    real_evaluate = train.evaluate

    def evaluate(model, x, y, **kwargs):
        metrics = real_evaluate(model, x, y, **kwargs)
        validation = len(x) == 10 and x is not DATA.x_test
        return {**metrics, "accuracy": next(scores)} if validation else metrics

    monkeypatch.setattr(train, "evaluate", evaluate)
    model = model_of("s4d")
    optimizer = train.make_optimizer(model, CONFIG, train.count_steps(CONFIG, DATA))
    history = fit(model, DATA, CONFIG, optimizer=optimizer, checkpoint=tmp_path / "run")
    assert history.best_epoch == 1
    best, last = load_model(tmp_path / "run" / "best"), load_model(tmp_path / "run" / "last")
    for x, y in zip(weights(model), weights(best), strict=True):  # the model holds the best weights
        np.testing.assert_array_equal(x, y)
    assert read_checkpoint_info(tmp_path / "run" / "last")["step"] == 16 == int(optimizer.step[...])
    assert not all(np.array_equal(x, y) for x, y in zip(weights(best), weights(last)))
    # the best weights with the last optimiser state can neither be saved nor trained on
    with pytest.raises(ValueError, match="holds the best epoch's weights"):
        save_checkpoint(tmp_path / "mixed", model, optimizer)
    with pytest.raises(ValueError, match="holds the best epoch's weights"):
        fit(model, DATA, CONFIG, optimizer=optimizer)
    save_checkpoint(tmp_path / "model-only", model)  # the model alone is fine


def _ctrl_c_at(n, real):
    """``train.shard_batch`` that sends Ctrl-C to this process at training step n."""
    counts = [0]

    def shard(mesh, *arrays):
        if len(arrays) == 2:
            counts[0] += 1
            if counts[0] == n:
                os.kill(os.getpid(), signal.SIGINT)
        return real(mesh, *arrays)

    return shard


def test_an_unfinished_run_is_resumed_only_as_it_was_started(tmp_path, monkeypatch):
    folder = tmp_path / "half"
    monkeypatch.setattr(train, "shard_batch", _ctrl_c_at(3, train.shard_batch))
    with pytest.raises(TrainingInterrupted):
        fit(model_of("s4d"), DATA, CONFIG, checkpoint=folder)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"holds an unfinished run \(step 3 of 16\); resume it"):
        fit(model_of("s4d"), DATA, CONFIG, checkpoint=folder)  # a new run would overwrite it
    with pytest.raises(ValueError, match=r"another TrainConfig \(lr: stored 0.02, given 0.1\)"):
        fit(model_of("s4d"), DATA, dataclasses.replace(CONFIG, lr=0.1), checkpoint=folder,
            resume_from=folder)
    with pytest.raises(ValueError, match="another data set"):
        fit(model_of("s4d"), synthetic(seed=1), CONFIG, checkpoint=folder, resume_from=folder)
    with pytest.raises(ValueError, match="does not fit this model"):
        fit(model_of("dss"), DATA, CONFIG, checkpoint=folder, resume_from=folder)
    # resuming a finished run trains nothing more and gives the same result again
    first = fit(model_of("s4d"), DATA, CONFIG, checkpoint=folder, resume_from=folder)
    again = fit(model_of("s4d"), DATA, CONFIG, resume_from=folder)
    assert first.test_loss == again.test_loss
    assert again.epoch == [1, 2, 3, 4] and again.steps[-1] == 16


def test_periodic_saves_every_n_steps_and_every_m_minutes(tmp_path, monkeypatch):
    steps_saved = []
    real = train.save_checkpoint

    def recording(path, *args, training_state=None, **kwargs):
        if path.name == "last":
            steps_saved.append(training_state["step"])
        return real(path, *args, training_state=training_state, **kwargs)

    monkeypatch.setattr(train, "save_checkpoint", recording)
    config = dataclasses.replace(CONFIG, validation_fraction=0.0, save_every_steps=5,
                                 save_every_minutes=None)
    fit(model_of("s4d"), DATA, config, checkpoint=tmp_path / "steps")
    assert steps_saved == [5, 10, 15, 20]  # 20: the final save
    steps_saved.clear()
    config = dataclasses.replace(config, save_every_steps=None, save_every_minutes=1e-9,
                                 max_steps=4)
    fit(model_of("s4d"), DATA, config, checkpoint=tmp_path / "minutes")
    assert steps_saved == [1, 2, 3, 4]


# --- 2. The command line -------------------------------------------------------------------

SMALL = ["--dataset", "digits", "--layer", "s4d", "--d-model", "4", "--n-layers", "1",
         "--state-size", "4", "--step-max", "1",
         "--dropout", "0.1", "--batch-size", "10", "--epochs", "3", "--lr", "0.02", "--no-progress"]


CLI_DATA = dataclasses.replace(DATA, name="digits")  # the command checks the name on --resume


@pytest.fixture
def cli_data(monkeypatch):
    monkeypatch.setattr(command_line, "load_dataset", lambda name, **kwargs: CLI_DATA)


def test_cli_saves_on_ctrl_c_and_resume_is_bit_identical(tmp_path, capsys, cli_data, monkeypatch):
    status, out, err = cli([*SMALL, "--checkpoint", str(tmp_path / "whole")], capsys)
    assert status == 0, err
    monkeypatch.setattr(train, "shard_batch", _ctrl_c_at(5, train.shard_batch))
    status, out, err = cli([*SMALL, "--checkpoint", str(tmp_path / "run")], capsys)
    assert status == 130 and err.count("\n") == 1
    assert err.startswith("error: interrupted at step 5; the training state "
                          "is saved in") and "--resume" in err
    monkeypatch.undo()
    monkeypatch.setattr(command_line, "load_dataset", lambda name, **kwargs: CLI_DATA)
    status, out, err = cli([*SMALL, "--checkpoint", str(tmp_path / "run"), "--resume"], capsys)
    assert status == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["steps"] == 12 and summary["checkpoint"] == str(tmp_path / "run" / "last")
    for name in ("last", "best"):
        whole, resumed = load_model(tmp_path / "whole" / name), load_model(tmp_path / "run" / name)
        for x, y in zip(weights(whole), weights(resumed), strict=True):
            np.testing.assert_array_equal(x, y)
    # --resume with other options, or without a folder, is refused before loading data
    resume = ["--checkpoint", str(tmp_path / "run"), "--resume"]
    status, _, err = cli([*SMALL, "--lr", "0.1", *resume], capsys)
    assert status == 2 and "lr: stored 0.02, given 0.1" in err and err.count("\n") == 1
    status, _, err = cli([*SMALL, "--d-model", "8", *resume], capsys)
    assert status == 2 and "d_model: stored 4, given 8" in err
    status, _, err = cli([*SMALL, "--resume"], capsys)
    assert status == 2 and "--resume needs --checkpoint DIR" in err


def test_a_name_too_long_for_the_temporary_names_fails_before_data(tmp_path, capsys, no_data):
    folder = tmp_path / ("r" * 245)  # allowed itself; its ".NAME.partial-PID-XXXXXXXX" is not
    too_long = r"name too long for this file system: saving creates '\.r+\.partial-"
    with pytest.raises(ValueError, match=too_long):
        save_checkpoint(folder, model_of("s4d"))
    # a run folder's temporary names are inside it (".last.partial-…"): 245 characters are fine
    assert train.check_run_folder(folder) == folder
    status, out, err = cli([*SMALL, "--checkpoint", str(tmp_path / ("r" * 256))], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "has a name too long for this file system" in err and "at most 255" in err
    with pytest.raises(ValueError, match="name too long"):
        fit(model_of("s4d"), DATA, CONFIG, checkpoint=tmp_path / ("r" * 256))
    assert list(tmp_path.iterdir()) == []


def test_a_layer_option_json_cannot_store_fails_before_data(tmp_path, capsys, no_data):
    status, out, err = cli([*SMALL, "--layer-option", "init_options={'x': b'yes'}"], capsys)
    assert status == 2 and err.count("\n") == 1
    assert "must be storable as JSON" in err and "b'yes'" in err
    with pytest.raises(ValueError, match="storable as JSON"):
        ModelConfig(layer_options={"init_options": {"x": b"yes"}})
    model = model_of("s4d")
    model.architecture = {**model.architecture, "note": b"yes"}  # however it got there
    with pytest.raises(ValueError, match="architecture must be JSON-serialisable"):
        fit(model, DATA, CONFIG, checkpoint=tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


# --- 3. Labels and data --------------------------------------------------------------------

def _replace(array, index, value, dtype=None):
    array = array.astype(dtype or array.dtype)
    array[index] = value
    return array


@pytest.mark.parametrize("field, make, message", [
    ("y_train", lambda d: _replace(d.y_train, 3, -1),
     r"y_train must hold class labels in \[0, 3\).*got -1 at index 3"),
    ("y_train", lambda d: _replace(d.y_train, 0, 3),
     r"class labels in \[0, 3\) \(n_classes=3\); got 3 at index 0"),
    ("y_test", lambda d: d.y_test.astype(np.float32), "y_test must hold integer class labels; got "
                                                      "dtype float32"),
    ("x_train", lambda d: _replace(d.x_train, (7, 2, 0), np.nan),
     r"x_train must be finite .*nan at .* \(7, 2, 0\)"),
    ("x_test", lambda d: _replace(d.x_test, (1, 0, 0), np.inf), r"x_test must be finite .*inf at"),
    ("x_train", lambda d: _replace(d.x_train, (0, 0, 0), 1e39, np.float64),
     r"x_train must be finite in float32"),
], ids=["label-minus-one", "label-n-classes", "float-labels", "nan-x-train", "inf-x-test",
        "1e39-float64"])
def test_labels_and_data_are_checked_before_training(field, make, message, capsys):
    bad = make(DATA)
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(DATA, **{field: bad})  # when a data set is made (load_dataset too)
    changed = dataclasses.replace(DATA)  # a valid copy, then changed in place: fit checks again
    object.__setattr__(changed, field, bad)
    with pytest.raises(ValueError, match=message):
        fit(model_of("s4d"), changed, CONFIG)


# --- 4. Step sizes in the dtype they are computed in ---------------------------------------

@pytest.mark.parametrize("flag, value", [("step_min", 1e-50), ("step_max", 1e39)])
def test_step_sizes_are_checked_in_float32(flag, value, capsys, no_data):
    message = (f"{flag} must be a real number > 0, finite and normal in float32 (from 1.18e-38 "
               f"to 3.4e+38: log Δ is computed in float32); got {value!r} "
               f"({0 if flag == 'step_min' else 'inf'} in float32).")
    with pytest.raises(ValueError, match=re.escape(message)):
        ModelConfig(**{flag: value})  # the other bound left to the layer's default
    status, out, err = cli([*SMALL, "--" + flag.replace("_", "-"), str(value)], capsys)
    assert status == 2 and err == f"error: {message}\n"


# --- 5. Splits, lengths and seeds ----------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(test_fraction=0.0), r"test_fraction must be a number in \(0, 1\); got 0.0"),
    (dict(test_fraction=-0.5), r"test_fraction must be a number in \(0, 1\); got -0.5"),
    (dict(test_fraction=2.0), r"test_fraction must be a number in \(0, 1\); got 2.0"),
    (dict(test_fraction=1e-4), "leaves an empty split"),
    (dict(seed=2**64), r"seed must be an integer in \[0, 4294967295\]"),
])
def test_digit_splits_and_seeds_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_dataset("digits", **kwargs)


def test_sequence_lengths_and_seeds_are_checked(capsys, no_data):
    with pytest.raises(ValueError, match="final_seq_length must be an integer >= 1; got 0"):
        load_dataset("mnist1d", num_samples=100, final_seq_length=0)
    empty = np.zeros((4, 0, 1), np.float32)
    with pytest.raises(ValueError, match=r"x_train must have shape .* >= 1; got shape \(4, 0, 1\)"):
        Dataset("empty", empty, np.zeros(4, np.int32), DATA.x_test, DATA.y_test, "classification",
                3)
    out_of_range = r"seed must be an integer in \[0, 4294967295\]; got 18446744073709551616"
    with pytest.raises(ValueError, match=out_of_range):
        TrainConfig(seed=2**64)
    status, _, err = cli([*SMALL, "--seed", str(2**64)], capsys)
    assert status == 2 and "seed must be an integer in [0, 4294967295]" in err
    with pytest.raises(ValueError, match="does not take these options"):
        load_dataset("digits", test_fractoin=0.5)


# --- 6. Errors name the argument -----------------------------------------------------------

def test_a_model_too_big_for_the_memory_is_one_line_before_data(capsys, no_data):
    status, out, err = cli([*SMALL, "--d-model", "100000"], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "d_model=100000" in err and "parameters: training needs at least" in err


def test_fit_seeds_refuses_fractional_and_out_of_range_seeds():
    model_config = ModelConfig(layer="s4d", **TINY)
    for seeds, error, message in (([1.7], ValueError, "each seed must be an integer .* got 1.7"),
                                  ([2**64], ValueError, "each seed must be an integer"),
                                  ([True], ValueError, "got True"),
                                  (3, TypeError, "seeds must be a sequence of integers; got 3"),
                                  ([0, 0], ValueError, "distinct")):
        with pytest.raises(error, match=message):
            fit_seeds(model_config, DATA, CONFIG, seeds=seeds)


# --- 7. Crash leftovers --------------------------------------------------------------------

def dead_pid() -> int:
    """The id of a process that has ended."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_save_removes_crashed_partials_but_never_a_users_folder(tmp_path):
    path = save_checkpoint(tmp_path / "ckpt", model_of("s4d"))
    pid = dead_pid()
    crashed = tmp_path / f".ckpt.partial-{pid}-abcdefgh"  # what kill -9 in a save leaves
    (crashed / "model").mkdir(parents=True)
    (crashed / "model" / "manifest.ocdbt").write_bytes(b"half")
    empty = tmp_path / f".ckpt.partial-{pid}-12345678"  # killed right after mkdtemp
    empty.mkdir()
    users = tmp_path / f".ckpt.partial-{pid}-zzzzzzzz"  # the same pattern, but a user's file
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    alive = tmp_path / f".ckpt.partial-{os.getppid()}-yyyyyyyy"  # a save in progress elsewhere
    alive.mkdir()
    save_checkpoint(path, model_of("dss"))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["ckpt", users.name, alive.name])
    assert (users / "notes.txt").read_text() == "mine"


def test_a_checkpoint_lost_between_the_two_renames_is_named_and_recovered(tmp_path):
    old, new = model_of("s4d"), model_of("dss")
    path = save_checkpoint(tmp_path / "ckpt", old)
    newer = save_checkpoint(tmp_path / "newer", new)
    pid = dead_pid()
    os.replace(path, tmp_path / f".ckpt.previous-{pid}-abcdefgh")  # the first rename happened,
    os.replace(newer, tmp_path / f".ckpt.partial-{pid}-12345678")  # the second did not
    with pytest.raises(ValueError, match=rf"no checkpoint at .*interrupted save left a complete "
                                         rf"checkpoint at "
                                         rf".*\.ckpt\.partial-{pid}-12345678.*recover_checkpoint"):
        load_model(path)
    assert recover_checkpoint(path) == path  # the newer one, complete, is put in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    for x, y in zip(weights(load_model(path)), weights(new), strict=True):
        np.testing.assert_array_equal(x, y)
    # only the previous one left: it comes back; a resume recovers by itself
    folder = tmp_path / "run"
    fit(model_of("s4d"), DATA, dataclasses.replace(CONFIG, max_steps=3), checkpoint=folder)
    os.replace(folder / "last", folder / f".last.previous-{pid}-abcdefgh")
    history = fit(model_of("s4d"), DATA, dataclasses.replace(CONFIG, max_steps=3),
                  resume_from=folder)
    assert history.steps == [3] and (folder / "last").is_dir()


def test_a_corrupted_checkpoint_gives_one_clear_error_and_no_orbax_noise(tmp_path, capfd):
    path = save_checkpoint(tmp_path / "ckpt", model_of("s4d"))
    (path / "model" / "array_metadatas" / "process_0").unlink()
    for file in (path / "model").rglob("*"):
        if file.is_file() and file.parent.name == "d":
            file.write_bytes(file.read_bytes()[:5])
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"could not read the model arrays .*incomplete model/"):
        load_model(path)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""
