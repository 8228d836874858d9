#!/usr/bin/env bash
# Prepared in session 35 for the next device run (not run: no device time left).
# Before: `git apply bench/results/2026-12-02-h200-s35/select-k512.patch` (the select
# kernels in instances with one id a thread to sort where k <= 512: select_list_kernel
# 0x12800 bytes of SASS against 0x15580, select_kernel 0xe280 against 0x11180; the
# select runs its code once, cold, ~10 ns a distinct line: bench/results/
# 2026-11-30-h200-s13), and
# `rm -rf build-alt && mkdir -p build-alt/main build-alt/peek && git archive HEAD | tar -x -C build-alt/main
#  && git archive HEAD | tar -x -C build-alt/peek && (cd build-alt/peek && patch -p1 < ../../bench/results/2026-12-02-h200-s35/smem-peek.patch)`
# ("peek": each scan CTA of the sampled tail keeps its scores in shared memory for its
# filing and reads its bound word as its last tile starts; run 3 measured it only
# bundled with other changes). Carry .deps and build-alt. Then next_tests.sh (the GPU
# indexer test, alone, timed).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
CM="-DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
for t in main peek; do
	(cmake -S build-alt/$t -B build-alt/b$t $CM -DSTRATA_REV=$t >/dev/null 2>&1 &&
		cmake --build build-alt/b$t -j4 --target strata_cli >"$OUT/build_$t.log" 2>&1) &
done
cmake -S . -B build-gpu $CM >/dev/null 2>&1 &&
	cmake --build build-gpu -j8 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
for t in main peek; do [ -x build-alt/b$t/strata ] || { tail -30 "$OUT/build_$t.log"; exit 1; }; done
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	pts "main r$i" 1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "tree r$i" 1M 1 1 fp8,mxfp4
	pts "peek r$i" 1M 1 1 fp8,mxfp4 build-alt/bpeek/strata
	STRATA_IDX_SAMP_PER_SM=5 pts "ps5 r$i" 1M 1 1 fp8,mxfp4 # fewer scan CTAs an SM
	STRATA_IDX_SAMP_PER_SM=4 pts "ps4 r$i" 1M 1 1 fp8,mxfp4
	pts "main r$i" 128K,512K 8 1 fp8 build-alt/bmain/strata
	pts "tree r$i" 128K,512K 8 1 fp8
done | tee "$OUT/ab.txt"
for f in fp8 mxfp4; do
	STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 \
		--wgmma --reps 4 >"$OUT/trace_$f.txt" 2>&1
	grep -E "idx-trace|idx-cta: [0-9]+ CTAs|ends by|last end by|correlation" "$OUT/trace_$f.txt" | tail -5
done
# the scan CTAs' spread with the pages scattered over the pool (is it the layout's?)
STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt fp8 --q8 \
	--wgmma --reps 4 --pages shuffled >"$OUT/trace_shuffled_fp8.txt" 2>&1
grep -E "^fp8 |idx-cta: [0-9]+ CTAs|SMs" "$OUT/trace_shuffled_fp8.txt" | tail -3
STRATA_IDX_SAMP_PER_SM=4 STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 \
	--fmt fp8 --q8 --wgmma --reps 4 >"$OUT/trace_ps4_fp8.txt" 2>&1
grep -E "idx-cta: [0-9]+ CTAs|SMs|ends by" "$OUT/trace_ps4_fp8.txt" | tail -3
timeout 100 $B bench indexer --check --ctx 128K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
timeout 60 build-alt/bpeek/strata bench indexer --check --ctx 512K,1M --batch 1 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check_peek.txt" 2>&1
echo "check peek rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
