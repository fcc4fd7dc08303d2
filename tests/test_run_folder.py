"""A run folder on a shared machine: a signal while the first update compiles ends cleanly
(a real process), a failed first save that leaves the folder startable, run folders behind
symlinks, repeating S4's command with --resume, tampered run metadata as one line naming
the field, a best save of another architecture refused, and a full disk in a real process.
One writer at a time, SIGUSR1 (save and train on), SIGTERM and SIGHUP (save and stop):
tests/test_hostile_training.py, which holds the real process that they need.

Most of a test's time is tracing a run's update and orbax saving: a run is as short as
what it checks allows, and the tampered-metadata cases copy one run folder."""

import contextlib
import dataclasses
import errno
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from annotated_ssm import checkpoint, train
from annotated_ssm import cli as cli_module
from annotated_ssm.runs import LOCK
from annotated_ssm.train import fit
from test_cli import run as cli
from test_hostile_training import (CLI_DATA, CONFIG, DATA, SMALL, cli_data, model_of,  # noqa: F401
                                   versions)

pytestmark = pytest.mark.usefixtures("frozen_heap")  # tests/conftest.py: saves collect garbage
SHORT = dataclasses.replace(CONFIG, max_steps=2)  # an update, a save, an update, the last save

RUN = """
import sys
sys.path.insert(0, {tests!r})
import conftest
from test_hostile_training import CLI_DATA
from annotated_ssm import cli
cli.load_dataset = lambda name, **kwargs: CLI_DATA
sys.exit(cli.main({argv!r}))
"""


def start(argv):
    """The command run on ``CLI_DATA`` in a real process."""
    script = RUN.format(tests=str(pathlib.Path(__file__).parent), argv=argv)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, JAX_PLATFORMS="cpu"))


def test_signals_while_the_first_update_compiles_end_cleanly(tmp_path):
    folder = tmp_path / "run"
    process = start([*SMALL, "--checkpoint", str(folder)])
    for line in process.stdout:  # the model is built; fit is about to compile
        if "parameters on" in line:
            break
    process.send_signal(signal.SIGTERM)
    time.sleep(0.4)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # impatient: a second one, 0.4 s later
    out, err = process.communicate(timeout=240)
    # exit status 143 (or, when the second SIGTERM comes after the message, ended by it: the
    # shell's status is 143 too); never a segmentation fault
    assert process.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted by SIGTERM")
    if "nothing to save yet" not in last:  # the signal came after the first update compiled
        assert "the training state is saved in" in last and versions(folder)


def test_a_failed_first_save_leaves_no_folder_and_says_nothing_was_kept(tmp_path, monkeypatch,
                                                                         capfd):
    real = checkpoint.ocp.StandardCheckpointHandler.async_save

    async def full(self, directory, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.ocp.StandardCheckpointHandler, "async_save", full)
    folder = tmp_path / "runs" / "run"
    with pytest.raises(OSError, match="nothing was saved before, and the folder holds no "
                                      "checkpoint; free some space and run the same command"):
        fit(model_of("s4d"), DATA, SHORT, checkpoint=folder)
    assert not folder.exists()
    assert "Traceback" not in "".join(capfd.readouterr())  # orbax's threads stay quiet
    monkeypatch.setattr(checkpoint.ocp.StandardCheckpointHandler, "async_save", real)
    fit(model_of("s4d"), DATA, SHORT, checkpoint=folder)  # the same call, once there is space
    assert versions(folder) == [2]


def test_run_folders_behind_symlinks_work_and_links_inside_are_refused(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "runs").symlink_to(scratch)  # runs -> /scratch/runs, as on clusters
    fit(model_of("s4d"), DATA, SHORT, checkpoint=tmp_path / "runs")
    assert versions(scratch) == [2]
    users = tmp_path / "notes.txt"
    users.write_text("mine")
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "history.json").symlink_to(users)  # the package would write there
    with pytest.raises(ValueError, match=r"holds files that are not a run folder's "
                                         r"\(\['history.json'\]\)"):
        fit(model_of("s4d"), DATA, SHORT, checkpoint=inside)
    assert users.read_text() == "mine"


def test_repeating_s4s_command_with_resume_works(tmp_path, capsys, cli_data):
    # S4's reference length is an option the package adds (the data's length): not compared
    argv = [*SMALL[:3], "s4", *SMALL[4:], "--layer-option", "chunk_size=8", "--epochs", "1",
            "--checkpoint", str(tmp_path / "s4")]
    status, _, err = cli(argv, capsys)
    assert status == 0, err
    status, out, err = cli([*argv[:-2], "--epochs", "2", "--resume", str(tmp_path / "s4")], capsys)
    assert status == 0, err


def tampered(folder, change):
    """Rewrite the newest save's training state with ``change`` applied."""
    (file,) = (folder / str(versions(folder)[-1])).glob("annotated_ssm/metadata")
    values = json.loads(file.read_text())
    change(values["training_state"])
    file.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def short_cli_run(tmp_path_factory):
    """A run folder the command saved (6 updates of ``SMALL``), for the tests to copy: two
    saves, epoch 1's (the best: its validation accuracy made 0.9, epoch 2's 0.5) and the
    newest (update 6)."""
    folder = tmp_path_factory.mktemp("short") / "run"
    scores, real_evaluate = iter([0.9, 0.5]), train.evaluate

    def evaluate(model, x, y, **kwargs):
        metrics = real_evaluate(model, x, y, **kwargs)
        return metrics if x is CLI_DATA.x_test else {**metrics, "accuracy": next(scores)}

    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()):
        patch.setattr(cli_module, "load_dataset", lambda name, **kwargs: CLI_DATA)
        patch.setattr(train, "evaluate", evaluate)
        assert cli_module.main([*SMALL, "--max-steps", "6", "--checkpoint", str(folder)]) == 0
    return folder


@pytest.mark.parametrize("field, change", [
    ("step", lambda s: s.update(step="20")),
    ("step", lambda s: s.update(step=20.0)),
    ("step", lambda s: s.update(step=10**30)),
    ("history", lambda s: s.update(history=[])),
    ("dataset", lambda s: s.pop("dataset")),
    ("history.val_loss", lambda s: s["history"]["val_loss"].pop()),
    ("best_score", lambda s: s.update(best_score="high")),
])
def test_tampered_run_metadata_is_one_line_naming_the_field(field, change, tmp_path, capsys,
                                                             cli_data, short_cli_run):
    folder = shutil.copytree(short_cli_run, tmp_path / "run")
    tampered(folder, change)
    status, out, err = cli(["--resume", str(folder), "--epochs", "4"], capsys)
    assert status == 2 and err.count("\n") == 1 and out == ""
    assert f"corrupted: {field} is " in err and str(folder) in err


def test_a_best_save_of_another_architecture_is_refused_on_resume(tmp_path, short_cli_run):
    folder = shutil.copytree(short_cli_run, tmp_path / "run")
    assert versions(folder) == [4, 6]  # the best epoch's save and the newest
    (file,) = (folder / str(versions(folder)[0])).glob("annotated_ssm/metadata")
    values = json.loads(file.read_text())
    values["architecture"]["d_model"] = 8
    file.write_text(json.dumps(values))
    bigger = dict(CONFIG.__dict__, epochs=5)
    with pytest.raises(ValueError, match="holds another architecture than the newest"):
        fit(model_of("s4d"), CLI_DATA, type(CONFIG)(**bigger), checkpoint=folder,
            resume_from=folder)
    assert (folder / LOCK).exists() and len(versions(folder)) == 2  # nothing changed


def test_a_run_folder_of_the_earlier_format_is_refused_with_what_to_do(tmp_path):
    (tmp_path / "old" / "last" / "3").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"holds a run of an earlier annotated_ssm .* loads with "
                                         r"load_model\('.*old/best'\)"):
        fit(model_of("s4d"), DATA, CONFIG, checkpoint=tmp_path / "old", resume_from=tmp_path / "old")


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB file system (tmpfs), too small for one save; skipped where mounting is not
    allowed."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def test_a_full_disk_at_the_first_save_is_one_line_and_the_command_can_run_again(tiny_disk):
    folder = tiny_disk / "run"
    process = start([*SMALL, "--checkpoint", str(folder)])
    out, err = process.communicate(timeout=240)
    assert process.returncode == 1 and err.count("\n") == 1, err[-3000:]  # no orbax traceback
    assert err.startswith(f"error: no space left to save the checkpoint at {str(folder)!r}")
    assert "nothing was saved before" in err and "run the same command again" in err
    assert not folder.exists()  # as before the command: the same command may run again
