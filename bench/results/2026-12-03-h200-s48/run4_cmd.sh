#!/usr/bin/env bash
# s48 run 4: the landed tree (8df262c's kernels: s47's tree, pt-ahead2 + mma-first, and
# the selects' classing by warp scan): the ranges / copies tcases, then the
# issue's whole sweep (32K - 1M, batch 1 / 8 / 32 / 64, 1 / 2 / 4 rows, both formats),
# a context at a time, as far as the run's time allows.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
for t in ranges copies; do
	s=$SECONDS
	CK_RUN_CASE=$t timeout 120 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$t.txt")"
	grep -iE "fail|error" "$OUT/tcase_$t.txt" | head -3
done
pts() { # CTX BATCH ROWS FMT
	timeout 120 build-gpu/strata bench indexer --ctx $1 --batch $2 --rows $3 --fmt $4 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk '{print $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for c in 1M 128K 512K 32K; do
	for f in fp8 mxfp4; do
		[ $SECONDS -lt 380 ] || { echo "stopped before $c $f at $SECONDS s" >&2; break 2; }
		pts $c 1,8,32,64 1,2,4 $f
	done
	echo "$c at $SECONDS s" >&2
done | tee "$OUT/sweep.txt"
echo "done at $SECONDS s"
