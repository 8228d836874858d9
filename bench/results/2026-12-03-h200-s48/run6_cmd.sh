#!/usr/bin/env bash
# s48 run 6: the MXFP4 one-row batch loop (scan_rs_kernel's one-set form) at five CTAs an
# SM (96 registers, no spill) instead of six (80, spilling 8 / 40 bytes): rs-one5.patch
# against the tree, alternated, three rounds; --check and the waves tcase on it.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
P=$PWD/bench/results/2026-12-03-h200-s48
rm -rf /tmp/alt-5 && mkdir -p /tmp/alt-5 &&
	cp -r CMakeLists.txt README.md base bench cachemgr cmake engine kernels prefetch scripts tests tiers /tmp/alt-5/ &&
	(cd /tmp/alt-5 && git apply "$P/rs-one5.patch") || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-5 /tmp/b-5 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j8 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-5 -j8 --target strata_cli kernels_gpu_indexer >/tmp/b1.log 2>&1 ||
	{ grep -E "error" /tmp/b1.log | head; exit 1; }
wait
[ -x build-gpu/strata ] || { grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt mxfp4 --q8 --wgmma 2>&1 |
		grep -E "^mxfp4 " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "tree:build-gpu" "rs5:/tmp/b-5"; do
		b="${v#*:}/strata" l="${v%%:*} r$r"
		pts "$l" "$b" 128K 8,32,64 1
		pts "$l" "$b" 512K 8,32 1
		pts "$l" "$b" 1M 8 1
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 60 /tmp/b-5/strata bench indexer --check --ctx 512K,128K,32K --batch 8,32 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^mxfp4 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
CK_RUN_CASE=waves timeout 60 /tmp/b-5/tests/kernels_gpu_indexer >"$OUT/tcase_waves.txt" 2>&1
echo "tcase waves rc=$?: $(tail -1 "$OUT/tcase_waves.txt")"
echo "done at $SECONDS s"
