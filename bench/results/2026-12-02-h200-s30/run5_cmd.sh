#!/usr/bin/env bash
# Session 30 run 5: the kept rule (TMA copies where a CTA scores several FP8 rows):
# --check with the default rule, and 1M batch 8 rows 1 / 4 under the rule and each form.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
timeout 100 $B bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2,4 --fmt fp8 --q8 \
	--wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?" | tee -a "$OUT/check.txt"
grep -E "^fp8 " "$OUT/check.txt" | awk '{print "check", $3, $4, $5, $9, $(NF-3)}'
for t in "" 0 1; do
	STRATA_IDX_SS_TMA=$t timeout 60 $B bench indexer --ctx 1M --batch 8 --rows 1,4 --fmt fp8 \
		--q8 --wgmma 2>&1 | grep -E "^fp8 " | awk -v l="tma'$t'" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
done | tee "$OUT/ab.txt"
echo "done $(date +%T)"
