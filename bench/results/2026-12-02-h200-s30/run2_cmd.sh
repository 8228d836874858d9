#!/usr/bin/env bash
# Session 30 run 2: the fused one-row MXFP4 scan on the one-set loop (STRATA_IDX_MX_ONE=1:
# six CTAs an SM against four) and with four histogram copies (STRATA_IDX_MX_HC=1), one
# binary, the modes alternated; --check and timelines of the one-set form.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
STRATA_IDX_MX_ONE=1 STRATA_IDX_MX_HC=1 timeout 200 $B bench indexer --check --ctx 32K,128K,1M \
	--batch 1,8 --rows 1 --fmt mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?" | tee -a "$OUT/check.txt"
grep -E "^mxfp4 " "$OUT/check.txt" | awk '{print "check", $3, $4, $5, $NF}'
pts() { # LABEL
	timeout 120 $B bench indexer --ctx 1M,512K,128K --batch 1 --rows 1 --fmt mxfp4 --q8 --wgmma 2>&1 |
		grep -E "^mxfp4 " | awk -v l="$1" '{print l, $3, $4, "graph", $9, "eff", $14}'
	timeout 120 $B bench indexer --ctx 128K,32K --batch 8 --rows 1 --fmt mxfp4 --q8 --wgmma 2>&1 |
		grep -E "^mxfp4 " | awk -v l="$1" '{print l, $3, $4, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for m in "0 0" "1 0" "1 1" "0 1"; do
		set -- $m
		STRATA_IDX_MX_ONE=$1 STRATA_IDX_MX_HC=$2 pts "one$1 hc$2 r$i"
	done
done | tee "$OUT/ab.txt"
for m in "0 0" "1 0" "1 1"; do
	set -- $m
	STRATA_IDX_TRACE=1 STRATA_IDX_MX_ONE=$1 STRATA_IDX_MX_HC=$2 timeout 60 $B bench indexer \
		--ctx 1M --batch 1 --rows 1 --fmt mxfp4 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" |
		tail -4 | sed "s/^/one$1 hc$2 /"
done >"$OUT/traces.txt"
echo "done $(date +%T)"
