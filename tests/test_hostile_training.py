"""Training, checkpoints and the command line against hostile use: one test per cause, each
named after it.

1. resuming is exact: interrupted anywhere (between updates, at an epoch's end, during a
   save, a crash in a save), ``fit(resume_from=...)`` gives the bit-identical weights and
   history of an uninterrupted run, in every layer, with and without a validation split;
   the best model is its own checkpoint, never mixed with the training state;
2. the command line saves on SIGINT and SIGHUP, and in a real process on SIGUSR1 (training
   goes on) and SIGTERM, with one writer at a time; it resumes exactly, and refuses before
   loading data what would fail at save time (a folder name too long, a layer option JSON
   cannot store);
3. labels and data are checked (integers in [0, n_classes), finite after the cast);
4. step sizes are checked in float32, the dtype they are computed in;
5. split fractions, sequence lengths and seeds are checked;
6. errors are ValueErrors naming the argument (a huge d_model, fractional seeds);
7. what kill -9 leaves in a save (of the best epoch, of the last state) is recognised by orbax's
   unfinished name, whatever process made it, and never taken for the checkpoint; a user's
   file is never removed; orbax is quiet.

Tiny models (d_model 4, state 4, one block) on a synthetic data set of 50 sequences of
length 12, so each run takes a few steps; the reference runs are shared by the tests. Most
of a test's time is tracing a run's update and orbax saving: the runs are as short and save
as rarely as what they check allows, and real processes are started only where a real
process is what is tested (signals from outside, kill -9, a lock held by another process).
"""

import contextlib
import dataclasses
import io
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest
from flax import nnx

from annotated_ssm import checkpoint, runs, train
from annotated_ssm import cli as command_line
from annotated_ssm.checkpoint import load_model, save_checkpoint
from annotated_ssm.config import ModelConfig, TrainConfig
from annotated_ssm.data import Dataset, load_dataset
from annotated_ssm.layers import LAYERS
from annotated_ssm.runs import RUN_FILES
from annotated_ssm.train import TrainingInterrupted, build_model, fit, fit_seeds
from test_cli import no_data  # noqa: F401  (a fixture: fail if the command loads data)
from test_cli import run as cli  # main(argv) -> (exit status, stdout, stderr)

TINY = dict(d_model=4, n_layers=1, state_size=4, step_min=0.01, step_max=1.0, dropout=0.1)
CONFIG = TrainConfig(epochs=4, batch_size=10, lr=2e-2, validation_fraction=0.2, progress=False)
TWO_EPOCHS = dataclasses.replace(CONFIG, epochs=2)  # 8 updates: fewer saves where 2 epochs do
pytestmark = pytest.mark.usefixtures("frozen_heap")  # tests/conftest.py: saves collect garbage


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


def versions(folder) -> list[int]:
    """The update counts of the saves in a run folder, in order (the newest last)."""
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def model_at(folder, version: int):
    """The model of a run folder's save ``version``."""
    model = load_model(folder)
    with checkpoint.reading(folder) as manager:
        checkpoint.restore(manager, model, version=version)
    return model


_REFERENCE = {}


def reference(layer: str, config: TrainConfig):
    """The uninterrupted run (computed once per layer and config)."""
    key = (layer, config)
    if key not in _REFERENCE:
        model = model_of(layer)
        _REFERENCE[key] = (model, fit(model, DATA, config))
    return _REFERENCE[key]


class Crash(Exception):
    """Stands for the process dying at that point (see section 7 for a real kill -9)."""


def interrupt_then_resume(layer, config, folder, monkeypatch, where: str, at: int):
    """Train in ``folder``, stopped at ``where`` ("step": Ctrl-C after update ``at``; "save":
    Ctrl-C during save number ``at`` of the training state; "crash": the process dies in
    that save, half-written), then resume with a fresh model; returns (model, history) and
    the exception that stopped it."""
    real_shard, real_save = train.shard_batch, runs.RunFolder.save
    real_write = checkpoint.ocp.StandardCheckpointHandler.async_save
    counts = {"updates": 0, "saves": 0, "saved": []}

    def shard(mesh, *arrays):
        if len(arrays) == 2:  # a training batch (evaluation batches carry a mask too)
            counts["updates"] += 1
            if where == "step" and counts["updates"] == at:
                os.kill(os.getpid(), signal.SIGINT)  # arrives between this update and the next
        return real_shard(mesh, *arrays)

    def save(self, state, *args, **kwargs):
        counts["saves"] += 1
        if counts["saves"] == at and where == "save":
            os.kill(os.getpid(), signal.SIGINT)  # the save goes on; fit stops after it
        counts["crash"] = counts["saves"] == at and where == "crash"
        counts["saved"].append(state.step)
        return real_save(self, state, *args, **kwargs)

    async def write(self, directory, *args, **kwargs):  # dies after the model was written
        if counts.get("crash") and directory.name.startswith("optimizer"):
            raise Crash()
        return await real_write(self, directory, *args, **kwargs)

    monkeypatch.setattr(train, "shard_batch", shard)
    monkeypatch.setattr(runs.RunFolder, "save", save)
    monkeypatch.setattr(checkpoint.ocp.StandardCheckpointHandler, "async_save", write)
    with pytest.raises(Crash if where == "crash" else TrainingInterrupted) as stopped:
        fit(model_of(layer), DATA, config, checkpoint=folder)
    monkeypatch.undo()
    # A dead process writes no more: orbax's threads of the save that "died" finish first
    # (quietly, as checkpoint.write does after a failed save).
    with checkpoint.quiet_orbax(collect=True):
        for thread in threading.enumerate():
            if type(thread).__module__.startswith("orbax"):
                thread.join(timeout=60)
    assert all(p.name.isdigit() or p.name in RUN_FILES or (  # a crash leaves an unfinished save
        where == "crash" and checkpoint.UNFINISHED.match(p.name)) for p in folder.iterdir())
    if where == "crash":  # the save before the one that died
        assert versions(folder)[-1] == counts["saved"][-2]
    model = model_of(layer)
    return (model, fit(model, DATA, config, checkpoint=folder, resume_from=folder)), stopped.value


# --- 1. Resuming is exact -------------------------------------------------------------------

@pytest.mark.parametrize("layer", LAYERS)
def test_resume_after_ctrl_c_between_steps_is_exact_in_every_layer(layer, tmp_path, monkeypatch):
    folder = tmp_path / "run"
    resumed, stopped = interrupt_then_resume(layer, TWO_EPOCHS, folder, monkeypatch, "step", at=6)
    assert stopped.step == 6 and "resume with" in str(stopped)  # mid-epoch 2 (4 updates an epoch)
    assert_same_run(resumed, reference(layer, TWO_EPOCHS))


@pytest.mark.parametrize("where, at", [("step", 4), ("save", 2), ("crash", 2)],
                         ids=["ctrl-c-at-an-epoch-end", "ctrl-c-during-a-save",
                              "crash-during-a-save"])
def test_resume_after_an_interrupted_or_crashed_save_is_exact(where, at, tmp_path, monkeypatch):
    # saves after updates 1, 3, 6 and 8 (the budget: two epochs), and at each new best epoch
    config = dataclasses.replace(CONFIG, save_every_steps=3, max_steps=8)
    folder = tmp_path / "run"
    resumed, stopped = interrupt_then_resume("s4d", config, folder, monkeypatch, where, at)
    # stopped after update 4 (its epoch's validation done), after the update-3 save, or dead
    # in the update-3 save (the update-1 state on disk: the resumed run redid updates 2 to 3)
    if where != "crash":
        assert stopped.step == {"step": 4, "save": 3}[where]
    assert_same_run(resumed, reference("s4d", config))


def test_resume_without_a_validation_split_is_bit_identical(tmp_path, monkeypatch):
    config = dataclasses.replace(CONFIG, validation_fraction=0.0, max_steps=14)  # ends mid-epoch 3
    resumed, _ = interrupt_then_resume("s4d", config, tmp_path / "run", monkeypatch, "step", at=9)
    assert resumed[1].epoch == [1, 2, 3] and resumed[1].steps == [5, 10, 14]
    assert_same_run(resumed, reference("s4d", config))


def test_the_best_model_is_its_own_checkpoint_never_mixed_with_the_state(tmp_path, monkeypatch):
    scores = iter([0.9, 0.5])  # validation accuracy per epoch: epoch 1 is the best
    real_evaluate = train.evaluate

    def evaluate(model, x, y, **kwargs):
        metrics = real_evaluate(model, x, y, **kwargs)
        validation = len(x) == 10 and x is not DATA.x_test
        return {**metrics, "accuracy": next(scores)} if validation else metrics

    monkeypatch.setattr(train, "evaluate", evaluate)
    model = model_of("s4d")
    optimizer = train.make_optimizer(model, TWO_EPOCHS, train.count_steps(TWO_EPOCHS, DATA))
    history = fit(model, DATA, TWO_EPOCHS, optimizer=optimizer, checkpoint=tmp_path / "run")
    assert history.best_epoch == 1 and versions(tmp_path / "run") == [4, 8]  # best, newest
    best, last = load_model(tmp_path / "run"), model_at(tmp_path / "run", 8)
    for x, y in zip(weights(model), weights(best), strict=True):  # the model holds the best weights
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(weights(best), weights(last)))
    # and the optimiser the best epoch's state: the pair is consistent, saved and trained on
    assert int(optimizer.step[...]) == 4
    save_checkpoint(tmp_path / "pair", model, optimizer)
    monkeypatch.undo()
    fit(model, DATA, TWO_EPOCHS, optimizer=optimizer)


def _signal_at(n, real, signum=signal.SIGINT):
    """``train.shard_batch`` that sends ``signum`` (Ctrl-C) to this process at training step n."""
    counts = [0]

    def shard(mesh, *arrays):
        if len(arrays) == 2:
            counts[0] += 1
            if counts[0] == n:
                os.kill(os.getpid(), signum)
        return real(mesh, *arrays)

    return shard


def test_an_unfinished_run_is_resumed_only_as_it_was_started(tmp_path, monkeypatch):
    folder = tmp_path / "half"
    monkeypatch.setattr(train, "shard_batch", _signal_at(3, train.shard_batch))
    with pytest.raises(TrainingInterrupted):
        fit(model_of("s4d"), DATA, TWO_EPOCHS, checkpoint=folder)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"holds an unfinished run \(update 3 of 8\), and nothing "
                                         r"a run saved is replaced without asking"):
        fit(model_of("s4d"), DATA, TWO_EPOCHS, checkpoint=folder)  # a new run would overwrite it
    other = r"was started with other settings \(%s\); resume it with the same ones"
    with pytest.raises(ValueError, match=other % "lr: stored 0.02, given 0.1"):
        fit(model_of("s4d"), DATA, dataclasses.replace(TWO_EPOCHS, lr=0.1), checkpoint=folder,
            resume_from=folder)
    with pytest.raises(ValueError, match=other % "data set crc32: stored .*, given .*"):
        fit(model_of("s4d"), synthetic(seed=1), TWO_EPOCHS, checkpoint=folder, resume_from=folder)
    with pytest.raises(ValueError, match=other % "layer: stored 's4d', given 'dss'"):
        fit(model_of("dss"), DATA, TWO_EPOCHS, checkpoint=folder, resume_from=folder)
    # resuming a finished run trains nothing more and gives the same result again
    first = fit(model_of("s4d"), DATA, TWO_EPOCHS, checkpoint=folder, resume_from=folder)
    again = fit(model_of("s4d"), DATA, TWO_EPOCHS, resume_from=folder)
    assert first.test_loss == again.test_loss
    assert again.epoch == [1, 2] and again.steps[-1] == 8


def test_periodic_saves_every_n_steps_and_every_m_minutes(tmp_path, monkeypatch):
    steps_saved = []
    real = runs.RunFolder.save

    def recording(self, state, *args, **kwargs):
        steps_saved.append(state.step)
        return real(self, state, *args, **kwargs)

    monkeypatch.setattr(runs.RunFolder, "save", recording)
    config = dataclasses.replace(CONFIG, validation_fraction=0.0, save_every_steps=5,
                                 save_every_minutes=None)
    fit(model_of("s4d"), DATA, dataclasses.replace(config, max_steps=11),
        checkpoint=tmp_path / "steps")
    assert steps_saved == [1, 5, 10, 11]  # 1: the early save; 11: the final one
    steps_saved.clear()
    config = dataclasses.replace(config, save_every_steps=None, save_every_minutes=1e-9,
                                 max_steps=3)
    fit(model_of("s4d"), DATA, config, checkpoint=tmp_path / "minutes")
    assert steps_saved == [1, 2, 3]


# --- 2. The command line -------------------------------------------------------------------

SMALL = ["--dataset", "digits", "--layer", "s4d", "--d-model", "4", "--n-layers", "1",
         "--state-size", "4", "--step-max", "1",
         "--dropout", "0.1", "--batch-size", "10", "--epochs", "3", "--lr", "0.02", "--no-progress"]


CLI_DATA = dataclasses.replace(DATA, name="digits")  # the command checks the name on --resume


@pytest.fixture
def cli_data(monkeypatch):
    monkeypatch.setattr(command_line, "load_dataset", lambda name, **kwargs: CLI_DATA)


@pytest.fixture(scope="module")
def whole_cli_run(tmp_path_factory):
    """The command ``SMALL`` run uninterrupted (12 updates): its run folder and its --json
    summary, what the interrupted and resumed runs below must equal bit for bit."""
    folder = tmp_path_factory.mktemp("whole") / "run"
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as out:
        patch.setattr(command_line, "load_dataset", lambda name, **kwargs: CLI_DATA)
        assert command_line.main([*SMALL, "--checkpoint", str(folder), "--json"]) == 0
    return folder, json.loads(out.getvalue().splitlines()[-1])


def assert_same_saves(whole, resumed):
    """The best and the newest save of two run folders hold the same weights, bit for bit."""
    for a, b in ((load_model(whole), load_model(resumed)),
                 (model_at(whole, versions(whole)[-1]), model_at(resumed, versions(resumed)[-1]))):
        for x, y in zip(weights(a), weights(b), strict=True):
            np.testing.assert_array_equal(x, y)


def test_cli_saves_on_ctrl_c_and_sighup_and_resume_is_bit_identical(tmp_path, capsys, cli_data,
                                                                   monkeypatch, whole_cli_run):
    # SIGINT (Ctrl-C) at update 5; the resumed run stopped again by SIGHUP (the terminal
    # closed) at update 9; resumed again, the run is the uninterrupted one, bit for bit.
    # (In this process; a real process stopped by SIGTERM: the test after this one.)
    whole, whole_summary = whole_cli_run
    folder = tmp_path / "run"
    monkeypatch.setattr(train, "shard_batch", _signal_at(5, train.shard_batch))
    status, out, err = cli([*SMALL, "--checkpoint", str(folder)], capsys)
    assert status == 130 and err.count("\n") == 1
    assert err.startswith("interrupted by SIGINT at update 5; the training state "
                          "is saved in") and err.endswith(
        f". Continue with: annotated-ssm-train --resume {folder}\n")
    assert versions(folder)[-1] == 5
    monkeypatch.setattr(train, "shard_batch", _signal_at(4, train.shard_batch, signal.SIGHUP))
    status, out, err = cli(["--resume", str(folder)], capsys)  # updates 6 to 9
    assert "resuming from update 5 (epoch 2 of 3)" in out.splitlines()
    assert status == 128 + signal.SIGHUP and err.count("\n") == 1, err
    assert err.startswith("interrupted by SIGHUP at update 9; the training state is saved in")
    assert versions(folder)[-1] == 9
    monkeypatch.undo()
    monkeypatch.setattr(command_line, "load_dataset", lambda name, **kwargs: CLI_DATA)
    status, out, err = cli(["--resume", str(folder), "--json"], capsys)
    assert status == 0, err
    assert "resuming from update 9 (epoch 3 of 3)" in out.splitlines()
    summary = json.loads(out.splitlines()[-1])
    assert summary["steps"] == 12 and summary["checkpoint"] == str(folder)
    assert summary["test_loss"] == whole_summary["test_loss"]
    assert_same_saves(whole, folder)
    # --resume with other options, or without a folder, is refused before loading data
    resume = ["--resume", str(folder)]
    status, _, err = cli([*SMALL, "--lr", "0.1", *resume], capsys)
    assert status == 2 and "lr: stored 0.02, given 0.1" in err and err.count("\n") == 1
    status, _, err = cli([*SMALL, "--d-model", "8", *resume], capsys)
    assert status == 2 and "d_model: stored 4, given 8" in err
    status, _, err = cli([*SMALL, *resume, "--dataset", "digits_ar", "--no-bidirectional"], capsys)
    assert status == 2 and "data set name: stored 'digits', given 'digits_ar'" in err
    status, _, err = cli([*SMALL, "--resume", str(tmp_path / "none")], capsys)
    assert status == 2 and "there is no run to resume in" in err


HELD_RUN = """
import pathlib, sys, time
sys.path.insert(0, {tests!r})
import conftest  # compiled as in the test process, so the numbers agree bit for bit
from test_hostile_training import CLI_DATA
from annotated_ssm import cli, train
real, updates, signals = train.shard_batch, [0], pathlib.Path({signals!r})

def held(mesh, *arrays):  # before update n in {held!r}: say so (at-n), wait for go-n
    if len(arrays) == 2:  # a training batch (evaluation batches carry a mask too)
        updates[0] += 1
        if updates[0] in {held!r}:
            (signals / f"at-{{updates[0]}}").touch()
            while not (signals / f"go-{{updates[0]}}").exists():
                time.sleep(0.02)
    return real(mesh, *arrays)

train.shard_batch = held
cli.load_dataset = lambda name, **kwargs: CLI_DATA
sys.exit(cli.main({argv!r}))
"""


def test_a_real_process_one_writer_sigusr1_saves_sigterm_saves_and_resume_is_bit_identical(
        tmp_path, capsys, cli_data, whole_cli_run):
    # A real process (what `docker stop`, `timeout`, SLURM or a cluster's preemption signal),
    # held by the test before updates 2, 3 and 7, so that each signal comes where it says:
    # the save of update 1 is done when it waits before update 2.
    whole, whole_summary = whole_cli_run
    folder, signals = tmp_path / "run", tmp_path / "signals"
    signals.mkdir()
    script = HELD_RUN.format(tests=str(pathlib.Path(__file__).parent), signals=str(signals),
                             held=(2, 3, 7), argv=[*SMALL, "--checkpoint", str(folder)])
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, JAX_PLATFORMS="cpu"))

    def wait_before(update):
        deadline = time.monotonic() + 240
        while not (signals / f"at-{update}").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.02)

    def go_on(update):
        (signals / f"go-{update}").touch()

    wait_before(2)
    assert versions(folder) == [1]  # the early save
    # a second writer, new, resumed or overwriting, is refused at once, naming the holder
    for argv in (["--resume", str(folder)], [*SMALL, "--checkpoint", str(folder), "--overwrite"]):
        status, out, err = cli(argv, capsys)
        assert status == 2 and err.count("\n") == 1, err
        assert f"run folder {str(folder)!r} is in use by another process (pid {process.pid}" in err
    with pytest.raises(ValueError, match=f"in use by another process \\(pid {process.pid}"):
        fit(model_of("s4d"), DATA, CONFIG, checkpoint=folder, overwrite=True)
    # SIGUSR1 (SLURM's warning before preemption): a save after this update, training goes on
    process.send_signal(signal.SIGUSR1)
    go_on(2)
    wait_before(3)
    assert versions(folder) == [2] and process.poll() is None
    go_on(3)
    # SIGTERM: saves and stops after the update under way (update 7, mid-epoch 2)
    wait_before(7)
    process.send_signal(signal.SIGTERM)
    go_on(7)
    out, err = process.communicate(timeout=240)
    assert process.returncode == 143 and err.count("\n") == 1, err[-2000:]
    assert err.startswith("interrupted by SIGTERM at update 7; the training state is saved in")
    assert err.endswith(f"--resume {folder}\n") and versions(folder)[-1] == 7
    # the lock died with the process: the run resumes, and is the uninterrupted one
    status, out, err = cli([*SMALL, "--resume", str(folder), "--json"], capsys)
    assert status == 0, err
    assert "resuming from update 7 (epoch 2 of 3)" in out.splitlines()
    assert_same_saves(whole, folder)
    summary = json.loads(out.splitlines()[-1])
    assert summary["test_loss"] == whole_summary["test_loss"]
    assert summary["steps"] == whole_summary["steps"] == 12


def test_a_name_too_long_fails_before_data(tmp_path, capsys, no_data):
    folder = tmp_path / ("r" * 256)
    too_long = r"has a name too long for this file system: 'r+'… \(256 bytes; at most 255\)"
    with pytest.raises(ValueError, match=too_long):
        save_checkpoint(folder, model_of("s4d"))
    # orbax's temporary names are inside the folder: a name of 255 characters is fine
    with runs.RunFolder(tmp_path / ("r" * 255), CONFIG, dry_run=True) as fine:
        assert fine.path == tmp_path / ("r" * 255)
    status, out, err = cli([*SMALL, "--checkpoint", str(folder)], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "has a name too long for this file system" in err and "at most 255" in err
    with pytest.raises(ValueError, match="name too long"):
        fit(model_of("s4d"), DATA, CONFIG, checkpoint=folder)
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

@pytest.mark.parametrize("flag, value", [("--d-model", "100000"), ("--state-size", "1000000000"),
                                         ("--n-layers", "1000000")])
def test_a_model_too_big_for_the_memory_is_one_line_before_data(flag, value, capsys, no_data):
    status, out, err = cli([*SMALL, flag, value], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    name = flag[2:].replace("-", "_")
    if name == "n_layers":  # refused by the config, before any estimate
        assert "n_layers must be an integer in [1, 1024]; got 1000000" in err
    else:  # the estimate counts the state: H x N per block
        assert f"{name}={value}" in err and "parameters: training needs at least" in err


@pytest.mark.parametrize("options", [["--batch-size", "64"],  # 50 samples, 40 after validation
                                     ["--validation-fraction", "0.99", "--batch-size", "10"]])
def test_a_batch_larger_than_the_training_split_is_one_line_with_status_2(options, capsys,
                                                                          cli_data):
    status, out, err = cli([*SMALL, *options], capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: batch_size must be <= the number of training samples")


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

def test_a_save_removes_unfinished_saves_but_never_a_users_folder(tmp_path):
    path = save_checkpoint(tmp_path / "ckpt", model_of("s4d"))
    crashed = path / "7.orbax-checkpoint-tmp-1234"  # what kill -9 in a save leaves
    (crashed / "model.orbax-checkpoint-tmp-5").mkdir(parents=True)
    (crashed / "model.orbax-checkpoint-tmp-5" / "manifest.ocdbt").write_bytes(b"half")
    (path / "8.orbax-checkpoint-tmp").mkdir()  # killed right after orbax made it
    save_checkpoint(path, model_of("dss"))
    assert sorted(p.name for p in path.iterdir()) == ["2"]
    users = path / "9.orbax-checkpoint-tmp-1"  # orbax's pattern, but holding a user's file
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds files that are not a checkpoint's "
                                         r"\(\['9.orbax-checkpoint-tmp-1/notes.txt'\]\)"):
        save_checkpoint(path, model_of("s4d"))
    assert (users / "notes.txt").read_text() == "mine"


KILLED_IN_A_SAVE = """
import os, signal, sys
sys.path.insert(0, {tests!r})
import conftest  # compiled as in the test process, so the numbers agree bit for bit
from test_hostile_training import DATA, TWO_EPOCHS, model_of
from annotated_ssm import checkpoint, train
real = checkpoint.ocp.StandardCheckpointHandler.async_save

async def write(self, directory, *args, **kwargs):
    if directory.name.startswith("model") and directory.parent.name.startswith("{version}."):
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9 in this save, half-written
    return await real(self, directory, *args, **kwargs)

checkpoint.ocp.StandardCheckpointHandler.async_save = write
train.fit(model_of("s4d"), DATA, TWO_EPOCHS, checkpoint={folder!r})
"""


@pytest.mark.parametrize("version", [4, 8], ids=["in-a-best-epoch-save", "in-the-last-save"])
def test_what_kill_9_leaves_in_a_save_is_never_the_checkpoint(version, tmp_path):
    # A real process is killed with SIGKILL in the save of update `version` (4: epoch 1's
    # end, a new best; 8: the final one), which leaves orbax's unfinished folder. A second,
    # foreign leftover (a complete copy under an unfinished name, as from another machine
    # whose process 1 died there) is numbered above every version: neither is ever read, and
    # a resumed run removes both and gives the uninterrupted run's result, bit for bit.
    folder = tmp_path / "run"
    script = KILLED_IN_A_SAVE.format(tests=str(pathlib.Path(__file__).parent), version=version,
                                     folder=str(folder))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    unfinished = [p.name for p in folder.iterdir() if "orbax-checkpoint-tmp" in p.name]
    assert len(unfinished) == 1 and unfinished[0].startswith(f"{version}.")
    shutil.copytree(folder / str(versions(folder)[-1]), folder / "99.orbax-checkpoint-tmp-1")
    model = model_of("s4d")
    resumed = model, fit(model, DATA, TWO_EPOCHS, checkpoint=folder, resume_from=folder)
    assert_same_run(resumed, reference("s4d", TWO_EPOCHS))
    assert all(p.name.isdigit() or p.name in RUN_FILES for p in folder.iterdir())


def test_a_corrupted_checkpoint_gives_one_clear_error_and_no_orbax_noise(tmp_path, capfd):
    path = save_checkpoint(tmp_path / "ckpt", model_of("s4d"))
    (path / "1" / "model" / "array_metadatas" / "process_0").unlink()
    for file in (path / "1" / "model").rglob("*"):
        if file.is_file() and file.parent.name == "d":
            file.write_bytes(file.read_bytes()[:5])
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"could not read model, rng of the checkpoint .*incomplete"):
        load_model(path)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""
