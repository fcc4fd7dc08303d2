"""Datasets: shapes, splits, determinism and errors; downloaders parsed from small files made
here in the real formats. The network is never touched: the files are put in the cache, or
pooch's HTTP downloader is replaced by one that serves bytes from memory (pooch's own cache,
checksum and temporary-file logic still runs)."""

import gzip
import hashlib
import io
import random
import socket
import sys
import tarfile

import numpy as np
import pooch
import pytest
import requests
from reference import message, run_examples

from annotated_ssm import data
from annotated_ssm.data import batches, load_dataset, read_cifar_binary, read_idx, validation_split
from annotated_ssm.mnist1d import make_mnist1d



@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a socket fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a test tried to use the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(pooch.HTTPDownloader, "__call__", refuse)


def test_mnist1d_generated_locally(no_network):
    np.random.seed(123)
    random.seed(123)
    before_np, before_py = np.random.get_state()[1].copy(), random.getstate()
    ds = load_dataset("mnist1d", num_samples=500)
    # the mnist1d package seeds numpy's global RNG; ours draws from its own
    np.testing.assert_array_equal(np.random.get_state()[1], before_np)
    assert random.getstate() == before_py
    assert ds.x_train.shape == (400, 40, 1) and ds.x_test.shape == (100, 40, 1)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert set(np.unique(ds.y_train)) == set(range(10)) and ds.n_classes == ds.n_outputs == 10
    assert ds.task == "classification" and ds.length == 40 and ds.channels == 1
    again = load_dataset("mnist1d", num_samples=500)
    np.testing.assert_array_equal(ds.x_train, again.x_train)
    other = load_dataset("mnist1d", num_samples=500, seed=1)
    assert not np.array_equal(ds.x_train, other.x_train)


@pytest.mark.parametrize("settings", [dict(num_samples=5000, seed=42),
                                      dict(num_samples=300, seed=7, max_translation=1,
                                           shear_scale=0, padding=[36, 72])])
def test_mnist1d_is_the_mnist1d_packages_data_bit_for_bit(settings):
    """The core's generator against the package it is taken from (in the test environment)."""
    mnist1d_data = pytest.importorskip("mnist1d.data")
    args = mnist1d_data.get_dataset_args()
    for key, value in settings.items():
        setattr(args, key, value)
    theirs, ours = mnist1d_data.make_dataset(args), make_mnist1d(**settings)
    for key in ("x", "y", "x_test", "y_test"):
        np.testing.assert_array_equal(ours[key], theirs[key])


def test_mnist1d_default_is_the_papers_split():
    ds = load_dataset("mnist1d")
    assert len(ds.x_train) == 4000 and len(ds.x_test) == 1000
    assert abs(float(ds.x_train.mean())) < 0.05 and abs(float(ds.x_train.std()) - 1) < 0.05


def test_digits_split_and_scaling(no_network):
    ds = load_dataset("digits")
    assert ds.x_train.shape == (1438, 64, 1) and ds.x_test.shape == (359, 64, 1)
    assert abs(float(ds.x_train.mean())) < 1e-5 and abs(float(ds.x_train.std()) - 1) < 1e-4
    # train and test are disjoint and together hold every image once
    from sklearn.datasets import load_digits

    images = load_digits().images.reshape(-1, 64)
    rows = {r.tobytes() for r in images}
    assert len(rows) == len(images)  # no duplicate images, so this check is meaningful
    ar = load_dataset("digits_ar")
    seen = [(p * 16).round().astype(images.dtype).tobytes()
            for p in np.concatenate([ar.y_train, ar.y_test]).reshape(-1, 64)]
    assert len(set(seen)) == len(images) and set(seen) == rows


def test_digits_ar_inputs_are_targets_shifted():
    rows = load_dataset("digits_ar")
    pixels = load_dataset("digits_ar", by="pixel")
    assert rows.task == "regression" and rows.n_outputs == 8 and rows.n_classes is None
    assert rows.x_train.shape == rows.y_train.shape == (1438, 8, 8)
    assert pixels.x_train.shape == pixels.y_train.shape == (1438, 64, 1) and pixels.n_outputs == 1
    for ds in (rows, pixels):
        np.testing.assert_array_equal(ds.x_train[:, 0], 0.0)
        np.testing.assert_array_equal(ds.x_train[:, 1:], ds.y_train[:, :-1])
        assert ds.y_train.min() >= 0 and ds.y_train.max() <= 1
    np.testing.assert_array_equal(rows.y_test.reshape(-1, 64), pixels.y_test[..., 0])
    with pytest.raises(ValueError, match=message("by", "column")):
        load_dataset("digits_ar", by="column")


def test_mnist1d_long_starts_with_the_digit():
    base = load_dataset("mnist1d", num_samples=200)
    ds = load_dataset("mnist1d_long", length=300, num_samples=200)
    assert ds.x_train.shape == (160, 300, 1) and ds.x_test.shape == (40, 300, 1)
    np.testing.assert_array_equal(ds.x_train[:, :40], base.x_train)
    np.testing.assert_array_equal(ds.y_test, base.y_test)
    tail = ds.x_train[:, 40:]
    assert abs(float(tail.std()) - 1.0) < 0.02 and abs(float(tail.mean())) < 0.02
    with pytest.raises(ValueError, match=message("length", 20)):
        load_dataset("mnist1d_long", length=20)


def test_unknown_dataset_lists_the_valid_ones():
    with pytest.raises(ValueError, match=message("dataset", "mnist", "mnist1d", "scifar")):
        load_dataset("mnist")


def test_batches_are_seeded_and_complete():
    x = np.arange(10)[:, None, None].astype(np.float32)
    y = np.arange(10)
    got = [yb for _, yb in batches(x, y, 4, seed=3)]
    assert [len(b) for b in got] == [4, 4, 2]
    assert sorted(np.concatenate(got)) == list(range(10))
    again = [yb for _, yb in batches(x, y, 4, seed=3)]
    assert all(np.array_equal(a, b) for a, b in zip(got, again))
    assert not np.array_equal(np.concatenate(got), np.arange(10))
    ordered = np.concatenate([yb for _, yb in batches(x, y, 4)])
    np.testing.assert_array_equal(ordered, np.arange(10))
    assert [len(b) for _, b in batches(x, y, 4, seed=0, drop_last=True)] == [4, 4]
    with pytest.raises(ValueError, match=message("batch_size", 0)):
        next(batches(x, y, 0))
    with pytest.raises(ValueError, match=message("x", "y", "10", "5")):
        next(batches(x, y[:5], 2))


# --- downloaders, on files written here in the real formats ---------------------------------

def idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, ">i4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def test_read_idx_roundtrip():
    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    np.testing.assert_array_equal(read_idx(idx_bytes(images)), images)
    labels = np.array([7, 2, 1], np.uint8)
    np.testing.assert_array_equal(read_idx(idx_bytes(labels)), labels)


def cifar_bytes(images: np.ndarray, labels: np.ndarray) -> bytes:
    """The CIFAR-10 binary record layout: label, then the red, green and blue planes."""
    planes = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    return np.concatenate([labels[:, None], planes], axis=1).astype(np.uint8).tobytes()


def test_read_cifar_binary():
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    labels = np.array([3, 0, 9, 5], np.uint8)
    got_images, got_labels = read_cifar_binary(cifar_bytes(images, labels))
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


def md5(blob: bytes) -> str:
    return hashlib.md5(blob).hexdigest()


def test_sequential_mnist_from_cached_files(tmp_path, monkeypatch, no_network):
    rng = np.random.default_rng(2)
    blobs = {
        "train-images-idx3-ubyte.gz": idx_bytes(rng.integers(0, 256, (6, 28, 28))),
        "train-labels-idx1-ubyte.gz": idx_bytes(np.array([0, 1, 2, 3, 4, 5])),
        "t10k-images-idx3-ubyte.gz": idx_bytes(rng.integers(0, 256, (2, 28, 28))),
        "t10k-labels-idx1-ubyte.gz": idx_bytes(np.array([9, 8])),
    }
    checksums = {}
    for name, blob in blobs.items():
        packed = gzip.compress(blob)
        (tmp_path / name).write_bytes(packed)
        checksums[name] = md5(packed)
    monkeypatch.setattr(data, "MNIST_FILES", checksums)
    monkeypatch.setenv("ANNOTATED_SSM_DATA", str(tmp_path))
    ds = load_dataset("smnist")
    assert ds.x_train.shape == (6, 784, 1) and ds.x_test.shape == (2, 784, 1)
    np.testing.assert_array_equal(ds.y_test, [9, 8])
    # pixel order: row by row
    raw = read_idx(blobs["train-images-idx3-ubyte.gz"]).reshape(6, 784) / 255.0
    standard = (raw - raw.mean()) / raw.std()
    np.testing.assert_allclose(ds.x_train[..., 0], standard, rtol=1e-5, atol=1e-5)


def test_sequential_cifar_from_cached_archive(tmp_path, monkeypatch, no_network):
    rng = np.random.default_rng(3)
    buffer = io.BytesIO()
    train_images = []
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in data.CIFAR_TRAIN + data.CIFAR_TEST:
            images = rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
            if member in data.CIFAR_TRAIN:
                train_images.append(images)
            blob = cifar_bytes(images, np.array([1, 2], np.uint8))
            info = tarfile.TarInfo(member)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    archive = buffer.getvalue()
    (tmp_path / "cifar-10-binary.tar.gz").write_bytes(archive)
    monkeypatch.setattr(data, "CIFAR_MD5", md5(archive))
    ds = data.load_sequential_cifar(tmp_path)
    assert ds.x_train.shape == (10, 1024, 3) and ds.x_test.shape == (2, 1024, 3)
    np.testing.assert_allclose(ds.x_train.mean(axis=(0, 1)), 0, atol=1e-5)
    np.testing.assert_allclose(ds.x_train.std(axis=(0, 1)), 1, atol=1e-4)
    # step t of a sequence is pixel (t // 32, t % 32) with its 3 colours
    first = np.concatenate(train_images)[0] / 255.0
    raw = np.concatenate(train_images).reshape(10, 1024, 3) / 255.0
    expected = (first.reshape(1024, 3) - raw.mean(axis=(0, 1))) / raw.std(axis=(0, 1))
    np.testing.assert_allclose(ds.x_train[0], expected, rtol=1e-5, atol=1e-5)


def serve(monkeypatch, files: dict[str, bytes], calls: list):
    """Replace pooch's HTTP download by serving ``files`` (url → bytes) from memory."""

    def download(self, url, output_file, pooch_instance, check_only=False):
        calls.append(url)
        if url not in files:
            raise requests.exceptions.ConnectionError(f"Failed to resolve '{url}' (offline)")
        with open(output_file, "wb") as out:
            out.write(files[url])

    monkeypatch.setattr(pooch.HTTPDownloader, "__call__", download)


def test_fetch_downloads_once_and_verifies(tmp_path, monkeypatch):
    calls = []
    serve(monkeypatch, {"https://example.invalid/x/file.bin": b"payload",
                        "https://example.invalid/x/other.bin": b"tampered"}, calls)
    path = data.fetch("https://example.invalid/x/file.bin", md5(b"payload"), tmp_path)
    assert path == tmp_path / "file.bin" and path.read_bytes() == b"payload"
    data.fetch("https://example.invalid/x/file.bin", md5(b"payload"), tmp_path)
    assert len(calls) == 1  # the second call used the cache
    with pytest.raises(OSError, match=message("other.bin", "0" * 32, "deleted")):
        data.fetch("https://example.invalid/x/other.bin", "0" * 32, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]  # the bad download is gone
    # a cached file whose checksum no longer matches is downloaded again
    path.write_bytes(b"corrupted")
    assert data.fetch("https://example.invalid/x/file.bin", md5(b"payload"), tmp_path).read_bytes() == b"payload"
    assert len(calls) == 3


def test_fetch_uses_the_cache_folder_from_the_environment(tmp_path, monkeypatch):
    calls = []
    serve(monkeypatch, {"https://example.invalid/a.bin": b"abc"}, calls)
    monkeypatch.setenv("ANNOTATED_SSM_DATA", str(tmp_path / "cache"))
    assert data.cache_dir() == tmp_path / "cache"
    assert data.fetch("https://example.invalid/a.bin", md5(b"abc")) == tmp_path / "cache" / "a.bin"
    monkeypatch.delenv("ANNOTATED_SSM_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "xdg" / "annotated_ssm"


def test_fetch_offline_says_what_to_do(tmp_path, monkeypatch):
    serve(monkeypatch, {}, [])
    with pytest.raises(OSError, match=r"offline\?.*put it at .*file.bin \(MD5 abc\).*mnist1d"):
        data.fetch("https://example.invalid/file.bin", "abc", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_validation_split_is_seeded_disjoint_and_complete():
    x = np.arange(20)[:, None, None].astype(np.float32)
    y = np.arange(20)
    x_train, y_train, x_val, y_val = validation_split(x, y, 0.25, seed=1)
    assert len(y_val) == 5 and len(y_train) == 15
    assert sorted(np.concatenate([y_train, y_val])) == list(range(20))
    assert np.all(np.diff(y_train) > 0)  # the training part keeps the stored order
    np.testing.assert_array_equal(x_val[:, 0, 0], y_val)
    np.testing.assert_array_equal(validation_split(x, y, 0.25, seed=1)[3], y_val)
    assert not np.array_equal(np.sort(validation_split(x, y, 0.25, seed=2)[3]), np.sort(y_val))
    assert len(validation_split(x, y, 0.0)[3]) == 0
    with pytest.raises(ValueError, match=message("fraction", 1.0)):
        validation_split(x, y, 1.0)


def test_a_book_data_set_without_the_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # found nowhere, as if not installed
    with pytest.raises(ImportError, match=r'needs .sklearn.*pip install "annotated-ssm\[book\]"'):
        load_dataset("digits")
    monkeypatch.setitem(sys.modules, "mnist1d", None)  # the core generates MNIST-1D itself
    assert len(load_dataset("mnist1d", num_samples=100).x_train) == 80


def test_mnist1d_generator_options():
    plain = load_dataset("mnist1d", num_samples=100)
    clean = load_dataset("mnist1d", num_samples=100, max_translation=1, shear_scale=0, corr_noise_scale=0)
    assert clean.x_train.shape == plain.x_train.shape and not np.array_equal(clean.x_train, plain.x_train)
    with pytest.raises(ValueError, match=message("mnist1d", "url")):
        load_dataset("mnist1d", num_samples=100, url="https://example.invalid")


def test_load_dataset_example_runs():
    """load_dataset's docstring example runs as a doctest, as a reader would type it."""
    run_examples(load_dataset, "load_dataset")
