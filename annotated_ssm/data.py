"""Datasets for training sequence models, as numpy arrays of shape (samples, length, channels).

Three work offline and are small enough for a laptop CPU:

- ``mnist1d``: MNIST-1D (Greydanus 2020), generated locally by the ``mnist1d`` package's
  generator (:mod:`annotated_ssm.mnist1d`, in the core install): 4000 training and 1000
  test sequences of length 40, 10 classes.
- ``digits``: scikit-learn's 8x8 handwritten digits read pixel by pixel (length 64).
  ``digits_ar`` is the same data as a causal regression task: predict row (or pixel) t from
  the ones before it, the setting for autoregressive generation.
- ``mnist1d_long``: a long-range task. Each MNIST-1D digit is shown at the start of a
  sequence and followed by noise up to length 1024; the class must be carried across
  ~1000 steps of distraction.

One generator returns token sequences instead of a :class:`Dataset`: ``selective_copying``,
the selective copying task of Mamba (Gu and Dao, 2023), integer inputs and targets to be
embedded by the model.

Two are downloaded on first use (for GPU runs): ``smnist`` (sequential MNIST, 784 steps of
one pixel) and ``scifar`` (sequential CIFAR-10, 1024 steps of RGB pixels). Files are cached
in ``$ANNOTATED_SSM_DATA`` (default ``~/.cache/annotated_ssm``) and verified by MD5.

``load_dataset(name)`` returns a :class:`Dataset`; ``batches`` iterates over it in a seeded
order, so a training run is reproducible.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import inspect
import os
import pathlib
import tarfile
from typing import Callable, Iterator

import numpy as np
import pooch

from ._validation import (check, check_choice, check_finite, check_integers, check_positive_int,
                          check_real_in, check_seed, computation_dtypes, is_integer, is_real_number)
from .mnist1d import SETTINGS, make_mnist1d

__all__ = [
    "Dataset",
    "DATASETS",
    "DATASET_TASKS",
    "DATASET_NEEDS",
    "check_dataset_installed",
    "load_dataset",
    "load_npz",
    "dataset_task",
    "batches",
    "validation_split",
    "load_mnist1d",
    "load_digits",
    "load_digits_ar",
    "load_mnist1d_long",
    "selective_copying",
    "load_sequential_mnist",
    "load_sequential_cifar",
    "read_idx",
    "read_cifar_binary",
    "fetch",
    "cache_dir",
    "check_dataset",
]


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A train/test split of sequences.

    Attributes:
        name: the registry name.
        x_train, x_test: (n, L, C) float32 inputs.
        y_train, y_test: (n,) int32 class labels (``task == "classification"``) or
            (n, L, D) float32 per-step targets (``task == "regression"``).
        task: "classification" or "regression".
        n_classes: number of classes (classification only).
        lengths_train, lengths_test: (n,) integers in [1, L], each sequence's own length
            when sequences of different lengths are padded (at the end) to one L; None: all
            have length L. The models ignore the padding (``model(x, lengths=…)``): padded
            steps never change a real step's output, the pooling and the loss.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    task: str
    n_classes: int | None = None
    lengths_train: np.ndarray | None = None
    lengths_test: np.ndarray | None = None

    def __post_init__(self):
        check_dataset(self)

    @property
    def length(self) -> int:
        return self.x_train.shape[1]

    @property
    def channels(self) -> int:
        return self.x_train.shape[2]

    @property
    def n_outputs(self) -> int:
        """What the model's decoder must produce: classes, or target channels per step."""
        return self.n_classes if self.task == "classification" else self.y_train.shape[-1]

    def __repr__(self) -> str:
        what = (f"{self.n_classes} classes" if self.task == "classification"
                else f"{self.n_outputs} targets/step")
        return (
            f"Dataset({self.name!r}: {len(self.x_train)} train / {len(self.x_test)} test, "
            f"length {self.length}, {self.channels} channel(s), {self.task}, {what})"
        )


def check_dataset(dataset: "Dataset") -> None:
    """ValueError (TypeError for arrays that are not NumPy's) naming the first thing that
    cannot train: inputs not (n, L, C) with n, L, C >= 1 or not finite after the cast to the
    training dtype, labels not integers in [0, n_classes), targets not finite or not
    (n, L, D), lengths not integers in [1, L]. Stores the lengths as int32."""
    d, parts = dataset, ("train", "test")
    check_choice("task", d.task, ("classification", "regression"))
    classify = d.task == "classification"
    check("n_classes", d.n_classes, is_integer(d.n_classes) and d.n_classes >= 2 if classify
          else d.n_classes is None, f"be {'an integer >= 2' if classify else 'None'} for a "
          f"{d.task} data set")
    for field in ("x_train", "y_train", "x_test", "y_test"):
        if not isinstance(getattr(d, field), np.ndarray):
            raise TypeError(f"{field} must be a numpy array; got {type(getattr(d, field)).__name__}.")
    for part in parts:
        x, y, lengths = (getattr(d, f"{a}_{part}") for a in ("x", "y", "lengths"))
        _check_sequences(f"x_{part}", x)
        if lengths is not None:
            check_integers(f"lengths_{part}", lengths, x.shape[:1], "lengths", 1, x.shape[1],
                           f"[1, {x.shape[1]}] (the padded length)")
            object.__setattr__(d, f"lengths_{part}", np.asarray(lengths, np.int32))
        if classify:
            n = d.n_classes
            check_integers(f"y_{part}", y, x.shape[:1], "class labels", 0, n - 1,
                           f"[0, {n}) (n_classes={n})")
        else:
            check(f"y_{part}", y, y.shape[:2] == x.shape[:2], "have shape (samples, length, "
                  f"targets) with the samples and length of x_{part} {x.shape[:2]}", f"shape {y.shape}")
            _check_sequences(f"y_{part}", y)
    for a in ("x",) if classify else ("x", "y"):
        train, test = getattr(d, f"{a}_train"), getattr(d, f"{a}_test")
        check(f"{a}_test", test, train.shape[2 if a == "y" else 1:] == test.shape[2 if a == "y" else 1:],
              f"match {a}_train's shape {train.shape} but in the number of samples", f"shape {test.shape}")


def _check_sequences(name: str, x: np.ndarray) -> None:
    """x must be (n, L, C), n, L, C >= 1, finite in the dtype training computes in."""
    check(name, x, x.ndim == 3 and 0 not in x.shape, "have shape (samples, length, channels), "
          "each >= 1", f"shape {x.shape}")
    check_finite(name, x, computation_dtypes(name, x)[0], ("sample", "step", "channel"))


def _check_fraction(name: str, value, n: int) -> float:
    """A split fraction in (0, 1) that leaves both parts of n samples non-empty."""
    check(name, value, is_real_number(value) and 0 < value < 1, "be a number in (0, 1)")
    n_part = int(round(value * n))
    check(name, value, 0 < n_part < n, f"leave both splits non-empty: be between {1 / n:.3g} and "
          f"{1 - 1 / n:.3g}", f"{value!r} of {n} samples, which leaves an empty split ({n_part} "
          f"and {n - n_part})")
    return float(value)


def _standardise(x_train: np.ndarray, x_test: np.ndarray):
    """Scale inputs to zero mean and unit variance with the training set's statistics."""
    mean, std = x_train.mean(), x_train.std()
    return ((x_train - mean) / std).astype(np.float32), ((x_test - mean) / std).astype(np.float32)


# --- Offline datasets ---------------------------------------------------------------------

def _mnist1d_arrays(num_samples: int, seed: int, options: dict | None = None):
    """MNIST-1D's generator (:mod:`annotated_ssm.mnist1d`) with ``options`` checked."""
    for key, value in (options or {}).items():
        check_choice("mnist1d option", key, SETTINGS)
        if key in ("template_len", "final_seq_length"):
            check_positive_int(key, value, minimum=1)
    return make_mnist1d(num_samples, seed, **(options or {}))


def load_mnist1d(num_samples: int = 5000, seed: int = 42, **options) -> Dataset:
    """MNIST-1D: 10 one-dimensional digit templates, randomly padded, translated, sheared,
    scaled and corrupted with noise; length 40. The defaults give the standard 4000/1000
    split of the paper. Returns x of shape (n, 40, 1).

    ``options`` override the generator's settings (:data:`annotated_ssm.mnist1d.SETTINGS`), e.g.
    ``max_translation=1, shear_scale=0`` for digits that stay in place and keep their shape.
    """
    num_samples = check_positive_int("num_samples", num_samples, minimum=10)
    data = _mnist1d_arrays(num_samples, check_seed("seed", seed), options)
    return Dataset(
        "mnist1d",
        data["x"][..., None].astype(np.float32),
        data["y"].astype(np.int32),
        data["x_test"][..., None].astype(np.float32),
        data["y_test"].astype(np.int32),
        "classification",
        10,
    )


def _digit_pixels(seed: int, test_fraction: float):
    """scikit-learn's 1797 8x8 digits, pixels in [0, 1], split with a seeded permutation."""
    seed = check_seed("seed", seed)
    check_dataset_installed("digits")
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    test_fraction = _check_fraction("test_fraction", test_fraction, len(digits.images))
    pixels = (digits.images.reshape(len(digits.images), 64) / 16.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(pixels))
    n_test = int(round(test_fraction * len(pixels)))
    test, train = order[:n_test], order[n_test:]
    return pixels[train], digits.target[train], pixels[test], digits.target[test]


def load_digits(seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """scikit-learn's 8x8 digits read row by row as sequences of 64 pixels: (n, 64, 1)."""
    p_train, y_train, p_test, y_test = _digit_pixels(seed, test_fraction)
    x_train, x_test = _standardise(p_train[..., None], p_test[..., None])
    return Dataset("digits", x_train, y_train.astype(np.int32), x_test, y_test.astype(np.int32),
                   "classification", 10)


def load_digits_ar(seed: int = 0, test_fraction: float = 0.2, by: str = "row") -> Dataset:
    """The digits as a causal next-step regression task, for autoregressive generation.

    ``by="row"``: sequences of 8 steps, each a row of 8 pixels, shape (n, 8, 8);
    ``by="pixel"``: sequences of 64 steps of one pixel, shape (n, 64, 1).
    Targets are the pixels in [0, 1]; inputs are the same steps shifted one step right with
    zeros in front, so the model's output at step t only sees steps < t. Feeding each
    prediction back as the next input generates an image step by step.
    """
    check_choice("by", by, ("row", "pixel"))
    p_train, _, p_test, _ = _digit_pixels(seed, test_fraction)
    shape = (8, 8) if by == "row" else (64, 1)

    def steps(p):
        return p.reshape(len(p), *shape)

    def shift(y):
        return np.concatenate([np.zeros_like(y[:, :1]), y[:, :-1]], axis=1)

    y_train, y_test = steps(p_train), steps(p_test)
    return Dataset("digits_ar", shift(y_train), y_train, shift(y_test), y_test, "regression")


def load_mnist1d_long(length: int = 1024, num_samples: int = 5000, seed: int = 42,
                      noise: float = 1.0, **options) -> Dataset:
    """A long-range memory task: an MNIST-1D digit (40 steps) followed by Gaussian noise of
    standard deviation ``noise`` up to ``length`` steps. The label must be remembered from
    the first 40 steps to wherever the model reads it out. Returns x of shape (n, length, 1).
    ``options`` go to the MNIST-1D generator (see :func:`load_mnist1d`)."""
    length = check_positive_int("length", length, minimum=40)
    check_real_in("noise", noise, 0.0)
    base = load_mnist1d(num_samples, seed, **options)
    rng = np.random.default_rng(seed)

    def pad(x):
        tail = noise * rng.standard_normal((len(x), length - x.shape[1], 1)).astype(np.float32)
        return np.concatenate([x, tail], axis=1)

    return Dataset("mnist1d_long", pad(base.x_train), base.y_train, pad(base.x_test), base.y_test,
                   "classification", 10)


# --- Synthetic token tasks ------------------------------------------------------------------

def selective_copying(n: int, length: int, n_memorize: int, vocab: int, *,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The selective copying task of Mamba (Gu and Dao, 2023, Section 4.1.1 and Figure 2).

    Each sequence has ``length`` positions; ``n_memorize`` of them, chosen at random, hold
    data tokens drawn uniformly from 1 … vocab-2, and the others hold the noise token 0.
    Then come ``n_memorize`` marker tokens vocab-1, at which a model must output the data
    tokens in the order they appeared. Where the data tokens sit changes from one sequence
    to the next, so no fixed weighting of the past finds them: the model has to select by
    content. The generator follows ``torch_copying_data(..., variable=True)`` in the
    state-spaces/s4 repository (``src/dataloaders/datasets/copying.py``), which places M
    tokens among L + M positions: ``length`` here is that L + M.

    Args:
        n: number of sequences.
        length: positions before the markers (>= n_memorize).
        n_memorize: data tokens per sequence, M.
        vocab: tokens in all (>= 3): the noise token 0, data tokens 1 … vocab-2, the marker.
        seed: seeds ``np.random.default_rng``; the same seed gives the same sequences.

    Returns:
        inputs (n, length + n_memorize) and targets (n, n_memorize), int32 token ids: the
        targets are the data tokens in order, to be read at the last n_memorize steps.
    """
    n = check_positive_int("n", n)
    n_memorize = check_positive_int("n_memorize", n_memorize)
    length = check_positive_int("length", length)
    check("length", length, length >= n_memorize, f"be >= n_memorize ({n_memorize}): the data "
          "tokens need a position each")
    vocab = check_positive_int("vocab", vocab, minimum=3)
    rng = np.random.default_rng(check_seed("seed", seed))
    tokens = rng.integers(1, vocab - 1, size=(n, n_memorize), dtype=np.int32)
    positions = np.sort(rng.random((n, length)).argsort(axis=1)[:, :n_memorize], axis=1)
    inputs = np.zeros((n, length + n_memorize), np.int32)
    np.put_along_axis(inputs, positions, tokens, axis=1)
    inputs[:, length:] = vocab - 1
    return inputs, tokens


# --- Downloaded datasets (sequential MNIST and CIFAR-10) ------------------------------------

MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FILES = {  # the official files' MD5 checksums
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
CIFAR_TRAIN = [f"cifar-10-batches-bin/data_batch_{i}.bin" for i in range(1, 6)]
CIFAR_TEST = ["cifar-10-batches-bin/test_batch.bin"]


def cache_dir() -> pathlib.Path:
    """Where downloads are kept: ``$ANNOTATED_SSM_DATA``, else ``$XDG_CACHE_HOME/annotated_ssm``
    (``~/.cache/annotated_ssm``)."""
    if os.environ.get("ANNOTATED_SSM_DATA"):
        return pathlib.Path(os.environ["ANNOTATED_SSM_DATA"])
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "annotated_ssm"


def fetch(url: str, md5: str, directory: str | os.PathLike | None = None) -> pathlib.Path:
    """Return the path of ``url``'s file in the cache (:func:`cache_dir` unless
    ``directory``), downloading it first with pooch if it is missing or its MD5 differs.

    pooch downloads into a temporary file and keeps it only if the checksum matches. A
    mismatch or a failed download (e.g. offline) raises an OSError that says which file to
    place where.
    """
    directory = pathlib.Path(directory) if directory is not None else cache_dir()
    name = url.rsplit("/", 1)[-1]
    try:
        return pathlib.Path(pooch.retrieve(url, known_hash=f"md5:{md5}", fname=name, path=directory,
                                           progressbar=False))
    except Exception as error:  # requests' connection errors, OSError, pooch's hash mismatch
        raise OSError(
            f"could not download {url} with MD5 {md5} ({type(error).__name__}: {error}; a "
            f"download whose checksum differs is deleted). Are you offline? Download it by hand "
            f"and put it at {directory / name} (MD5 {md5}), or choose an offline dataset: "
            "mnist1d, digits, digits_ar, mnist1d_long."
        ) from error


def read_idx(data: bytes) -> np.ndarray:
    """Parse the IDX format of the MNIST files (after gunzip): a magic number whose third byte
    is the element type (0x08 = uint8) and fourth byte the number of dimensions, then the
    dimensions as big-endian int32, then the values. (The files are checked by their MD5.)"""
    ndim = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, ">i4", count=ndim, offset=4))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def read_cifar_binary(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Parse one CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes (1024 red,
    then green, then blue, each row-major 32x32). Returns images (n, 32, 32, 3) uint8 and
    labels (n,) uint8. (The archive is checked by its MD5.)"""
    record = 1 + 3 * 32 * 32
    rows = np.frombuffer(data, np.uint8).reshape(-1, record)
    images = rows[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, rows[:, 0]


def load_sequential_mnist(directory: str | os.PathLike | None = None) -> Dataset:
    """Sequential MNIST: each 28x28 image read pixel by pixel, (n, 784, 1); 60000/10000.
    Downloads ~11 MB on first use."""

    def read(name):
        with gzip.open(fetch(MNIST_URL + name, MNIST_FILES[name], directory), "rb") as stream:
            return read_idx(stream.read())

    x_train = read("train-images-idx3-ubyte.gz").reshape(-1, 784, 1) / 255.0
    x_test = read("t10k-images-idx3-ubyte.gz").reshape(-1, 784, 1) / 255.0
    x_train, x_test = _standardise(x_train, x_test)
    y_train = read("train-labels-idx1-ubyte.gz").astype(np.int32)
    y_test = read("t10k-labels-idx1-ubyte.gz").astype(np.int32)
    return Dataset("smnist", x_train, y_train, x_test, y_test, "classification", 10)


def load_sequential_cifar(directory: str | os.PathLike | None = None) -> Dataset:
    """Sequential CIFAR-10: each 32x32 colour image read pixel by pixel as 1024 steps of
    3 channels, (n, 1024, 3), normalised per channel; 50000/10000. Downloads 163 MB once."""
    archive = fetch(CIFAR_URL, CIFAR_MD5, directory)

    def read(members):
        images, labels = [], []
        with tarfile.open(archive, "r:gz") as tar:
            for member in members:
                x, y = read_cifar_binary(tar.extractfile(member).read())
                images.append(x)
                labels.append(y)
        x = np.concatenate(images).reshape(-1, 1024, 3) / 255.0
        return x, np.concatenate(labels).astype(np.int32)

    x_train, y_train = read(CIFAR_TRAIN)
    x_test, y_test = read(CIFAR_TEST)
    mean, std = x_train.mean(axis=(0, 1)), x_train.std(axis=(0, 1))
    x_train = ((x_train - mean) / std).astype(np.float32)
    x_test = ((x_test - mean) / std).astype(np.float32)
    return Dataset("scifar", x_train, y_train, x_test, y_test, "classification", 10)


# --- Registry and batching ------------------------------------------------------------------

DATASETS: dict[str, Callable[..., Dataset]] = {
    "mnist1d": load_mnist1d,
    "digits": load_digits,
    "digits_ar": load_digits_ar,
    "mnist1d_long": load_mnist1d_long,
    "smnist": load_sequential_mnist,
    "scifar": load_sequential_cifar,
}


DATASET_NEEDS: dict[str, str] = {"digits": "sklearn", "digits_ar": "sklearn"}
"""The module of the ``book`` extra each data set is generated with (the others need none)."""


def check_dataset_installed(name: str) -> None:
    """ImportError naming the extra to install if data set ``name`` needs a module of the
    ``book`` extra that is not installed (checked without importing it)."""
    module = DATASET_NEEDS.get(name)
    try:
        found = module is None or importlib.util.find_spec(module) is not None
    except ImportError:  # a finder that refuses the module
        found = False
    if not found:
        raise ImportError(f"data set {name!r} needs {module!r}, which is part of the book's "
                          'extra: pip install "annotated-ssm[book]" (or choose --dataset mnist1d, '
                          "mnist1d_long, smnist or scifar, which only need the core install).")


DATASET_TASKS: dict[str, str] = {name: "regression" if name == "digits_ar" else "classification"
                                 for name in DATASETS}
"""Each registered data set's task, known without loading it (to check options early)."""

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


def load_npz(path: str | os.PathLike) -> Dataset:
    """Your own data set, from a NumPy ``.npz`` file (``np.savez(path, x_train=…, …)``).

    The file holds ``x_train``, ``y_train``, ``x_test``, ``y_test`` with the shapes of
    :class:`Dataset`'s fields and, for sequences of different lengths padded (at the end)
    to one L, ``lengths_train`` and ``lengths_test``; ``n_classes`` is optional (default:
    the largest label + 1). The task follows ``y_train``: (n,) integer labels classify,
    (n, L, D) targets regress. The data set's name is the file's absolute path (what a run
    folder stores, so ``--resume`` finds the file again).
    """
    path = pathlib.Path(path).absolute()
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
        missing = [key for key in NPZ_KEYS if key not in arrays]
        unknown = sorted(set(arrays) - {*NPZ_KEYS, "lengths_train", "lengths_test", "n_classes"})
        check("it", arrays, not missing and not unknown, f"hold {', '.join(NPZ_KEYS)} (and may "
              f"hold lengths_train, lengths_test, n_classes)", f"missing {missing}, unknown {unknown}")
        y_train, y_test = arrays["y_train"], arrays["y_test"]
        task = "classification" if y_train.ndim == 1 else "regression"
        n_classes = None if task == "regression" else int(arrays["n_classes"]) if "n_classes" in \
            arrays else int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
        return Dataset(str(path), arrays["x_train"], y_train, arrays["x_test"], y_test, task,
                       n_classes, arrays.get("lengths_train"), arrays.get("lengths_test"))
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"dataset {str(path)!r} cannot be used: {error}") from None


def dataset_task(name: str) -> str:
    """The task of data set ``name`` (registered, or an .npz file: its ``y_train`` read)."""
    if str(name).endswith(".npz"):
        try:
            with np.load(name, allow_pickle=False) as stored:
                return "classification" if stored["y_train"].ndim == 1 else "regression"
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"dataset {str(name)!r} must be a NumPy .npz file holding "
                             f"{', '.join(NPZ_KEYS)}; reading its y_train failed: "
                             f"{error}") from None
    return DATASET_TASKS[name]


def load_dataset(name: str, **kwargs) -> Dataset:
    """The dataset registered under ``name`` (one of ``DATASETS``; kwargs go to its loader),
    or, for a name ending in ``.npz``, the data set in that file (:func:`load_npz`).

    Example (MNIST-1D, generated locally)::

        >>> from annotated_ssm.data import load_dataset
        >>> data = load_dataset("mnist1d", num_samples=100)
        >>> data
        Dataset('mnist1d': 80 train / 20 test, length 40, 1 channel(s), classification, 10 classes)
        >>> data.x_train.shape, data.y_train.dtype
        ((80, 40, 1), dtype('int32'))
    """
    if isinstance(name, (str, os.PathLike)) and str(name).endswith(".npz") and not kwargs:
        return load_npz(name)
    check_choice("dataset", name, DATASETS)
    loader = DATASETS[name]
    try:
        inspect.signature(loader).bind(**kwargs)
    except TypeError as error:
        raise ValueError(f"load_dataset({name!r}) does not take these options: {error}.") from error
    return loader(**kwargs)


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, *, seed: int | None = None,
            drop_last: bool = False, lengths: np.ndarray | None = None) -> Iterator[tuple]:
    """Yield (x, y) mini-batches along the first axis ((x, y, lengths) with ``lengths``).

    ``seed=None`` keeps the stored order (evaluation); an integer shuffles with
    ``np.random.default_rng(seed)``, so the same seed always gives the same batches.
    ``drop_last`` skips a final batch smaller than ``batch_size`` (training).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    check("y", y, len(y) == len(x), "have as many samples as x", f"{len(y)} (x has {len(x)})")
    order = np.arange(len(x)) if seed is None else np.random.default_rng(seed).permutation(len(x))
    stop = len(x) - batch_size + 1 if drop_last else len(x)
    for start in range(0, max(stop, 0), batch_size):
        index = order[start:start + batch_size]
        yield (x[index], y[index]) if lengths is None else (x[index], y[index], lengths[index])


def validation_split(x: np.ndarray, y: np.ndarray, fraction: float, *, seed: int = 0,
                     lengths: np.ndarray | None = None):
    """Hold out ``round(fraction × n)`` samples, chosen by a permutation seeded by ``seed``.

    Returns ``(x_train, y_train, x_val, y_val)`` (with ``lengths``, ``(x_train, y_train,
    lengths_train, x_val, y_val, lengths_val)``); the training part keeps the stored order
    of the samples left in it. ``fraction=0`` returns all of x, y and empty validation arrays.
    """
    check_real_in("fraction", fraction, 0.0, 1.0, closed_high=False)
    check("y", y, len(y) == len(x), "have as many samples as x", f"{len(y)} (x has {len(x)})")
    n_val = int(round(fraction * len(x)))
    held_out = np.zeros(len(x), bool)
    held_out[np.random.default_rng(seed).permutation(len(x))[:n_val]] = True
    if lengths is None:
        return x[~held_out], y[~held_out], x[held_out], y[held_out]
    return (x[~held_out], y[~held_out], lengths[~held_out], x[held_out], y[held_out],
            lengths[held_out])
