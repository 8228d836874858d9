#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's SASS page.

    usage: scripts/ncu-stalls.py sass_M.csv [N]

Reads the CSV that `gpu-ab.sh ncu` writes (`ncu --page source --csv --print-source
sass`), prints the stall reasons summed over the kernel (share of all samples), then the
N (default 25) SASS lines with the most samples: samples, address, instruction,
executions, and the reasons behind that line's samples.
"""
import csv
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows = list(csv.reader(open(path)))
    hdr = rows[1]  # row 0 names the kernel
    col = {name: i for i, name in enumerate(hdr)}
    samples = col["Warp Stall Sampling (All Samples)"]
    stalls = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    total, by_reason, lines = 0, {}, []
    for r in rows[2:]:
        if len(r) < len(hdr) or not r[samples].isdigit():
            continue
        n = int(r[samples])
        total += n
        why = {}
        for i in stalls:
            if r[i].isdigit() and int(r[i]):
                by_reason[hdr[i]] = by_reason.get(hdr[i], 0) + int(r[i])
                why[hdr[i][len("stall_"):]] = int(r[i])
        lines.append((n, r[col["Address"]][-5:], r[col["Source"]].strip(),
                      r[col["Instructions Executed"]], why))
    print("total samples", total)
    for name, n in sorted(by_reason.items(), key=lambda x: -x[1])[:10]:
        print(f"  {name} {n} {100 * n / max(total, 1):.1f}%")
    for n, addr, src, execd, why in sorted(lines, key=lambda x: -x[0])[:top]:
        print(n, addr, src[:60], execd, why)


if __name__ == "__main__":
    main()
