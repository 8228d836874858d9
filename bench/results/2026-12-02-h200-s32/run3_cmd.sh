#!/usr/bin/env bash
# Session 32 run 3: the kept change (45f3aff: the filter's done counter by a
# release-acquire arrive, its first reads at once): every GPU test (kernels_gpu_indexer
# alone, the other nine beside it), then, time permitting, alternated rounds against
# main (build-alt/main = 5ee2c58) at the points with targets. Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release $3 >/dev/null 2>&1; }
(cfg build-alt/main build-alt/bmain -DSTRATA_REV=s32-main &&
	cmake --build build-alt/bmain -j4 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cfg . build-gpu "" && cmake --build build-gpu -j14 >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
ctest --test-dir build-gpu -R kernels_gpu_indexer --output-on-failure --timeout 480 \
	>"$OUT/ctest_indexer.txt" 2>&1 &
ctest --test-dir build-gpu -L gpu -E kernels_gpu_indexer -j3 --output-on-failure --timeout 300 \
	>"$OUT/ctest_others.txt" 2>&1
echo "others rc=$? at $(( $(date +%s) - t0 )) s"; grep -E "Test +#|tests passed" "$OUT/ctest_others.txt"
wait
echo "indexer done at $(( $(date +%s) - t0 )) s"; grep -E "Test +#|tests passed" "$OUT/ctest_indexer.txt"
[ -x build-alt/bmain/strata ] || exit 0
pts() { # BINARY LABEL CTX BATCH ROWS FMT
	timeout 60 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt "$6" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$2" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	for v in main kept; do
		[ $(( $(date +%s) - t0 )) -lt 540 ] || break 2
		b=build-gpu/strata
		[ $v = main ] && b=build-alt/bmain/strata
		pts $b "$v r$i" 512K 8 1,2 fp8
		pts $b "$v r$i" 1M 1 1 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
echo "done at $(( $(date +%s) - t0 )) s"
