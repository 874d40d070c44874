#!/usr/bin/env python3
"""Zero-drop search: the highest paced rate `cptrace record` keeps without a drop.

  zero_drop.py --build DIR --path batch|single [--rates R1,R2,...] [--step-s S]
               [--cptrace BIN] [--record-arg ARG]... [--runs N]

For each rate, rising, the paced emitter (bench_logts --rate) runs for S seconds
(default $ZERO_DROP_STEP_S, else 10) under `cptrace record` with default
options. A step passes when the trace counts 0 dropped events; the search stops
at the first step with drops, or when the emitter itself cannot reach the rate.
Per step it prints what was emitted, recorded and dropped, and the recorder's
CPU time: the rusage of `cptrace record` (its waited-for child included) less
the CPU the emitter reports for itself (which includes the uprobe programs, as
they run in the emitter). Figures only; nothing passes or fails on them.

With --runs N every rate is run N times in a row (no early stop; runs after
runs, rates rising within a run), each step's line followed by the collector's
stall counters (meta.json "collector": the longest gap between two drain
passes, waits for a free block, queue peaks, the longest write), and a table
of drops per step and per run at the end: one run without drops at a rate says
little when a stall can strike any run. A CPU budget follows: per rate, the
recorder's and the emitter's CPU seconds per M events and the CPUs both would
take at the target rate, against the machine's CPU count (what says whether a
rate can be held at all beside the recorder).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

DEFAULT_RATES = {
    "batch": [5e6, 10e6, 15e6, 20e6, 25e6, 30e6, 40e6],
    "single": [0.5e6, 1e6, 1.5e6, 2e6, 2.5e6, 3e6, 4e6, 5e6, 6e6],
}


def run_step(cptrace, build, path, rate, seconds, record_args, out_dir):
    """One paced run under `cptrace record`; a dict of its figures, or None (printed why)."""
    cmd = [cptrace, "record", "--no-progress", *record_args, "-o", out_dir, "--",
           os.path.join(build, "bench", "bench_logts"), "--only", path,
           "--rate", str(int(rate)), "--seconds", str(seconds)]
    with open(out_dir + ".err", "w+") as ef:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=ef)
        out = p.stdout.read().decode()
        _, status, ru = os.wait4(p.pid, 0)  # the recorder's rusage, its waited-for child included
        ef.seek(0)
        err = ef.read()
    code = os.waitstatus_to_exitcode(status)
    m = re.search(r"paced path=\S+ target=\S+ n=(\d+) achieved=(\S+) late_ms=\S+ cpu_s=(\S+)"
                  r"(?: max_late_ms=(\S+) behind_pct=(\S+))?", out)
    if code != 0 or not m:
        print(f"  {rate / 1e6:6.2f} M/s: run failed (exit {code})\n{err}{out}", file=sys.stderr)
        return None
    emitted, achieved, emitter_cpu = int(m.group(1)), float(m.group(2)), float(m.group(3))
    meta = json.load(open(os.path.join(out_dir, "meta.json")))
    rec_cpu = ru.ru_utime + ru.ru_stime - emitter_cpu
    return {"emitted": emitted, "achieved": achieved, "recorded": meta["recorded_events"],
            "dropped": sum(meta["counters"]["dropped"]), "rec_cpu": rec_cpu, "emitter_cpu": emitter_cpu,
            "cpu_per_m": rec_cpu / (emitted / 1e6), "collector": meta.get("collector"),
            # An emitter built before these figures existed prints neither: shown as "?",
            # never as 0 (which would read as "always on schedule").
            "max_late_ms": None if m.group(4) is None else float(m.group(4)),
            "behind_pct": None if m.group(5) is None else float(m.group(5))}


def describe_stalls(c):
    """The collector's stall counters of one step (absent from older recorders)."""
    if not c:
        return "(no stall counters in meta.json)"
    d, p = c.get("drain", {}), c.get("pipeline", {})
    first = c.get("first_drop_s")
    ring = d.get("ring_bytes") or 1
    return (f"drain gap max {d.get('max_gap_ms', 0):.1f} ms, pass max {d.get('max_pass_ms', 0):.1f} ms, "
            f"ring peak {100 * d.get('ring_peak_bytes', 0) / ring:.0f}%, run delay {d.get('run_delay_ms', 0):.0f} ms, "
            f"nice {d.get('nice', 0)}; "
            f"block waits {p.get('block_waits', 0)} ({p.get('block_wait_ms', 0):.1f} ms, max "
            f"{p.get('max_block_wait_ms', 0):.1f}); grown by the drain {p.get('grown_by_drain', 0)}, released after "
            f"a quiet period {p.get('blocks_released', 0)}; blocks peak {p.get('blocks_peak', 0)}/{p.get('blocks_cap', 0)}, "
            f"ready peak {p.get('ready_peak', 0)}, write queue peak {p.get('write_queue_peak', 0)}; "
            f"write max {p.get('max_write_ms', 0):.1f} ms, compress max {p.get('max_compress_ms', 0):.1f} ms, "
            f"frames at the fast zstd level {p.get('fast_frames', 0)}"
            + (f"; first drop seen at {first:.1f} s" if first is not None else "")
            + "".join(f"\n           drop after the pass at {dp['at_ms']} ms: gap {dp['gap_ms']} ms, ring {dp['ring_pct']}% at "
                      f"its start, pass {dp['pass_ms']} ms, descheduled {dp['gap_delay_ms']} ms in the gap and "
                      f"{dp['pass_delay_ms']} ms in the pass, {dp['dropped']} dropped"
                      for dp in d.get("drop_passes", [])[:3]))


def repeated(args, cptrace, rates):
    """--runs N: every rate N times; drops per step and per run."""
    drops, achieved = {}, {}
    with tempfile.TemporaryDirectory(prefix="cptrace-zero-drop.") as tmp:
        for run in range(args.runs):
            for i, rate in enumerate(rates):
                out = os.path.join(tmp, f"run{run}-step{i}")
                r = run_step(cptrace, args.build, args.path, rate, args.step_s, args.record_arg, out)
                subprocess.run(["rm", "-rf", out])
                if not r:
                    drops[(run, rate)] = None
                    continue
                drops[(run, rate)] = r["dropped"]
                achieved[(run, rate)] = r
                print(f"  run {run + 1}: " + describe(rate, r), flush=True)
                print("         " + describe_stalls(r["collector"]), flush=True)
    print(f"  drops per step and run ({args.path}, {args.step_s:g} s per step, default options):")
    print("    rate M/s " + "".join(f"{'run ' + str(k + 1):>12}" for k in range(args.runs)))
    steps_dropped = 0
    for rate in rates:
        row = [drops[(k, rate)] for k in range(args.runs)]
        steps_dropped += sum(1 for d in row if d)
        print(f"    {rate / 1e6:8.2f} " + "".join(f"{'failed' if d is None else d:>12}" for d in row))
    print(f"  steps with drops: {steps_dropped} of {len(rates) * args.runs}")
    budget(rates, achieved, args.runs)
    print("  emitter's achieved M/s (and % of its chunks logged behind schedule, at full speed) per step and run:")
    print("    rate M/s " + "".join(f"{'run ' + str(k + 1):>14}" for k in range(args.runs)))
    for rate in rates:
        cells = [achieved.get((k, rate)) for k in range(args.runs)]
        print(f"    {rate / 1e6:8.2f} " + "".join(
            f"{'failed':>14}" if c is None else f"{c['achieved'] / 1e6:8.2f} ({pct(c['behind_pct'])})" for c in cells))


def pct(v):
    return "  ?%" if v is None else f"{v:3.0f}%"


def budget(rates, achieved, runs):
    """What a rate costs: CPU seconds per M events of the emitter and the recorder,
    and the CPUs both would take at the target rate, against the machine's."""
    def median(v):
        v = sorted(v)
        return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
    print(f"  CPU budget per step (median over runs, [min-max]); this machine has {os.cpu_count()} CPUs; the emitter's "
          "CPU includes its spin-wait while ahead of schedule, so below its top rate it is an upper bound:")
    print("    rate M/s   recorder CPU s/M ev        emitter CPU s/M ev    CPUs at the target rate")
    for rate in rates:
        cells = [achieved[(k, rate)] for k in range(runs) if (k, rate) in achieved]
        if not cells:
            continue
        rec = [c["rec_cpu"] / (c["emitted"] / 1e6) for c in cells]
        emi = [c["emitter_cpu"] / (c["emitted"] / 1e6) for c in cells]
        need = [rate / 1e6 * (a + b) for a, b in zip(rec, emi)]
        print(f"    {rate / 1e6:8.2f}   {median(rec):.4f} [{min(rec):.4f}-{max(rec):.4f}]   "
              f"{median(emi):.4f} [{min(emi):.4f}-{max(emi):.4f}]   {median(need):5.2f} [{min(need):.2f}-{max(need):.2f}]")


def describe(rate, r):
    # The emitter's cp_close_channel() is one more recorded event.
    balance = "" if r["recorded"] + r["dropped"] == r["emitted"] + 1 else "  MISMATCH: recorded + dropped != emitted + 1"
    late = "?" if r["max_late_ms"] is None else f"{r['max_late_ms']:.0f}"
    return (f"{rate / 1e6:6.2f} M/s target, {r['achieved'] / 1e6:6.2f} M/s achieved: {r['emitted']} emitted, "
            f"{r['recorded']} recorded, {r['dropped']} dropped; recorder {r['rec_cpu']:.2f} CPU s = "
            f"{r['cpu_per_m']:.4f} CPU s per M events; emitter behind schedule in {pct(r['behind_pct']).strip()} of "
            f"its chunks (at most {late} ms){balance}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--cptrace", help="the recorder binary (default BUILD/cptrace)")
    ap.add_argument("--path", choices=["batch", "single"], required=True)
    ap.add_argument("--rates", help="comma-separated events/s, rising")
    ap.add_argument("--step-s", type=float, default=float(os.environ.get("ZERO_DROP_STEP_S", "10")))
    ap.add_argument("--record-arg", action="append", default=[])
    ap.add_argument("--runs", type=int, default=0, help="run every rate this many times (no search)")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")] if args.rates else DEFAULT_RATES[args.path]
    cptrace = args.cptrace or os.path.join(args.build, "cptrace")
    if args.runs:
        repeated(args, cptrace, rates)
        return

    best = None
    with tempfile.TemporaryDirectory(prefix="cptrace-zero-drop.") as tmp:
        for i, rate in enumerate(rates):
            r = run_step(cptrace, args.build, args.path, rate, args.step_s, args.record_arg,
                         os.path.join(tmp, f"step{i}"))
            if not r:
                break
            print("  " + describe(rate, r), flush=True)
            if r["achieved"] < 0.98 * rate:
                print(f"  (the emitter cannot reach {rate / 1e6:.2f} M/s on this path: search ends)")
                break
            if r["dropped"]:
                break
            best = (rate, r["cpu_per_m"])
    if best:
        print(f"  highest zero-drop rate ({args.path}, {args.step_s:g} s per step): {best[0] / 1e6:.2f} M events/s, "
              f"recorder {best[1]:.4f} CPU s per M events")
    else:
        print(f"  no zero-drop rate among those tried ({args.path})")


if __name__ == "__main__":
    main()
