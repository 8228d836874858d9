#!/usr/bin/env python3
"""How many instructions a kernel runs, and how much of its code runs only once or so.

    usage: scripts/ncu-insts.py sass.csv [WARPS] [ONCE]

Reads the CSV that `gpu-idx.sh ncu` writes (`ncu --page source --csv --print-source
sass`, one launch). Prints the warp-level instructions executed in all, per warp when
WARPS (the launch's warps) is given, the distinct SASS lines executed and their bytes,
the instruction classes, and the code executed at most ONCE (default 64) times: the
straight-line, single-shot stretches of a tail such as a one-CTA select. Session 12
measured such code at ~10 - 24 cycles an instruction on the H200
(bench/results/2026-11-30-h200-s12).
"""
import collections
import csv
import sys


def num(x):
    try:
        return float(x.replace(',', ''))
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    warps = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    once = float(sys.argv[3]) if len(sys.argv) > 3 else 64.0
    rows = list(csv.reader(open(path)))
    hdr = rows[1]  # row 0 names the kernel
    col = {name: i for i, name in enumerate(hdr)}
    ex_i, src_i = col['Instructions Executed'], col['Source']
    lines = [(r[0], r[src_i], num(r[ex_i])) for r in rows[2:] if len(r) > ex_i]
    run = [l for l in lines if l[2] > 0]
    total = sum(l[2] for l in run)
    print('warp instructions executed: %d' % total)
    if warps:
        print('per warp (%d warps): %.1f' % (warps, total / warps))
    print('distinct SASS lines executed: %d (%d bytes of code)' % (len(run), 16 * len(run)))
    ops = collections.Counter()
    for _, src, ex in run:
        t = src.split()
        op = t[1] if t and t[0].startswith('@') and len(t) > 1 else (t[0] if t else '?')
        ops[op.split('.')[0]] += ex
    print('classes: ' + ', '.join('%s %d' % kv for kv in ops.most_common(12)))
    few = [l for l in run if l[2] <= once]
    print('executed <= %g times: %d lines, %d warp instructions' %
          (once, len(few), sum(l[2] for l in few)))
    bars = [l for l in run if 'BAR.' in l[1]]
    print('barrier lines: %d, executed %d times' % (len(bars), sum(l[2] for l in bars)))


if __name__ == '__main__':
    main()
