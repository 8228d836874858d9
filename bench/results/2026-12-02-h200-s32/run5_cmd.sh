#!/usr/bin/env bash
# Session 32 run 5: the final kernel (the filter's scores read up to the limit, as on
# main; the arrive kept): --check at the batch points, and rounds against main
# (build-alt/main = 5ee2c58). Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release $3 >/dev/null 2>&1; }
(cfg build-alt/main build-alt/bmain -DSTRATA_REV=s32-main &&
	cmake --build build-alt/bmain -j8 --target strata_cli >/tmp/build_main.log 2>&1) &
cfg . build-gpu "" && cmake --build build-gpu -j8 --target strata_cli >/tmp/build.log 2>&1 ||
	{ tail -30 /tmp/build.log; exit 1; }
wait
[ -x build-alt/bmain/strata ] || { tail -30 /tmp/build_main.log; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
timeout 100 $B bench indexer --check --ctx 128K,512K --batch 8,32 --rows 1,2,4 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $9, $(NF-3)}'
pts() { # BINARY LABEL CTX BATCH ROWS FMT
	timeout 60 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt "$6" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$2" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	for v in main final; do
		b=$B
		[ $v = main ] && b=build-alt/bmain/strata
		pts $b "$v r$i" 512K 8 1,2 fp8
		pts $b "$v r$i" 128K 32 1 fp8
	done
done | tee "$OUT/ab.txt"
echo "done $(date +%T)"
