"""Window generators: the (cu_seqlen_ks, cu_seqlen_ke) pairs the indexer sees at a prefill chunk.

Each returns two int32 arrays of length M (end exclusive). The modes are those of the seed's sweep
(shared/seeds, NOTES section 1), written here from their description:

* ``causal``     one request, ks = 0, ke = row + (N - M) (+1 with ``diagonal=True``, as vLLM builds it;
                 without it, as the public aiter/DeepGEMM tests do, row 0 of a square chunk is empty)
* ``cp``         context parallel: two halves of the rows with different diagonals (N % M == 0, M even)
* ``misaligned`` starts off tile boundaries, each window about N/3 wide
* ``empty``      every third row has a negative end, every third a zero end (or an end below its start),
                 interleaved with normal causal rows
* ``past_end``   every other row has both bounds beyond N
* ``multi_req``  up to four requests packed into the chunk, each owning a run of rows and its own slice
                 of K, causal within the slice (ks jumps at every request boundary)
"""
from __future__ import annotations

import numpy as np

WINDOW_MODES = ("causal", "cp", "misaligned", "empty", "past_end", "multi_req")


class WindowNotApplicable(ValueError):
    """The mode's preconditions do not hold for this (M, N); sweeps skip such cases."""


def _as_i32(ks: np.ndarray, ke: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(ks, dtype=np.int32), np.ascontiguousarray(ke, dtype=np.int32)


def causal(M: int, N: int, diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(M, dtype=np.int64)
    return _as_i32(np.zeros(M), rows + (N - M) + int(diagonal))


def context_parallel(M: int, N: int, diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    if M % 2 or N % M or M < 2:
        raise WindowNotApplicable(f"cp needs an even M dividing N, got M={M}, N={N}")
    half = M // 2
    rows = np.arange(M, dtype=np.int64)
    # First half of the rows ends its diagonal at N/2, the second at N.
    ke = np.where(rows < half, N // 2 - half + rows, N - M + rows) + int(diagonal)
    return _as_i32(np.zeros(M), ke)


def misaligned(M: int, N: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    width = max(1, N // 3)
    ks = rng.integers(0, max(1, N - width + 1), size=M)
    ks = ks | 1 if N > 2 else ks  # odd starts: never on a 32-token tile boundary
    ke = ks + np.maximum(1, width + rng.integers(-width // 4 - 1, width // 4 + 1, size=M))
    return _as_i32(ks, np.minimum(ke, N))


def empty(M: int, N: int, rng: np.random.Generator, diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    ks, ke = causal(M, N, diagonal)
    ks, ke = ks.astype(np.int64), ke.astype(np.int64)
    rows = np.arange(M)
    negative = rows % 3 == 0
    ke[negative] = -rng.integers(1, 100, size=negative.sum())
    zero = rows % 3 == 1
    ke[zero] = 0
    # Some of the zero-end rows instead get an end below a positive start.
    inverted = zero & (rng.random(M) < 0.5) & (N > 2)
    ks[inverted] = rng.integers(2, max(3, N), size=inverted.sum())
    ke[inverted] = ks[inverted] - 1
    return _as_i32(ks, ke)


def past_end(M: int, N: int, rng: np.random.Generator, diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    ks, ke = causal(M, N, diagonal)
    ks, ke = ks.astype(np.int64), ke.astype(np.int64)
    beyond = np.arange(M) % 2 == 0
    ks[beyond] = N + rng.integers(0, 64, size=beyond.sum())
    ke[beyond] = ks[beyond] + rng.integers(1, 64, size=beyond.sum())
    return _as_i32(ks, ke)


def ragged(M: int, N: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Unordered random windows of up to N/2 keys with about a fifth of the rows empty (an end at or below the
    start), starts below 0 and windows past N mixed in: the inputs the host models of the device-side schedules
    (dispatch/sm90_balanced.py, dispatch/sm90_qshared.py) must clip and cover. Raw int64, not clipped."""
    ks = rng.integers(-50, N + 50, size=M)
    ke = ks + rng.integers(-10, N // 2 + 1, size=M)
    gone = rng.random(M) < 0.2
    ke[gone] = ks[gone] - rng.integers(0, 3, size=int(gone.sum()))
    return ks, ke


def multi_req(M: int, N: int, requests: int = 4, diagonal: bool = True) -> tuple[np.ndarray, np.ndarray]:
    requests = min(requests, M, N)
    rows_per = M // requests if requests else 0
    slice_len = N // requests if requests else 0
    if requests < 2 or rows_per < 1 or slice_len < rows_per:
        raise WindowNotApplicable(f"multi_req needs >= 2 requests of rows <= keys, got M={M}, N={N}")
    ks = np.empty(M, dtype=np.int64)
    ke = np.empty(M, dtype=np.int64)
    for r in range(requests):
        rows = slice(r * rows_per, M if r == requests - 1 else (r + 1) * rows_per)
        n_rows = rows.stop - rows.start
        start = r * slice_len
        length = N - start if r == requests - 1 else slice_len
        local = np.arange(n_rows)
        ks[rows] = start
        ke[rows] = start + (length - n_rows) + local + int(diagonal)
    return _as_i32(ks, ke)


def make_windows(mode: str, M: int, N: int, rng: np.random.Generator | None = None,
                 diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Windows of one of :data:`WINDOW_MODES`. Raises :class:`WindowNotApplicable` when the mode's
    preconditions fail (the sweep then skips the case, as the seed's does)."""
    rng = rng if rng is not None else np.random.default_rng()
    if mode == "causal":
        return causal(M, N, diagonal)
    if mode == "cp":
        return context_parallel(M, N, diagonal)
    if mode == "misaligned":
        return misaligned(M, N, rng)
    if mode == "empty":
        return empty(M, N, rng, diagonal)
    if mode == "past_end":
        return past_end(M, N, rng, diagonal)
    if mode == "multi_req":
        return multi_req(M, N, diagonal=True)
    raise ValueError(f"mode: expected one of {WINDOW_MODES}, got {mode!r}")


def clamp_windows(ks: np.ndarray, ke: np.ndarray, N: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's semantics: [ks, ke) clamped to [0, N), empty (start == end) when ke <= ks."""
    s = np.clip(np.asarray(ks, dtype=np.int64), 0, N)
    e = np.clip(np.asarray(ke, dtype=np.int64), 0, N)
    return s, np.maximum(e, s)


def window_mask(ks: np.ndarray, ke: np.ndarray, N: int) -> np.ndarray:
    """bool [M, N]: True inside each row's clamped window."""
    s, e = clamp_windows(ks, ke, N)
    cols = np.arange(N)
    return (cols[None, :] >= s[:, None]) & (cols[None, :] < e[:, None])
