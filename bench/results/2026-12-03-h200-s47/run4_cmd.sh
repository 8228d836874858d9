#!/usr/bin/env bash
# s47 run 4: the two-row FP8 scan at five CTAs an SM (STRATA_IDX_SS_MB5=1: both rows'
# histograms in 16-bit halves, the head weights in shared memory, 94 registers) against
# four (the default); correctness of the five.
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
tcase ranges mb5 "STRATA_IDX_SS_MB5=1"
timeout 90 env STRATA_IDX_SS_MB5=1 build-gpu/strata bench indexer --check \
	--ctx 512K,128K --batch 8,32 --rows 2 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ') at $SECONDS s"
for r in 1 2 3; do
	for v in "mb4:" "mb5:STRATA_IDX_SS_MB5=1"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K,512K 8,32 2
		pts "${v%%:*} r$r" "${v#*:}" 128K 64 2
		pts "${v%%:*} r$r" "${v#*:}" 1M 8,32 2
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
for v in "mb4:" "mb5:STRATA_IDX_SS_MB5=1"; do
	echo "== $v"
	env ${v#*:} STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer --ctx 128K --batch 32 \
		--rows 2 --fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep -E "idx-trace" | head -8
done >"$OUT/traces.txt"
[ $SECONDS -lt 480 ] && tcase gpu mb5 "STRATA_IDX_SS_MB5=1"
echo "done at $SECONDS s"
