#!/usr/bin/env bash
# s46 run 4: the select's ids sorted by bitmap where the row fits it (sort_emit, rows up to
# 131,072 ids) against the counting sort (STRATA_IDX_BMSORT=0), one binary, alternated;
# every indexer tcase on the select paths; --check; traces.
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
for r in 1 2; do
	for v in "bm:" "cnt:STRATA_IDX_BMSORT=0"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K 8,32,64 2
		pts "${v%%:*} r$r" "${v#*:}" 512K 8 2
		pts "${v%%:*} r$r" "${v#*:}" 128K 1,8,32 1
		pts "${v%%:*} r$r" "${v#*:}" 512K 8 1
		pts "${v%%:*} r$r" "${v#*:}" 128K 32 1 mxfp4
	done
done | tee "$OUT/ab.txt"
echo "ab done at $SECONDS s"
{
	echo "== 512K b8 2 rows fp8 (bm)"
	STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer --ctx 512K --batch 8 --rows 2 \
		--fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep -E "idx-trace" | tail -2 | cut -c1-900
} 2>&1 | tee "$OUT/traces.txt" | cut -c1-420
for f in fp8 mxfp4; do
	timeout 90 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 1,8,32 --rows 2,1 \
		--fmt $f --q8 --wgmma >"$OUT/check_$f.txt" 2>&1
	echo "check $f rc=$? $(grep -E '^(fp8|mxfp4) ' "$OUT/check_$f.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
	grep "# check" "$OUT/check_$f.txt"
done
tcase cluster def "" 240
tcase gpu def ""
tcase sampled def ""
tcase ranges def ""
echo "done at $SECONDS s"
