"""One prefill case for ncu: builds the inputs (rawindexer.bench's generators and windows), calls the kernel
``--calls`` times (the first warms up: profile with --launch-skip 1 --launch-count 1 and a kernel-name filter),
synchronises. ``--impl ours``: the public call through a bound ``rawindexer.Indexer`` (the shipped build and its
"auto" choice; RAWINDEXER_KERNEL_DIR may name another build), its kernel symbol printed; ``--impl dg``: DeepGEMM's
fp8_mqa_logits (rawindexer.bench.deepgemm_fn; JIT-compiled at first use, so run it once outside ncu first).

    ncu --clock-control none -k regex:_tmasb2$ --launch-skip 1 --launch-count 1 ... \\
        python3 bench/prefill_profile.py --impl ours --rows 4096 --keys 4096 --window multi_req --heads 64 --no-clean
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", choices=("ours", "dg"), default="ours")
    ap.add_argument("--rows", type=int, default=4096, help="M, query rows")
    ap.add_argument("--keys", type=int, default=32768, help="N, keys")
    ap.add_argument("--window", choices=("causal", "multi_req"), default="causal")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--clean", action=argparse.BooleanOptionalAction, default=True, help="clean_logits")
    ap.add_argument("--calls", type=int, default=2)
    a = ap.parse_args()
    import torch

    import rawindexer
    from rawindexer.bench import deepgemm_fn, make_inputs, windows_for

    ks_np, ke_np = windows_for(a.window, a.rows, a.keys)
    args = make_inputs(a.rows, a.keys, a.heads, a.head_dim, ks_np, ke_np, seed=3)
    if a.impl == "dg":
        dg = deepgemm_fn()
        if dg is None:
            return 1
        call = lambda: dg(*args, a.clean)  # noqa: E731
        what = "deep_gemm.fp8_mqa_logits"
    else:
        out = torch.empty((a.rows, a.keys), device="cuda", dtype=torch.float32)
        call = rawindexer.Indexer(a.heads, a.head_dim).bind(*args, clean_logits=a.clean, out=out)
        what = f"{call.template.symbol} grid {call.template.grid} {call.template.config}"
    torch.cuda.synchronize()
    for _ in range(a.calls):
        call()
    torch.cuda.synchronize()
    print(f"profiled {what}: {a.rows} x {a.keys} {a.window} H={a.heads} D={a.head_dim} clean={int(a.clean)}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
