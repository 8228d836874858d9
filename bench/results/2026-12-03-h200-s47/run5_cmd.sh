#!/usr/bin/env bash
# s47 run 5: the landed tree (two FP8 rows by one MMA of N = 128): tcases, --check, the
# figures of the targets' points, and Nsight Compute on the two-row FP8 scan at 128K
# batch 32 (where it stands against the GPU's limits, for the next session).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS [FMT]
	env $2 timeout 60 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
tcase() { # NAME TAG ENV TIMEOUT
	local s=$SECONDS
	env $3 CK_RUN_CASE=$1 timeout ${4:-150} build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$1.txt" 2>&1
	echo "tcase $1 ($2) rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$1.txt")" | tee -a "$OUT/tcases_summary.txt"
	grep -iE "fail|error" "$OUT/tcase_$1.txt" | head -3
}
tcase gpu def ""
tcase ranges def ""
tcase copies def ""
timeout 120 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 1,2,4 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ') at $SECONDS s"
for r in 1 2; do
	pts "final r$r" "" 1M 1 1
	pts "final r$r" "" 1M 1 1 mxfp4
	pts "final r$r" "" 128K 8,32,64 1,2
	pts "final r$r" "" 512K 8 1,2
	pts "final r$r" "" 1M 8 2
	pts "final r$r" "" 128K 64 4
	pts "final r$r" "" 128K 32 1,2 mxfp4
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/final.txt"
s=$SECONDS
[ $SECONDS -lt 420 ] && timeout 120 ncu --clock-control none -k "regex:scan_ss_kernel" --launch-skip 3 -c 1 \
	--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
	--section Occupancy --section WarpStateStats --section LaunchStats -f -o /tmp/p_scan \
	build-gpu/strata bench indexer --ctx 128K --batch 32 --rows 2 --fmt fp8 --q8 --wgmma --reps 3 \
	>/tmp/ncu.log 2>&1
echo "ncu rc=$? $((SECONDS - s)) s"
[ -f /tmp/p_scan.ncu-rep ] && ncu -i /tmp/p_scan.ncu-rep --page details >"$OUT/ncu_scan2_details.txt" 2>&1
tail -5 /tmp/ncu.log
echo "done at $SECONDS s"
