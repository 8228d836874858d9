#!/usr/bin/env bash
# s48 run 1 (s47's next_cmd.sh): pt-ahead2.patch (the FP8 scan's page index two tiles
# ahead) and mma-first.patch (the two-row refill after the N = 128 MMA's issue) against
# the tree, alternated, three rounds; --check and the ranges / copies tcases on the
# fully patched build; then the tree's MXFP4 1M batch 1 timeline (traced).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
P=$PWD/bench/results/2026-12-03-h200-s48
mk() { # DIR PATCH...
	rm -rf "$1" && mkdir -p "$1" &&
		cp -r CMakeLists.txt README.md base bench cachemgr cmake engine kernels prefetch scripts tests tiers "$1"/ &&
		(cd "$1" && shift && for p in "$@"; do git apply "$P/$p" || exit 1; done)
}
mk /tmp/alt-pt pt-ahead2.patch && mk /tmp/alt-mf pt-ahead2.patch mma-first.patch || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-pt /tmp/b-pt && cfg /tmp/alt-mf /tmp/b-mf || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j6 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-pt -j5 --target strata_cli >/tmp/b1.log 2>&1 &
cmake --build /tmp/b-mf -j5 --target strata_cli kernels_gpu_indexer >/tmp/b2.log 2>&1 ||
	{ grep -E "error" /tmp/b2.log | head; exit 1; }
wait
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "tree:build-gpu" "pt:/tmp/b-pt" "pt+mf:/tmp/b-mf"; do
		pts "${v%%:*} r$r" "${v#*:}/strata" 128K,512K 8,32 2
		pts "${v%%:*} r$r" "${v#*:}/strata" 128K 64 2,4
		pts "${v%%:*} r$r" "${v#*:}/strata" 128K,512K 32 1
	done
done | tee "$OUT/ab.txt"
timeout 90 /tmp/b-mf/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 1,2,4 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
for t in ranges copies; do
	CK_RUN_CASE=$t timeout 150 /tmp/b-mf/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$?: $(tail -1 "$OUT/tcase_$t.txt")"
done
for f in mxfp4 fp8; do
	echo "== $f 1M b1"
	STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f \
		--q8 --wgmma --reps 3 2>&1 | grep idx-trace
done >"$OUT/traces.txt"
echo "done at $SECONDS s"
