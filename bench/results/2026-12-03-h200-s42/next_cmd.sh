#!/usr/bin/env bash
# Prepared in s42, not run (device time spent): on e7e265f (the staged filing landed),
# (1) every GPU test (ctest -L gpu; only the `sampled` tcase ran on the landed form),
# (2) the batch-1 points in one run against the pre-s42 kernels (00e9c50, archived to
# build-alt/head-src: `git archive 00e9c50 | tar -x -C build-alt/head-src --exclude
# bench/results`, carried), to settle s42 run 3's FP8 128K batch 1 13.6 us against the
# head's 13.3 - 13.4 in other runs, (3) the FP8 staged points again (same binary, old =
# STRATA_IDX_SAMP_STAGED=0). carry: [".deps", "build-alt/head-src"]; ~8 - 10 min.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
(cmake -S build-alt/head-src -B build-alt/head -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-alt/head -j6 --target strata_cli \
	>/tmp/build_head.log 2>&1) &
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j12 >/tmp/build_new.log 2>&1 || { grep -E "error" /tmp/build_new.log | head; exit 1; }
wait
echo "built in $SECONDS s"
s=$SECONDS
timeout 420 ctest --test-dir build-gpu -L gpu --output-on-failure >"$OUT/ctest_gpu.txt" 2>&1
echo "ctest gpu rc=$? $((SECONDS - s)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.txt")"
b1() { # LABEL BIN
	timeout 60 $2 bench indexer --ctx 1M,128K --batch 1 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	b1 "head r$r" build-alt/head/strata
	b1 "new  r$r" build-gpu/strata
done | tee "$OUT/b1.txt"
for r in 1 2; do
	for st in 0 1; do
		STRATA_IDX_SAMP_STAGED=$st timeout 60 build-gpu/strata bench indexer --ctx 1M,512K,128K --batch 8,32 \
			--rows 1 --fmt fp8 --q8 --wgmma 2>&1 | grep -E "^fp8 " |
			awk -v l="staged=$st r$r" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
	done
done | tee "$OUT/staged.txt"
echo "done at $SECONDS s"
