#!/usr/bin/env bash
# Session 34 run 2: where the sampling CTA's time goes. The tree is s33's
# sampled-tail-first.patch plus trace points inside the sampling CTA (dry0: its start;
# dry1 / dry2 / dry3: its rehearsal's first pass, second pass, rank; agg0 - agg3 the same
# for the row's own words) and STRATA_IDX_SAMP_DBG (1: no rehearsal; 2: plain shared
# atomics in place of __match_any_sync). Tree only (main's figures: run 1). Carry .deps.
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
for d in 0 1 2 3; do
	for c in "1M 1 fp8" "1M 1 mxfp4" "128K 8 fp8"; do
		set -- $c
		STRATA_IDX_SAMP_DBG=$d STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 \
			--rows 1 --fmt $3 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -2 |
			sed "s/^/dbg$d $1 b$2 $3 /"
	done
done >"$OUT/traces.txt"
echo "traces done $(date +%T)"
for i in 1 2; do
	STRATA_IDX_SAMP=0 pts "samp0 r$i" 1M 1 1 fp8,mxfp4
	for d in 0 1 2 3; do
		STRATA_IDX_SAMP_DBG=$d pts "samp1 dbg$d r$i" 1M 1 1 fp8,mxfp4
		STRATA_IDX_SAMP_DBG=$d pts "samp1 dbg$d r$i" 128K 8 1 fp8
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
# the traces' sampling-CTA points, one line a call
grep -o -E "^dbg[0-9] [^ ]+ [^ ]+ [^ ]+|(dry[0-3]|agg[0-3]|sampw|scan1|fcut|fh2|sel0|end) [0-9./]+" "$OUT/traces.txt" |
	tr '\n' ' ' | sed 's/ dbg/\ndbg/g'; echo
