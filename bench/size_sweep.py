#!/usr/bin/env python3
"""Sizing sweep: the recorder's cost and drops against its wakeup threshold and block size.

  size_sweep.py --build DIR [--path batch|single] [--rate R] [--step-s S] [--repeat N]
                [--wakeup-kib K1,K2,...] [--block-events B1,B2,...]

At one paced rate (default: batch 20 M/s, single 0.5 M/s), every pair of
`record --wakeup-kib` and `--block-events` runs N times (interleaved, so host
drift spreads over all pairs) for S seconds each. Per pair it prints the drops
and the median recorder CPU s per M events. The defaults in cmd_record.cpp were
chosen from this output (docs/record.md); figures only, nothing passes or fails.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zero_drop import run_step  # noqa: E402

DEFAULT_RATE = {"batch": 20e6, "single": 0.5e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--path", choices=["batch", "single"], default="batch")
    ap.add_argument("--rate", type=float)
    ap.add_argument("--step-s", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wakeup-kib", default="64,256,1024,4096,8192")
    ap.add_argument("--block-events", default="4096,16384,65536")
    args = ap.parse_args()
    rate = args.rate or DEFAULT_RATE[args.path]
    pairs = [(int(w), int(b)) for w in args.wakeup_kib.split(",") for b in args.block_events.split(",")]
    runs = {p: [] for p in pairs}
    cptrace = os.path.join(args.build, "cptrace")
    with tempfile.TemporaryDirectory(prefix="cptrace-size-sweep.") as tmp:
        for rep in range(args.repeat):
            for w, b in pairs:
                out = os.path.join(tmp, f"w{w}-b{b}-{rep}")
                r = run_step(cptrace, args.build, args.path, rate, args.step_s,
                             ["--wakeup-kib", str(w), "--block-events", str(b)], out)
                if r:
                    runs[(w, b)].append(r)
                    print(f"  wakeup {w:5d} KiB, block {b:5d}: {r['dropped']} dropped of {r['emitted']}, "
                          f"{r['achieved'] / 1e6:.2f} M/s achieved, {r['cpu_per_m']:.4f} CPU s per M events",
                          flush=True)
                for f in os.listdir(out) if os.path.isdir(out) else []:
                    os.unlink(os.path.join(out, f))  # keep the disk free between runs
    print(f"summary ({args.path} at {rate / 1e6:g} M/s, {args.step_s:g} s x {args.repeat}):")
    for (w, b), rs in runs.items():
        if not rs:
            print(f"  wakeup {w:5d} KiB, block {b:5d}: no run completed")
            continue
        print(f"  wakeup {w:5d} KiB, block {b:5d}: dropped {sum(r['dropped'] for r in rs)} in {len(rs)} runs, "
              f"median {statistics.median(r['cpu_per_m'] for r in rs):.4f} CPU s per M events "
              f"(min {min(r['cpu_per_m'] for r in rs):.4f})")


if __name__ == "__main__":
    main()
