#!/usr/bin/env bash
# s47 run 6 (diagnostic): Nsight Compute's stall reasons for the two-row FP8 scan
# (scan_ss_kernel<2, 2, true>, 128K batch 32, the landed tree): the average warps
# stalled a reason per issued instruction, and per-instruction samples (SASS, gz CSV).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
timeout 150 ncu --clock-control none -k "regex:scan_ss_kernel" --launch-skip 3 -c 1 \
	--metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
	--section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no \
	-f -o /tmp/p_stall build-gpu/strata bench indexer --ctx 128K --batch 32 --rows 2 --fmt fp8 \
	--q8 --wgmma --reps 3 >/tmp/ncu.log 2>&1
echo "ncu rc=$? $((SECONDS - s)) s"
tail -3 /tmp/ncu.log
if [ -f /tmp/p_stall.ncu-rep ]; then
	ncu -i /tmp/p_stall.ncu-rep --page details >"$OUT/ncu_stall_details.txt" 2>&1
	ncu -i /tmp/p_stall.ncu-rep --page raw --csv 2>&1 | gzip >"$OUT/ncu_stall_raw.csv.gz"
	ncu -i /tmp/p_stall.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$OUT/ncu_stall_sass.csv.gz"
fi
echo "done at $SECONDS s"
