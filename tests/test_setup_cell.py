"""The chapters' setup cell, run as Colab and as a local Jupyter would run it.

The cell (tools/setup_cell.py) is executed by IPython in a fresh interpreter, so the tests
see what a reader sees: IPython prints a ``SetupError`` as its message alone (through
``_render_traceback_``), any other exception as a traceback. Installed versions are faked
with ``*.dist-info`` folders placed first on the path (what importlib.metadata and pip
read), Colab with a stand-in ``google.colab`` module imported beforehand (as Colab's kernel
does).

Two kinds of tests:
- fast ones, where a stand-in ``subprocess.run`` records the git and pip commands and
  answers for them (or lets git run: an unreadable repository);
- ``test_in_colab_from_a_local_repository_*``, where git and pip run for real, offline:
  against a git repository holding this one's HEAD (``ANNOTATED_SSM_REPOSITORY=file://...``,
  with and without the release tag), into a throwaway virtual environment layered on this one,
  with a folder of stand-in wheels as the only index. That folder holds a flax that needs
  a newer jax and that newer jax, the trap Colab's pip fell into: the test checks that pip
  takes it without the cell's constraints and not with them (jax and jaxlib unchanged).
"""

import concurrent.futures
import importlib.metadata
import importlib.util
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("setup_cell", ROOT / "tools" / "setup_cell.py")
setup_cell = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup_cell)
FLOORS = setup_cell.floors()
VERSION, URL, BRANCH = setup_cell.version(), setup_cell.repository_url(), setup_cell.branch()
ISSUES = setup_cell.issues_url()
TAG = f"v{VERSION}"
CELL = setup_cell.setup_cell_source()
JAX = importlib.metadata.version("jax")
JAXLIB = importlib.metadata.version("jaxlib")
# The line the cell prints before installing, for the tag and for the branch.
INSTALLS_TAG = f"installing annotated-ssm {TAG}, the release these outputs were made with"
INSTALLS_BRANCH = (f"installing annotated-ssm from branch {BRANCH} (no tag {TAG}: "
                   "the code may be newer than these outputs)")

# Runs CELL in IPython after PRELUDE. FAKE maps "git" / "pip" to the (returncode, output)
# the stand-in subprocess.Popen answers with (the cell reads stdout and stderr together, line
# by line); a tool not in FAKE runs for real. MODULES are put in sys.modules first (as if the
# session had imported them). Prints one JSON line: the commands (with the constraints
# file's text after a pip command), what the reader saw, what the reader had seen when each
# line of a faked tool's output was read, and the exception's class.
HARNESS = r'''
import contextlib, io, json, subprocess, sys, types
calls, seen, RealPopen = [], [], subprocess.Popen

class FakePopen:
    def __init__(self, returncode, output):
        self.returncode, self.stdout = returncode, self.lines(output)

    def lines(self, output):
        for line in io.StringIO(output):
            seen.append(shown.getvalue())  # before this line is read
            yield line

    def wait(self):
        return self.returncode

def popen(command, **kwargs):
    tool = "git" if command[0] == "git" else "pip"
    calls.append(command)
    if tool == "pip" and "-c" in command:
        with open(command[command.index("-c") + 1]) as constraints:
            calls.append(constraints.read())
    if tool not in FAKE:
        return RealPopen(command, **kwargs)
    return FakePopen(*FAKE[tool])

subprocess.Popen = popen
exec(PRELUDE)
sys.modules.update({name: types.ModuleType(name) for name in MODULES})
if COLAB:
    google, colab = types.ModuleType("google"), types.ModuleType("google.colab")
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("custom widget manager")
    google.colab, colab.output = colab, output
    sys.modules.update({"google": google, "google.colab": colab, "google.colab.output": output})
from IPython.core.interactiveshell import InteractiveShell
shell, shown = InteractiveShell.instance(), io.StringIO()
with contextlib.redirect_stdout(shown):
    error = shell.run_cell(CELL).error_in_exec
print(json.dumps({"calls": calls, "shown": shown.getvalue(), "seen": seen,
                  "error": type(error).__name__ if error else None}))
'''


def fake_installed(folder, versions):
    """``*.dist-info`` folders that make ``versions`` (name -> version) look installed."""
    for name, version in versions.items():
        info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        # pip uninstalls what its RECORD lists when it replaces the distribution.
        (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


def harness(colab, fake, modules=(), prelude=""):
    return (f"COLAB = {colab}\nFAKE = {fake!r}\nMODULES = {list(modules)!r}\n"
            f"PRELUDE = {prelude!r}\nCELL = {CELL!r}\n{HARNESS}")


def run_cell(tmp_path, colab=False, versions=None, fake=None, modules=(), prelude="",
             repository=None):
    """Run the setup cell; ``versions`` fakes installed distributions (name -> version)."""
    fake_installed(tmp_path, versions or {})
    fake = {"git": (0, ""), "pip": (0, "")} if fake is None else fake
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    env.pop("ANNOTATED_SSM_REPOSITORY", None)
    if repository is not None:
        env["ANNOTATED_SSM_REPOSITORY"] = repository
    code = harness(colab, fake, modules, prelude)
    run = subprocess.run([sys.executable, "-c", code],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def one_sentence(report, before=()):
    """What the reader saw: the lines ``before``, then the error's message as one line with
    the fix (no traceback, not even the exception's name)."""
    *lines, shown = report["shown"].strip().splitlines()
    assert report["error"] == "SetupError", report
    assert lines == list(before), report["shown"]
    assert "Traceback" not in shown and "Error" not in shown, shown
    assert shown.endswith("run this cell again."), shown
    return shown


def ls_remote(repository):
    return ["git", "ls-remote", "--tags", repository, f"refs/tags/{TAG}"]


def assert_pip_call(command, ref, repository=URL):
    """pip install -c <constraints file> 'annotated-ssm[book] @ git+<repository>@<ref>'"""
    assert command[:5] == [sys.executable, "-m", "pip", "install", "-c"]
    assert command[6:] == [f"annotated-ssm[book] @ git+{repository}@{ref}"]


def test_cell_lines_fit_and_name_version_repository_and_branch():
    assert max(len(line) for line in CELL.splitlines()) <= 100
    assert f'VERSION = "{VERSION}"' in CELL and f'BRANCH = "{BRANCH}"' in CELL
    assert f'"{URL}"' in CELL and URL.startswith("https://")
    for name in ("jax", "flax", "optax", "ipywidgets"):
        assert f'"{name}": "{FLOORS[name]}"' in CELL


def test_locally_with_current_versions_it_installs_nothing(tmp_path):
    report = run_cell(tmp_path)
    assert report["calls"] == [] and report["error"] is None
    assert report["shown"].startswith(f"annotated_ssm {VERSION} | JAX {JAX} | backend: cpu")


def test_too_old_jax_stops_with_one_sentence_and_the_fix_everywhere(tmp_path):
    for colab, restart in ((False, "restart the kernel"), (True, "Runtime > Restart session")):
        folder = tmp_path / str(colab)
        folder.mkdir()
        report = run_cell(folder, colab=colab, versions={"jax": "0.1.0"})
        assert report["calls"] == []  # never replaces (Colab's CUDA) jax itself
        shown = one_sentence(report)
        assert shown.startswith(f"jax 0.1.0 is older than {FLOORS['jax']}, the oldest this")
        assert f'%pip install -U "jax[cuda12]>={FLOORS["jax"]}"' in shown
        assert f"then {restart} and run this cell again." in shown
        assert ("kernel" in shown) != colab


def test_too_old_flax_locally_stops_naming_package_version_and_fix(tmp_path):
    report = run_cell(tmp_path, versions={"flax": "0.1.0", "optax": "0.0.1"})
    assert report["calls"] == []
    assert one_sentence(report) == (
        f'Too old for this book: flax 0.1.0, optax 0.0.1: run %pip install -U '
        f'"flax>={FLOORS["flax"]}" "optax>={FLOORS["optax"]}", then restart the kernel and '
        "run this cell again.")


def test_locally_without_annotated_ssm_it_says_how_to_install_it(tmp_path):
    prelude = ("import importlib.metadata as m\n"  # annotated-ssm's metadata is gone
               "real = m.version\n"
               "def version(name):\n"
               "    if name == 'annotated-ssm': raise m.PackageNotFoundError(name)\n"
               "    return real(name)\n"
               "m.version = version\n")
    shown = one_sentence(run_cell(tmp_path, prelude=prelude))
    assert shown.startswith("annotated_ssm is not installed: run %pip install "
                            f'"annotated-ssm[book] @ git+{URL}"')


def test_in_colab_too_old_packages_are_upgraded_with_jax_pinned_where_it_is(tmp_path):
    plugins = {"jax-cuda12-plugin": JAX, "jax-cuda12-pjrt": JAX}
    report = run_cell(tmp_path, colab=True,
                      versions={"flax": "0.1.0", "ipywidgets": "7.6.5", **plugins},
                      fake={"git": (0, f"0123abcd\trefs/tags/{TAG}\n"), "pip": (0, "")})
    git, pip, constraints, widgets = report["calls"]
    assert git == ls_remote(URL)
    assert_pip_call(pip, TAG)
    assert constraints.splitlines() == [f"jax-cuda12-pjrt=={JAX}", f"jax-cuda12-plugin=={JAX}",
                                        f"jax=={JAX}", f"jaxlib=={JAXLIB}"]
    assert widgets == "custom widget manager" and report["error"] is None
    assert report["shown"].splitlines()[0] == INSTALLS_TAG


def test_in_colab_without_the_release_tag_it_installs_the_branch_and_says_so(tmp_path):
    report = run_cell(tmp_path, colab=True, versions={"annotated-ssm": "0.0.1"})
    assert_pip_call(report["calls"][1], BRANCH)
    assert report["shown"].splitlines()[0] == INSTALLS_BRANCH


def test_in_colab_a_failed_install_shows_pips_output_then_one_sentence(tmp_path):
    message = ["ERROR: Could not find a version that satisfies the requirement flax>=0.12.0",
               "ERROR: No matching distribution found for flax>=0.12.0"]
    said = ["Collecting annotated-ssm[book] @ git+...", "  Cloning ...", *message]
    report = run_cell(tmp_path, colab=True, versions={"flax": "0.1.0"},
                      fake={"git": (0, ""), "pip": (1, "\n".join(said) + "\n")})
    *before, last = report["shown"].strip().splitlines()
    assert before == [INSTALLS_BRANCH, *said] and report["error"] == "SetupError"
    assert last == (f"pip could not install annotated-ssm {BRANCH} next to jax {JAX} (pip's "
                    "reason is above): after a network error run this cell again, otherwise "
                    f"report the reason at {ISSUES}.")


def test_in_colab_pips_log_is_summarised_and_shown_in_full_only_on_failure(tmp_path):
    said = ["Collecting annotated-ssm[book] @ git+...", "  Cloning ...",
            *[f"Requirement already satisfied: package{k} in /usr/lib" for k in range(130)],
            "Successfully installed annotated-ssm-0.2.0"]
    report = run_cell(tmp_path, colab=True, versions={"flax": "0.1.0"},
                      fake={"git": (0, ""), "pip": (0, "\n".join(said) + "\n")})
    assert report["error"] is None, report
    installed = importlib.metadata.version("annotated-ssm")
    first, summary, last = report["shown"].strip().splitlines()
    assert first == INSTALLS_BRANCH
    # pip ran as a stand-in: nothing changed, and the summary says so in one line
    assert summary == (f"pip installed annotated-ssm {installed}; upgraded: nothing; "
                       "added 0 package(s)")
    assert last.startswith(f"annotated_ssm {VERSION} | JAX {JAX} | backend: ")
    (tmp_path / "failed").mkdir()
    failed = run_cell(tmp_path / "failed", colab=True, versions={"flax": "0.1.0"},
                      fake={"git": (0, ""), "pip": (1, "\n".join(said[:40]) + "\nERROR: no\n")})
    *before, _ = failed["shown"].strip().splitlines()
    # pip's reason: its output without the "already satisfied" lines
    assert before == [INSTALLS_BRANCH, *said[:2], "ERROR: no"]


def test_the_issues_page_comes_from_the_configuration_not_the_repository(tmp_path):
    assert ISSUES == "https://github.com/annotated-ssm/annotated-ssm/issues"
    assert f'ISSUES = "{ISSUES}"' in CELL
    fork = tmp_path / "fork.git"
    fork.mkdir()
    report = run_cell(tmp_path, colab=True, versions={"flax": "0.1.0"}, repository=str(fork),
                      fake={"git": (0, ""), "pip": (1, "ERROR: no\n")})
    *before, last = report["shown"].strip().splitlines()
    assert before == [INSTALLS_BRANCH, "ERROR: no"] and report["error"] == "SetupError"
    assert last.endswith(f"report the reason at {ISSUES}.") and str(fork) not in last


def test_in_colab_a_local_path_is_read_by_git_as_given_and_given_to_pip_as_file_url(tmp_path):
    # A real git repository at a plain path, holding the release tag; pip stands in.
    repository = tmp_path / "clone"
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-C",
           str(repository)]
    repository.mkdir()
    subprocess.run([*git, "init", "-q", "-b", BRANCH], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "release"], check=True)
    subprocess.run([*git, "tag", TAG], check=True)
    report = run_cell(tmp_path, colab=True, versions={"annotated-ssm": "0.0.1"},
                      fake={"pip": (0, "")}, repository=str(repository))
    assert report["error"] is None, report
    assert report["calls"][0] == ls_remote(str(repository))  # git reads the path itself
    assert report["shown"].splitlines()[0] == INSTALLS_TAG  # and found the tag there
    # file://localhost/…: the pip of Python 3.11's venv (23.2) refuses file:/// (empty host)
    local = "file://localhost" + repository.resolve().as_uri()[len("file://"):]
    assert_pip_call(report["calls"][1], TAG, repository=local)
    assert report["calls"][1][-1].startswith("annotated-ssm[book] @ git+file://localhost/")


def test_the_cell_is_a_colab_form_with_its_output_hidden_on_the_website(tmp_path):
    title = CELL.splitlines()[0]
    assert title.startswith("#@title Setup") and title.endswith('{ display-mode: "form" }')
    # tools/setup_cell.py writes the cell with Colab's form view and the website's tags.
    import nbformat

    path = tmp_path / "chapter.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A chapter"),
        nbformat.v4.new_code_cell("# Setup: an older cell\nprint(1)"),
        nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(notebook, path)
    assert setup_cell.main(["--check", str(path)]) == 1
    assert setup_cell.main([str(path)]) == 0
    cell = nbformat.read(path, as_version=4).cells[1]
    assert cell.source == CELL and cell.metadata["cellView"] == "form"
    assert {"hide-input", "remove-output", "nbval-ignore-output"} <= set(cell.metadata["tags"])
    assert setup_cell.main(["--check", str(path)]) == 0


def test_in_colab_an_unreadable_repository_stops_with_one_sentence(tmp_path):
    missing = f"file://localhost{tmp_path}/missing"  # real git, answering "no such repository"
    report = run_cell(tmp_path, colab=True, versions={"annotated-ssm": "0.0.1"},
                      fake={"pip": (0, "")}, repository=missing)
    assert report["calls"] == [ls_remote(missing)]
    shown = one_sentence(report)
    assert shown.startswith(f"Cannot read {missing} (fatal: ")
    assert shown.endswith("check the internet connection (or ANNOTATED_SSM_REPOSITORY), then "
                          "run this cell again.")


def test_in_colab_upgrading_what_the_session_imported_asks_for_a_restart(tmp_path):
    report = run_cell(tmp_path, colab=True, versions={"flax": "0.1.0"}, modules=["flax"])
    summary = (f"pip installed annotated-ssm {importlib.metadata.version('annotated-ssm')}; "
               "upgraded: nothing; added 0 package(s)")  # pip is a stand-in here
    assert one_sentence(report, before=[INSTALLS_BRANCH, summary]) == (
        "Upgraded flax, which this session had already imported: Runtime > Restart session "
        "and run this cell again.")


@pytest.mark.skipif(importlib.util.find_spec("annotated_ssm") is None, reason="not installed")
def test_in_colab_with_everything_in_place_only_the_widget_manager_is_enabled(tmp_path):
    installed = importlib.metadata.version("annotated-ssm")
    if installed != VERSION:
        pytest.skip(f"annotated-ssm {installed} installed, not the release {VERSION}")
    report = run_cell(tmp_path, colab=True)
    assert report["calls"] == ["custom widget manager"] and report["error"] is None


# --- git and pip for real, offline --------------------------------------------------------

def wheel(folder, name, version, requires=()):
    """An empty stand-in wheel (metadata only) in ``folder``."""
    dist = f"{name.replace('-', '_')}-{version}"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {requirement}\n" for requirement in requires)
    files = {f"{dist}.dist-info/METADATA": metadata,
             f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
                                        "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = f"{dist}.dist-info/RECORD"
    files[record] = "".join(f"{path},,\n" for path in [*files, record])
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def layered_venv(path, uv):
    """A virtual environment that sees this one's packages behind its own, with pip (this
    one's) and setuptools >= 77 (to build annotated-ssm without an index)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    python = path / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = subprocess.run([python, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (pathlib.Path(own) / "layered.pth").write_text("".join(f"{p}\n" for p in ours))
    for offline in (["--offline"], []):  # uv's cache first, then PyPI
        done = subprocess.run([uv, "pip", "install", "-q", "--python", python, *offline,
                               "setuptools>=77"], capture_output=True, text=True)
        if done.returncode == 0:
            return python, pathlib.Path(own)
    raise AssertionError(done.stderr)


def distributions(python):
    code = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
            "('jax', 'jaxlib', 'flax', 'annotated-ssm')}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True,
                                     check=True).stdout)


def requested(site):
    """The git reference the installed annotated-ssm came from (pip's direct_url.json)."""
    direct = json.loads((site / f"annotated_ssm-{VERSION}.dist-info" / "direct_url.json")
                        .read_text())
    return direct["vcs_info"]["requested_revision"]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs this repository's git history")
def test_in_colab_from_a_local_repository_tag_or_branch_with_jax_unchanged(tmp_path):
    uv = shutil.which("uv", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv (installed into .venv by the Makefile) builds the throwaway environment"
    # The repository: HEAD without the chapters (pip clones it whole; the package is small).
    untagged, tagged = tmp_path / "untagged", tmp_path / "tagged"
    untagged.mkdir()
    archive = subprocess.run(["git", "-C", ROOT, "archive", "HEAD", "--", ".", ":!book"],
                             capture_output=True, check=True).stdout
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(untagged, **safe)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-C"]
    subprocess.run([*git, untagged, "init", "-q", "-b", BRANCH], check=True)
    subprocess.run([*git, untagged, "add", "-A"], check=True)
    subprocess.run([*git, untagged, "commit", "-q", "-m", "HEAD"], check=True)
    subprocess.run(["git", "clone", "-q", untagged, tagged], check=True)
    subprocess.run(["git", "-C", tagged, "tag", TAG], check=True)
    repositories = {name: f"file://localhost{tmp_path / name}" for name in ("untagged", "tagged")}
    # The only index: flax 0.12.1 (fits any jax >= 0.8.0) and flax 99, which needs jax 99.
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "flax", "0.12.1", ["jax>=0.8.0"])
    wheel(wheels, "flax", "99.0", ["jax>=99"])
    wheel(wheels, "jax", "99.0", ["jaxlib>=99"])
    wheel(wheels, "jaxlib", "99.0")
    # pip reads PIP_NO_BUILD_ISOLATION=0 as --no-build-isolation (setuptools from the venv).
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_NO_BUILD_ISOLATION": "0",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1", "JAX_PLATFORMS": "cpu"}
    scenarios = {  # name: (repository, what looks installed in the throwaway environment)
        "no tag": (repositories["untagged"], {"annotated-ssm": "0.0.1", "flax": "0.1.0"}),
        "tag": (repositories["tagged"], {"annotated-ssm": "0.0.1"}),
        "too old": (repositories["tagged"], {"annotated-ssm": "0.0.1", "jax": "0.1.0"}),
        "pip fails": (repositories["untagged"], {"annotated-ssm": "0.0.1", "flax": "0.1.0"}),
    }
    pythons, sites = {}, {}
    for name, (repository, versions) in scenarios.items():
        pythons[name], sites[name] = layered_venv(tmp_path / f"venv-{name.replace(' ', '-')}", uv)
        fake_installed(sites[name], versions)
    # Without the cell's constraints, pip would take the trap: flax 99 with jax 99.
    dry = subprocess.run([pythons["no tag"], "-m", "pip", "install", "--dry-run",
                          f"flax>={FLOORS['flax']}"], capture_output=True, text=True,
                         env={**os.environ, **offline})
    assert "Would install flax-99.0 jax-99.0 jaxlib-99.0" in dry.stdout, dry.stdout + dry.stderr
    no_wheels = tmp_path / "no-wheels"  # "pip fails": no flax that fits the pinned jax
    no_wheels.mkdir()
    wheel(no_wheels, "flax", "99.0", ["jax>=99"])

    def run(name):
        repository = scenarios[name][0]
        env = {**os.environ, **offline, "ANNOTATED_SSM_REPOSITORY": repository}
        env.pop("PYTHONPATH", None)
        if name == "pip fails":
            env["PIP_FIND_LINKS"] = str(no_wheels)
        done = subprocess.run([pythons[name], "-c", harness(True, {})], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    with concurrent.futures.ThreadPoolExecutor(len(scenarios)) as pool:
        reports = dict(zip(scenarios, pool.map(run, scenarios)))
    for name, report in reports.items():  # shown by `pytest -s`: what the reader sees
        print(f"--- {name}\n{report['shown'].strip()}")

    report = reports["no tag"]
    assert report["error"] is None, report
    assert report["shown"].splitlines()[0] == INSTALLS_BRANCH
    # a summary of what pip changed, not pip's log
    summary = report["shown"].splitlines()[1]
    assert summary.startswith(f"pip installed annotated-ssm {VERSION}; upgraded: "), summary
    assert "flax 0.1.0 -> 0.12.1" in summary and "Requirement already" not in report["shown"]
    assert report["shown"].splitlines()[-1].startswith(f"annotated_ssm {VERSION} | JAX {JAX} |")
    assert requested(sites["no tag"]) == BRANCH
    after = distributions(pythons["no tag"])
    assert (after["jax"], after["jaxlib"]) == (JAX, JAXLIB)  # not the jax 99 flax 99 wants
    assert after == {"jax": JAX, "jaxlib": JAXLIB, "flax": "0.12.1", "annotated-ssm": VERSION}

    report = reports["tag"]
    assert report["error"] is None, report
    assert report["shown"].splitlines()[0] == INSTALLS_TAG
    assert requested(sites["tag"]) == TAG
    assert distributions(pythons["tag"])["jax"] == JAX

    report = reports["too old"]
    assert report["calls"] == []  # neither git nor pip ran
    assert one_sentence(report).startswith(f"jax 0.1.0 is older than {FLOORS['jax']}")
    assert "Runtime > Restart session" in report["shown"]

    report = reports["pip fails"]
    *pips_output, last = report["shown"].strip().splitlines()
    assert pips_output[0] == INSTALLS_BRANCH  # then the end of pip's output: its reason
    assert any(line.startswith("ERROR: ") for line in pips_output)
    assert f"    The user requested (constraint) jax=={JAX}" in pips_output
    assert report["error"] == "SetupError" and "Traceback" not in report["shown"]
    assert last.startswith(f"pip could not install annotated-ssm {BRANCH} next to jax {JAX}")
    assert distributions(pythons["pip fails"])["jax"] == JAX
