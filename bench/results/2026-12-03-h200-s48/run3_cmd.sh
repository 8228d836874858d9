#!/usr/bin/env bash
# s48 run 3: the sampled tail's scores kept in shared memory and its bound polled a tile
# ahead inside the scan loop (samp-stash.patch), and on top the list select's sort counts
# in an array of their own, zeroed before its wait (list-sort.patch), against the tree
# (8df262c), alternated, four rounds; --check and the gpu / sampled tcases on the build
# with both; traces of 1M batch 1.
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
mk /tmp/alt-s samp-stash.patch && mk /tmp/alt-sl samp-stash.patch list-sort.patch || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-s /tmp/b-s && cfg /tmp/alt-sl /tmp/b-sl || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j5 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-s -j5 --target strata_cli >/tmp/b1.log 2>&1 &
cmake --build /tmp/b-sl -j6 --target strata_cli kernels_gpu_indexer >/tmp/b2.log 2>&1 ||
	{ grep -E "error" /tmp/b2.log | head; exit 1; }
wait
[ -x /tmp/b-s/strata ] && [ -x build-gpu/strata ] || { grep -E "error" /tmp/b0.log /tmp/b1.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS [FMT]
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3 4; do
	for v in "tree:build-gpu" "st:/tmp/b-s" "st+ls:/tmp/b-sl"; do
		b="${v#*:}/strata" l="${v%%:*} r$r"
		pts "$l" "$b" 1M,256K,128K 1 1
		pts "$l" "$b" 1M,256K,128K 1 1 mxfp4
		pts "$l" "$b" 1M 8 1
		pts "$l" "$b" 128K 32 1
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 120 /tmp/b-sl/strata bench indexer --check --ctx 1M,512K,128K,32K --batch 1,8 --rows 1,2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
timeout 60 /tmp/b-sl/strata bench indexer --check --ctx 1M,256K,128K,32K --batch 1,8 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_mx.txt" 2>&1
echo "check mx rc=$? $(grep -E '^mxfp4 ' "$OUT/check_mx.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
for t in sampled gpu; do
	s=$SECONDS
	CK_RUN_CASE=$t timeout 150 /tmp/b-sl/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$t.txt")"
	grep -iE "fail|error" "$OUT/tcase_$t.txt" | head -3
done
for v in "tree:build-gpu" "st+ls:/tmp/b-sl"; do
	for f in mxfp4 fp8; do
		echo "== ${v%%:*} $f 1M b1"
		STRATA_IDX_TRACE=1 timeout 60 "${v#*:}/strata" bench indexer --ctx 1M --batch 1 --rows 1 \
			--fmt $f --q8 --wgmma --reps 3 2>&1 | grep idx-trace | tail -4
	done
done >"$OUT/traces.txt"
echo "done at $SECONDS s"
