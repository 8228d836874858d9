#!/usr/bin/env bash
# s45 run 4: the landed tree's cluster filter against filter_kernel (STRATA_IDX_FCL=0)
# over the batch sweep where a cluster can apply (32K - 512K, batch 8 / 32 / 64, 1 / 2 /
# 4 rows, both formats), one binary, alternated a context at a time; then the room and
# rounds the rule sees.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS FMT
	env $2 timeout 120 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt $6 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for f in fp8 mxfp4; do
	for c in 32K 128K 512K; do
		pts def "" $c 8,32,64 1,2,4 $f
		pts fcl0 STRATA_IDX_FCL=0 $c 8,32,64 1,2,4 $f
		echo "at $SECONDS s" >&2
	done
done | tee "$OUT/sweep.txt"
echo "done at $SECONDS s"
