#!/usr/bin/env bash
# Session 34 run 3: agg-probe.cu (the sampling code alone, and beside 791 streaming CTAs),
# then the tree of run 2 with two more STRATA_IDX_SAMP_DBG bits: 4, the scan CTAs poll
# their bound word with __nanosleep(256) between polls; 8, the sampling CTA's first pass
# reads with plain loads (__ldcg) in place of asm volatile ld.relaxed.gpu. Carry .deps.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
"$NVCC" -O3 -arch=sm_90a -o /tmp/agg-probe bench/results/2026-12-02-h200-s34/agg-probe.cu &&
	timeout 60 /tmp/agg-probe >"$OUT/probe.txt" 2>&1
echo "probe rc=$?"; cat "$OUT/probe.txt"
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
for d in 1 3 5 9 11 15; do
	for c in "1M 1 fp8" "128K 8 fp8"; do
		set -- $c
		STRATA_IDX_SAMP_DBG=$d STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 \
			--rows 1 --fmt $3 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -1 |
			sed "s/^/dbg$d $1 b$2 $3 /"
	done
done >"$OUT/traces.txt"
echo "traces done $(date +%T)"
for d in 1 3 5 9 11 15; do
	STRATA_IDX_SAMP_DBG=$d pts "samp1 dbg$d" 1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP_DBG=$d pts "samp1 dbg$d" 128K 8 1 fp8
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
grep -o -E "^dbg[0-9]+ [^ ]+ [^ ]+ [^ ]+|(dry[0-3]|agg[0-3]|sampw|scan1|fcut|fh2|sel0|end) [0-9./]+" "$OUT/traces.txt" |
	tr '\n' ' ' | sed 's/ dbg/\ndbg/g'; echo
