"""Benchmark of fp8_paged_mqa_logits (decode) on a CUDA GPU: the sm_90a twin against DeepGEMM's
``fp8_paged_mqa_logits`` where it imports, and against the card's read bandwidth measured in the same run.

    python -m rawindexer.bench_paged [--quick] [--block-size 64] [--log FILE]
    python -m rawindexer.bench --paged [the same options]

Grid: B in {1, 8, 64, 256} x context in {4096, 32768, 131072} x next_n {1, 2} x H {32, 64}, D = 128, every
sequence at the full context, physical blocks shuffled. Times are GPU times per call from a CUDA graph of
``REPS`` calls (host cost excluded; both kernels captured the same way), each timing after ``--settle`` s
(default 1) of idle so every design and DeepGEMM start from the same power state (rawindexer.bench.SETTLE_S), then
``--warm`` s (default 1.5) of untimed replays so the timing sees the steady clock a serving loop runs at (WARM_S).
"cache GB/s" = bytes of the fused cache the call must read (tokens x (D + 4)) / time; "% read bw" = that / the
card's read bandwidth (a torch sum over 4 GiB, same run). Cases whose cache fits twice in L2 (50 MB) are
marked L2: their bandwidth is not HBM's. "loop us" = the same call made eagerly back to back right after the
timing (host included; rawindexer.bench.time_loop, the prefill bench's (a): CUDA events around runs of ~3 ms of
device time, median of 5): what a serving loop that does not replay a graph meets; it reads ~ "ours us" when the host
path hides behind the kernel. "diff" = calc_diff(ours, DeepGEMM) over the valid columns (both from the same
inputs). --ragged: each case's context lengths drawn uniformly from [context / 16, context] (seeded per case, the
same for both kernels), as a serving batch mixes them; the byte counts are then those of the drawn lengths.
--batches, --contexts, --next-n and --heads narrow or widen the grid (next_n up to 4, H 128).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .bench import SETTLE_S, loop_calls, settle, time_loop

REPS = 20
L2_BYTES = 50 * 1024 * 1024
GRID_B = (1, 8, 64, 256)
GRID_CONTEXT = (4096, 32768, 131072)
GRID_NEXT_N = (1, 2)
GRID_HEADS = (32, 64)
HEAD_DIM = 128
#: the designs timed by default: "auto", what a call without ``variant`` runs (rawindexer/dispatch/paged_sm90.py: "tma",
#: or "tma4" at next_n x H = 96 / 128 on large batches); --designs names others (rawindexer.paged_kernels: f16, fp8,
#: tma, tma4) to time side by side
DESIGNS = ("auto",)


def read_bandwidth(torch, gib: int = 4) -> float:
    """Bytes per second of a torch sum over ``gib`` GiB (best of 5)."""
    x = torch.ones(gib * (1 << 30) // 4, dtype=torch.float32, device="cuda")
    x.sum()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.sum()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    del x
    return gib * (1 << 30) / best


#: seconds of back-to-back replays between the idle and the timed replays (--warm). When load starts after idle the
#: H200 runs its first ~0.1-0.3 s at up to 1980 MHz; then its power cap (700 W, nvidia-smi reason 0x4) holds the SM
#: clock at ~1300-1600 MHz for as long as the load lasts (docs/results/session17/c4/smi.csv; docs/PAGED.md, session
#: 17). Five replays timed right after the idle measured that first part (256 x 131072 H 64 next_n 2 read 1408 and
#: 1236 us for one kernel); timings after 0.5 s of load read 3-5% slower than after 1.5 s. A serving loop that keeps
#: the card busy runs at the capped clock, so the timing starts after 1.5 s of load.
WARM_S = 1.5


def graph_time(torch, fn, reps: int = REPS, settle_s: float = SETTLE_S, warm_s: float = WARM_S) -> float:
    """Seconds per call of ``fn`` replayed from a CUDA graph of ``reps`` calls (median of 5 replays), the replays
    after ``settle_s`` s of idle and then ``warm_s`` s of untimed replays."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(reps):
            fn()
    graph.replay()
    settle(settle_s)
    warm_until = time.perf_counter() + warm_s
    while time.perf_counter() < warm_until:
        graph.replay()
        torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return sorted(times)[len(times) // 2]


def make_cache(torch, B: int, context: int, block_size: int):
    """Random fp8 keys (no NaN codes), positive scales, shuffled physical blocks, ``context`` tokens each."""
    dev = "cuda"
    blocks_per_seq = -(-context // block_size)
    num_blocks = B * blocks_per_seq
    kv = torch.empty((num_blocks, block_size * (HEAD_DIM + 4)), dtype=torch.uint8, device=dev)
    chunk = max(1, (256 << 20) // (block_size * HEAD_DIM))
    for i in range(0, num_blocks, chunk):
        n = min(chunk, num_blocks - i)
        keys = torch.randn((n, block_size * HEAD_DIM), device=dev).to(torch.float8_e4m3fn).view(torch.uint8)
        kv[i:i + n, :block_size * HEAD_DIM] = keys
        scales = torch.rand((n, block_size), device=dev) * 0.02 + 0.001
        kv[i:i + n, block_size * HEAD_DIM:] = scales.view(torch.uint8)
    kv_cache = kv.view(num_blocks, block_size, 1, HEAD_DIM + 4)
    block_table = torch.randperm(num_blocks, device=dev, dtype=torch.int32).view(B, blocks_per_seq)
    return kv_cache, block_table


def ragged_lengths(B: int, context: int, next_n: int):
    """--ragged: B context lengths uniform in [max(context / 16, next_n), context], seeded by the case (every kernel
    timed on it sees the same ones); int32 numpy [B]."""
    import numpy as np
    rng = np.random.default_rng(B * 31 + context + next_n)
    return rng.integers(max(context // 16, next_n), context + 1, B).astype(np.int32)


def cache_tokens(B: int, context: int, next_n: int, ragged: bool = False) -> int:
    """Tokens of the cache a call reads: B x context, or the sum of the case's ragged_lengths."""
    return int(ragged_lengths(B, context, next_n).astype("int64").sum()) if ragged else B * context


def make_queries(torch, B: int, context: int, next_n: int, heads: int, ragged: bool = False):
    """q [B, next_n, H, D] e4m3, weights [B next_n, H] f32, context lengths 1-D [B] and 2-D [B, next_n] int32 (every
    sequence at `context`, or ragged_lengths)."""
    dev = "cuda"
    q = torch.randn((B, next_n, heads, HEAD_DIM), device=dev).to(torch.float8_e4m3fn)
    weights = torch.randn((B * next_n, heads), device=dev, dtype=torch.float32)
    lens_1d = (torch.from_numpy(ragged_lengths(B, context, next_n)).to(dev) if ragged
               else torch.full((B,), context, dtype=torch.int32, device=dev))
    lens_2d = (lens_1d[:, None] - next_n + 1 + torch.arange(next_n, device=dev, dtype=torch.int32)[None, :]).contiguous()
    return q, weights, lens_1d, lens_2d


def deepgemm_call(torch, q, kv_cache, weights, lens_2d, block_table, context: int, block_size: int):
    """A zero-argument callable running DeepGEMM's fp8_paged_mqa_logits, or (None, reason)."""
    try:
        import deep_gemm
    except Exception as exc:  # noqa: BLE001 - any import failure means "no alternative here"
        return None, f"deep_gemm does not import ({type(exc).__name__}: {exc})"
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    try:
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens_2d, block_size, num_sms)
    except TypeError:
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens_2d, num_sms)

    def call():
        return deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, lens_2d, block_table, meta, context,
                                              clean_logits=False)
    try:
        call()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        torch.cuda.synchronize()  # a fault of what it launched before refusing is reported here, as DeepGEMM's
        return None, f"deep_gemm.fp8_paged_mqa_logits failed ({type(exc).__name__}: {str(exc)[:120]})"
    return call, ""


def loop_time(fn, device_s: float) -> float:
    """Seconds per call of ``fn`` called eagerly back to back, host included (the prefill bench's (a): runs of
    enough calls for ~3 ms of device time, given the call's ``device_s``)."""
    return time_loop(lambda _: fn(), sets=1, reps=loop_calls(20, device_s * 1e6)) / 1e6


def design_label(design: str, B: int, context: int, next_n: int, heads: int, block_size: int) -> str:
    """``design``, and for "auto" the design it runs on this case (the sm_90a family's own choice)."""
    if design != "auto":
        return design
    from .dispatch.paged_gfx950 import PagedProblem
    from .paged import _family
    blocks = -(-context // block_size)
    problem = PagedProblem(B, next_n, heads, HEAD_DIM, block_size, context, blocks, context, False, False,
                           num_blocks=B * blocks)
    return f"auto: {_family('sm_90a').resolve(heads, HEAD_DIM, block_size, design, problem)}"


def calc_diff(torch, x, y) -> float:
    x, y = x.double(), y.double()
    den = (x * x + y * y).sum()
    return float(1 - 2 * (x * y).sum() / den) if float(den) > 0 else 0.0


def host_cost(torch, rawindexer, block_size: int, calls: int = 2000) -> list[str]:
    """Wall time per call of back-to-back eager calls (B=8, context 4096, next_n 1, H 64): the public function
    and the PagedIndexer (torch attributes read, cached description looked up, the current stream read,
    launch), and the bound launch (prepare_paged_mqa_logits: the current stream read, launch)."""
    B, context = 8, 4096
    kv_cache, table = make_cache(torch, B, context, block_size)
    q, weights, lens_1d, _ = make_queries(torch, B, context, 1, 64)
    out = torch.empty((B, context), dtype=torch.float32, device="cuda")
    q_u8 = q.view(torch.uint8)
    args = (q_u8, kv_cache, weights, lens_1d, table, context)
    prepared = rawindexer.prepare_paged_mqa_logits(*args, out=out)
    result = []
    decode = rawindexer.PagedIndexer(64, HEAD_DIM)
    for name, fn in (("fp8_paged_mqa_logits", lambda: rawindexer.fp8_paged_mqa_logits(*args, out=out)),
                     ("PagedIndexer(...)(...)", lambda: decode(*args, out=out)),
                     ("prepare_paged_mqa_logits(...)()", prepared)):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        result.append(f"# host cost per eager call, {name}: {(time.perf_counter() - t0) / calls * 1e6:.1f} us "
                      f"(B={B}, context {context}, {calls} calls back to back, includes the GPU time when it is longer)")
        print(result[-1], flush=True)
    return result


def run(quick: bool, block_size: int, log: Path | None, designs: tuple[str, ...] = DESIGNS,
        batches: tuple[int, ...] = GRID_B, settle_s: float = SETTLE_S, ragged: bool = False,
        warm_s: float = WARM_S, contexts: tuple[int, ...] = GRID_CONTEXT, next_ns: tuple[int, ...] = GRID_NEXT_N,
        heads_list: tuple[int, ...] = GRID_HEADS) -> int:
    import torch

    import rawindexer

    bw = read_bandwidth(torch)
    name = torch.cuda.get_device_name(0)
    lines = [f"# fp8_paged_mqa_logits on {name}: read bandwidth (torch sum, 4 GiB) {bw / 1e12:.2f} TB/s; "
             f"block_size {block_size}, D {HEAD_DIM}, GPU time per call from CUDA graphs of {REPS} calls, "
             f"each timing after {settle_s:g} s of idle and {warm_s:g} s of untimed replays"
             + ("; ragged lengths (uniform in [context / 16, context])" if ragged else ""),
             "| B | context | next_n | H | design | ours us | cache GB/s | % read bw | DeepGEMM us | ours / DG "
             "| loop us | DG loop us | diff | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    shapes = [(b, c) for b in batches for c in contexts]
    if quick:
        shapes = [(b, c) for (b, c) in shapes if b in (1, 64) and c != 131072]
    dg_note_printed = False
    for B, context in shapes:
        kv_cache, table = make_cache(torch, B, context, block_size)
        for next_n in next_ns:
            cache_bytes = cache_tokens(B, context, next_n, ragged) * (HEAD_DIM + 4)
            note = "L2" if cache_bytes * 2 <= L2_BYTES else ""
            for heads in heads_list:
                if quick and heads != 64:
                    continue
                q, weights, lens_1d, lens_2d = make_queries(torch, B, context, next_n, heads, ragged)
                out = torch.empty((B * next_n, context), dtype=torch.float32, device="cuda")
                q_u8 = q.view(torch.uint8)
                dg, reason = deepgemm_call(torch, q, kv_cache, weights, lens_2d, table, context, block_size)
                t_dg, loop_dg, ref = float("nan"), float("nan"), None
                if dg is None:
                    if not dg_note_printed:
                        print(f"# alternative: {reason}", flush=True)
                        lines.append(f"# alternative: {reason}")
                        dg_note_printed = True
                else:
                    t_dg = graph_time(torch, dg, settle_s=settle_s, warm_s=warm_s)
                    loop_dg = loop_time(dg, t_dg)
                    ref = dg().float()
                for design in designs:
                    ours = lambda: rawindexer.fp8_paged_mqa_logits(  # noqa: E731
                        q_u8, kv_cache, weights, lens_1d, table, context, clean_logits=False, out=out, variant=design)
                    t_ours = graph_time(torch, ours, settle_s=settle_s, warm_s=warm_s)
                    loop_ours = loop_time(ours, t_ours)
                    diff = float("nan")
                    if ref is not None:
                        ours()
                        torch.cuda.synchronize()
                        valid = torch.arange(context, device="cuda")[None, :] < lens_2d.reshape(-1, 1)
                        diff = calc_diff(torch, torch.where(valid, out, 0), torch.where(valid, ref, 0))
                    label = design_label(design, B, context, next_n, heads, block_size)
                    row = (f"| {B} | {context} | {next_n} | {heads} | {label} | {t_ours * 1e6:.1f} | "
                           f"{cache_bytes / t_ours / 1e9:.0f} | {100 * cache_bytes / t_ours / bw:.0f}% | "
                           f"{t_dg * 1e6:.1f} | {t_ours / t_dg:.2f} | {loop_ours * 1e6:.1f} | {loop_dg * 1e6:.1f} | "
                           f"{diff:.1e} | {note} |")
                    lines.append(row)
                    print(row, flush=True)
                del ref
                del q, weights, lens_1d, lens_2d, out
        del kv_cache, table
        torch.cuda.empty_cache()
    lines += host_cost(torch, rawindexer, block_size)
    if log:
        log.write_text("\n".join(lines) + "\n")
    return 0


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rawindexer.bench_paged", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="B in {1, 64}, context < 131072, H = 64")
    parser.add_argument("--block-size", type=int, default=64, choices=(1, 16, 64))
    parser.add_argument("--log", type=Path)
    parser.add_argument("--designs", "--variants", default=",".join(DESIGNS),
                        help=f"designs timed, default {','.join(DESIGNS)} (--variants: its older name)")
    parser.add_argument("--settle", type=float, default=SETTLE_S,
                        help=f"seconds of idle before each timing (default {SETTLE_S}; 0: none)")
    parser.add_argument("--warm", type=float, default=WARM_S,
                        help=f"seconds of untimed replays between the idle and the timing (default {WARM_S}; 0: none)")
    parser.add_argument("--batches", default=",".join(map(str, GRID_B)), help="B values, in the order run")
    parser.add_argument("--contexts", default=",".join(map(str, GRID_CONTEXT)), help="context lengths, in the order run")
    parser.add_argument("--next-n", default=",".join(map(str, GRID_NEXT_N)), help="next_n values (1-4)")
    parser.add_argument("--heads", default=",".join(map(str, GRID_HEADS)), help="head counts (32, 64, 128)")
    parser.add_argument("--ragged", action="store_true",
                        help="context lengths uniform in [context / 16, context] instead of all at context")
    args = parser.parse_args(argv)
    t0 = time.time()
    rc = run(args.quick, args.block_size, args.log, tuple(args.designs.split(",")),
             ints(args.batches), args.settle, args.ragged, args.warm, ints(args.contexts), ints(args.next_n),
             ints(args.heads))
    print(f"# {time.time() - t0:.0f} s", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
