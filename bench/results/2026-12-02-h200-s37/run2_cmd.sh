#!/usr/bin/env bash
# Prepared in session 36 (not run: no device time left). Is the list select's ~4.5 us its
# code's first fetch? s15's "select twice" (no faster the second time) ran two inlined
# copies of the code, so it did not tell. select-rehearsal.patch makes select_list one
# __noinline__ copy with a dry mode (made-up counts and keys, no global writes) and, by
# STRATA_IDX_REH: 0 no dry run; 1 the sampled tail's scan CTAs trigger the select's
# launch at their start and the select runs dry before its PDL wait (the real run warm);
# 2 the dry run after the wait (a measurement: the real run's sel0 -> end, warm).
# Before: `git apply bench/results/2026-12-02-h200-s36/select-rehearsal.patch` and
# `rm -rf build-alt && mkdir -p build-alt/main && git archive HEAD | tar -x -C build-alt/main`.
# Carry .deps and build-alt. Also: the sampled tail at batch 8 / 32, 128K
# (STRATA_IDX_SAMP_MIN=0), where the row barrier runs now.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
CM="-DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
(cmake -S build-alt/main -B build-alt/bmain $CM >/dev/null 2>&1 &&
	cmake --build build-alt/bmain -j6 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cmake -S . -B build-gpu $CM >/dev/null 2>&1 &&
	cmake --build build-gpu -j10 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2 3; do
	pts "main r$i" 256K,512K,1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	for r in 0 1 2; do
		STRATA_IDX_REH=$r pts "reh$r r$i" 256K,512K,1M 1 1 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
for i in 1 2; do
	pts "main r$i" 128K 8,32 1 fp8,mxfp4 build-alt/bmain/strata
	STRATA_IDX_SAMP_MIN=0 pts "samp r$i" 128K 8,32 1 fp8,mxfp4 build-alt/bmain/strata
done | tee -a "$OUT/ab.txt"
for r in 0 1 2; do
	for f in fp8 mxfp4; do
		echo "== REH $r $f" >>"$OUT/traces.txt"
		STRATA_IDX_REH=$r STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 \
			--fmt $f --q8 --wgmma --reps 4 >>"$OUT/traces.txt" 2>&1
	done
done
grep -E "^== REH|idx-trace" "$OUT/traces.txt" | sed -E 's/scan2.*//' | awk '/^==/{h=$0; n=0; next} {n++; if (n == 5) print h, $0}'
STRATA_IDX_REH=1 timeout 100 $B bench indexer --check --ctx 256K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check REH 1 rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
STRATA_IDX_REH=1 CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled REH 1 rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
