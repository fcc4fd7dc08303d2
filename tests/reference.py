"""Plain float64 references the fast code is tested against: NumPy/SciPy only, no JAX,
written for clarity, not speed; and the tests' two shared measures: the relative error, and
``message(...)``, what an error test asks of a message."""

from __future__ import annotations

import doctest
import re

import numpy as np
import scipy.linalg


def relative_error(actual, expected) -> float:
    """max |actual - expected| / max |expected|, in float64 (the book's error measure, here
    so that the numerics tests need no book extra). A NaN in ``actual`` gives NaN, which
    fails every ``< tol``; an all-zero or non-finite ``expected`` is an error."""
    actual = np.asarray(actual).astype(np.complex128 if np.iscomplexobj(actual) else np.float64)
    expected = np.asarray(expected).astype(np.complex128 if np.iscomplexobj(expected) else np.float64)
    scale = np.max(np.abs(expected))
    if not np.isfinite(scale) or scale == 0:
        raise ValueError(f"expected must be finite and not all zero; its largest entry is {scale}.")
    return float(np.max(np.abs(actual - expected)) / scale)


def message(*parts) -> str:
    """A ``pytest.raises(match=...)`` pattern: each part (the argument's name, the offending
    value) appears somewhere in the message, not the sentence around them. A string part is
    matched as written, anything else as its repr (``1e-50``, ``(3,)``)."""
    return "(?s)" + "".join(f"(?=.*{re.escape(p if isinstance(p, str) else repr(p))})" for p in parts)


def run_examples(obj, name: str) -> dict:
    """Run the ``>>>`` examples of ``obj``'s docstring (doctest, as a reader would type them),
    assert that they all pass, and return the namespace they leave (the classes they define)."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert tests and tests[0].examples, f"{name} has no examples"
    runner.run(tests[0], clear_globs=False)
    assert runner.summarize(verbose=False).failed == 0, f"an example of {name} failed"
    return tests[0].globs


def discretize_dense(A, B, step, method):
    """Dense float64 discretisation (A (N, N), B (N,) or (N, M), scalar step)."""
    A, B = np.asarray(A), np.asarray(B)
    A = A.astype(np.result_type(A, np.float64))
    B = B.astype(np.result_type(B, np.float64))
    N = A.shape[0]
    eye = np.eye(N)
    if method == "euler":
        return eye + step * A, step * B
    if method == "bilinear":
        left = eye - step / 2 * A
        return np.linalg.solve(left, eye + step / 2 * A), np.linalg.solve(left, step * B)
    if method == "zoh":
        A_bar = scipy.linalg.expm(step * A)
        return A_bar, np.linalg.solve(A, (A_bar - eye) @ B)
    raise ValueError(method)


def direct_causal_conv(u, K):
    """y_ℓ = Σ_{j≤ℓ} K_j u_{ℓ-j} by direct summation, over the last axis."""
    u = np.asarray(u, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    L = u.shape[-1]
    y = np.zeros(np.broadcast_shapes(u.shape, K.shape))
    for ell in range(L):
        y[..., ell] = np.sum(K[..., : ell + 1] * u[..., ell::-1], axis=-1)
    return y


def recurrence(A_bar, B_bar, C, u, D=0.0):
    """y_ℓ = C x_ℓ + D u_ℓ with x_ℓ = Ā x_{ℓ-1} + B̄ u_ℓ, x_{-1} = 0 (SISO, dense or diagonal Ā)."""
    A_bar, B_bar, C = (np.asarray(a) for a in (A_bar, B_bar, C))
    A_bar, B_bar, C = (a.astype(np.result_type(a, np.float64)) for a in (A_bar, B_bar, C))
    x = np.zeros(B_bar.shape, dtype=np.result_type(A_bar, B_bar, C))
    y = []
    for u_l in np.asarray(u, dtype=np.float64):
        x = (A_bar @ x if A_bar.ndim == 2 else A_bar * x) + B_bar * u_l
        y.append(C @ x + D * u_l)
    return np.array(y)
