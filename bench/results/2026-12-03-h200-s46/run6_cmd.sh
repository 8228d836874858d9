#!/usr/bin/env bash
# s46 run 6: the scan's scores stored with an L2 evict-last policy (score_tile's keep,
# STRATA_IDX_SCORE_KEEP=1; the keys already read evict-first) against plain stores
# (=0), one binary, alternated; --check.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS [FMT]
	env $2 timeout 60 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
timeout 60 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
for r in 1 2; do
	for v in "keep:" "plain:STRATA_IDX_SCORE_KEEP=0"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K 8,32 2
		pts "${v%%:*} r$r" "${v#*:}" 512K 8 2
		pts "${v%%:*} r$r" "${v#*:}" 128K 8 1
		pts "${v%%:*} r$r" "${v#*:}" 128K 32 2 mxfp4
	done
done | tee "$OUT/ab.txt"
echo "done at $SECONDS s"
