#!/usr/bin/env bash
# s46 run 2: the two-row FP8 scan with its MMAs pipelined across tiles (scan_ss_kernel's
# XT: row 0's MMA of tile i + 1 issued before row 1's epilogue of tile i; a ring of 3)
# against the plain loop (STRATA_IDX_SS_XT=0), one binary, alternated; tcases, --check.
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
timeout 90 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
for r in 1 2; do
	for v in "xt:" "plain:STRATA_IDX_SS_XT=0"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K 8,32,64 2
		pts "${v%%:*} r$r" "${v#*:}" 512K 8,32 2
		pts "${v%%:*} r$r" "${v#*:}" 1M 8 2
	done
done | tee "$OUT/ab.txt"
echo "ab done at $SECONDS s"
for v in "xt:" "plain:STRATA_IDX_SS_XT=0"; do
	pts "${v%%:*}" "${v#*:}" 32K 8,64 2
	pts "${v%%:*}" "${v#*:}" 1M 1 2
done | tee "$OUT/ab_more.txt"
tcase gpu def ""
tcase cluster def "" 240
echo "done at $SECONDS s"
