#!/usr/bin/env bash
# s35 run 2: the tree (s34's sampled-tail-count-inst.patch + the list select's
# register path + the list's bin counts from the scan's CTAs) against main and against
# the patch alone (build-alt/inst), same call. Carry .deps, build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
for t in main inst; do
	(cmake -S build-alt/$t -B build-alt/b$t -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
		-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTRATA_REV=$t >/dev/null 2>&1 &&
		cmake --build build-alt/b$t -j5 --target strata_cli >"$OUT/build_$t.log" 2>&1) &
done
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j8 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
for t in main inst; do [ -x build-alt/b$t/strata ] || { tail -30 "$OUT/build_$t.log"; exit 1; }; done
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	pts "main r$i" 1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "inst r$i" 1M 1 1 fp8,mxfp4 build-alt/binst/strata
	pts "tree r$i" 1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP_X=2 pts "inst x2 r$i" 1M 1 1 fp8,mxfp4 build-alt/binst/strata
	STRATA_IDX_SAMP_X=2 pts "tree x2 r$i" 1M 1 1 fp8,mxfp4
done | tee "$OUT/ab.txt"
pts "main" 512K 1,8 1 fp8 build-alt/bmain/strata | tee -a "$OUT/ab.txt"
pts "tree" 512K 1,8 1 fp8 | tee -a "$OUT/ab.txt"
for f in fp8 mxfp4; do
	STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 \
		--wgmma --reps 4 >"$OUT/trace_$f.txt" 2>&1
	grep -E "idx-trace" "$OUT/trace_$f.txt" | tail -1
done
timeout 100 $B bench indexer --check --ctx 128K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
