#!/usr/bin/env bash
# s46 run 5: the cluster filter at three CTAs an SM (filter_cl_kernel<PER, 3>: 40
# registers, spilling) where two an SM leave too little room for every row's cluster
# (STRATA_IDX_FCL_MB3=1, default) against filter_kernel there (MB3=0); forced everywhere
# (MB3=2) to see the spills' cost; the final tree's figures; tcases.
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
tcase cluster def "" 240
STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer --ctx 128K --batch 32 --rows 2 \
	--fmt fp8 --q8 --wgmma --reps 1 2>&1 | grep -E "idx-fcl" | sort -u
for r in 1 2; do
	for v in "mb3:" "mb2:STRATA_IDX_FCL_MB3=0"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K 32 2
		pts "${v%%:*} r$r" "${v#*:}" 128K 32 2 mxfp4
		pts "${v%%:*} r$r" "${v#*:}" 128K 64 1,4
	done
done | tee "$OUT/ab.txt"
for v in "force3:STRATA_IDX_FCL_MB3=2" "mb3:"; do
	pts "$v" "${v#*:}" 128K 8,64 2
	pts "$v" "${v#*:}" 512K 8 2
done | tee -a "$OUT/ab.txt"
echo "ab done at $SECONDS s"
{
	pts "final" "" 1M 1 1
	pts "final" "" 1M 1 1 mxfp4
} | tee "$OUT/final.txt"
tcase gpu def ""
echo "done at $SECONDS s"
