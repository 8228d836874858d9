#!/usr/bin/env python3
"""Instructions a tile in a wgmma scan's tile loop, from scripts/sass.sh output:

    scripts/sass.sh kernels/indexer_wgmma.cu 'scan_ss_kernel' > /tmp/ss.sass
    scripts/sass-hot.py /tmp/ss.sass

For each kernel in the file: the innermost backward branch (a conditional one, not a
retry trampoline) whose body holds the wgmma (QGMMA) instructions is the tile loop; from
its body it drops the cold paths (the MXFP4 scale table's subnormal branch, recognised
by its `ISETP.GE.AND ..., -0xe` entry, and the single-lane bulk-copy issue around
UBLKCP), counts the rest, divides by the tiles the body scores (QGMMA / 4) and prints a
count by opcode. A count, not a timing: issue stalls and latencies are not in it."""
import collections
import re
import sys


def parse(path):
    funcs, cur = {}, None
    for line in open(path):
        if line.startswith('== '):
            cur = line[3:].strip()
            funcs[cur] = []
            continue
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s*(.*)', line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(2).strip()))
    return funcs


def opcode(t):
    w = t.split()
    return (w[1] if t.startswith('@') else w[0]).split('.')[0]


def main():
    for name, ins in parse(sys.argv[1]).items():
        loops = []
        for a, t in ins:
            m = re.match(r'@!?U?P\d BRA(?:\.U)?\s+0x([0-9a-f]+)', t)
            if m and int(m.group(1), 16) < a:
                lo = int(m.group(1), 16)
                if any('QGMMA' in x for b, x in ins if lo <= b <= a):
                    loops.append((a - lo, lo, a))
        if not loops:
            print(name, ': no tile loop found')
            continue
        _, lo, hi = min(loops)
        cold = []
        for i, (a, t) in enumerate(ins):
            m = re.match(r'@!?P\d BRA\s+0x([0-9a-f]+)', t)
            if m and i + 1 < len(ins) and re.search(r'ISETP\.GE\.AND .*-0xe', ins[i + 1][1]):
                cold.append((ins[i + 1][0], int(m.group(1), 16)))
            if 'UBLKCP' in t:
                for j in range(i - 1, max(0, i - 80), -1):
                    m = re.match(r'@!?P\d BRA\s+0x([0-9a-f]+)', ins[j][1])
                    if m and int(m.group(1), 16) > a:
                        cold.append((ins[j + 1][0], int(m.group(1), 16)))
                        break
        hot = [(a, t) for a, t in ins
               if lo <= a <= hi and not any(x <= a < y for x, y in cold)]
        tiles = max(1, sum('QGMMA' in t for _, t in hot) // 4)
        print('%s: loop %#x-%#x, %d hot instructions, %d tile(s): %.1f a tile' %
              (name, lo, hi, len(hot), tiles, len(hot) / tiles))
        c = collections.Counter(opcode(t) for _, t in hot)
        print('  ' + ' '.join('%s %d' % kv for kv in c.most_common()))


if __name__ == '__main__':
    main()
