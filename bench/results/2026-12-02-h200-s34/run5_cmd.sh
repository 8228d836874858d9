#!/usr/bin/env bash
# Session 34 run 5: run 4's sample histogram, its sampling CTA asleep between polls
# (__nanosleep, STRATA_IDX_SAMP_DBG >> 8 ns, 500 by default) and zeroing the histogram
# after it has published the bound; rounds against the row barrier (STRATA_IDX_SAMP=0)
# at 1M / 512K / 128K, timelines. Carry .deps.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT
	timeout 100 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	STRATA_IDX_SAMP=0 pts "samp0 r$i" 1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP=0 pts "samp0 r$i" 512K 1,8 1 fp8
	STRATA_IDX_SAMP=0 pts "samp0 r$i" 128K 8 1 fp8
	for d in 0 512000; do # sleep 500 ns (the default), 2000
		for x in 2 3; do
			STRATA_IDX_SAMP_DBG=$d STRATA_IDX_SAMP_X=$x pts "hist x$x s$((d >> 8)) r$i" 1M 1 1 fp8,mxfp4
			STRATA_IDX_SAMP_DBG=$d STRATA_IDX_SAMP_X=$x pts "hist x$x s$((d >> 8)) r$i" 512K 1,8 1 fp8
			STRATA_IDX_SAMP_DBG=$d STRATA_IDX_SAMP_X=$x pts "hist x$x s$((d >> 8)) r$i" 128K 8 1 fp8
		done
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for c in "1M 1 fp8" "1M 1 mxfp4" "512K 8 fp8"; do
	set -- $c
	STRATA_IDX_SAMP_X=2 STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 --rows 1 \
		--fmt $3 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -1 | sed "s/^/$1 b$2 $3 /"
done >"$OUT/traces.txt"
grep -o -E "^[0-9]+[KM] b[0-9]+ [a-z0-9]+|(agg[0-3]|#list|sampw|scan1|fcut|fh2|sel0|selld|sort0|end) [0-9./]+" "$OUT/traces.txt" |
	tr '\n' ' ' | sed -E 's/ ([0-9]+[KM] b)/\n\1/g'; echo
