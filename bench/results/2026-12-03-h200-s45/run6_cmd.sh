#!/usr/bin/env bash
# s45 run 6: the smallest cluster that walks as few rounds (STRATA_IDX_FCL_MIN=1: 32K
# rows as clusters of one, 128K batch 8 / 32 as clusters of 4, ...) against the largest
# that fits (default), which at 128K batch 32 one MXFP4 row (32 clusters of 7, room 32)
# did not start every cluster at once (run 5's traces); one binary, alternated, the
# points where a cluster runs; then the gpu tcase under FCL_MIN=1.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS FMT
	env $2 timeout 120 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt $6 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
tcase() { # NAME TAG ENV TIMEOUT
	local s=$SECONDS
	env $3 CK_RUN_CASE=$1 timeout ${4:-150} build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$1.txt" 2>&1
	echo "tcase $1 ($2) rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$1.txt")"
	grep -iE "fail|error" "$OUT/tcase_$1.txt" | head -3
}
for r in 1 2; do
	for f in fp8 mxfp4; do
		pts def "" 32K,128K 8,32,64 2,4 $f
		pts min STRATA_IDX_FCL_MIN=1 32K,128K 8,32,64 2,4 $f
		pts def "" 32K,128K 32,64 1 $f
		pts min STRATA_IDX_FCL_MIN=1 32K,128K 32,64 1 $f
		pts def "" 512K 8 1,2 $f
		pts min STRATA_IDX_FCL_MIN=1 512K 8 1,2 $f
	done
	echo "round $r at $SECONDS s" >&2
done >"$OUT/ab.txt"
awk '{print $1, $2, $3, $4, $5, $7, $9}' "$OUT/ab.txt"
tcase gpu min STRATA_IDX_FCL_MIN=1
echo "done at $SECONDS s"
