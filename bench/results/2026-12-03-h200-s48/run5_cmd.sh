#!/usr/bin/env bash
# s48 run 5: the filter's bin-2 counts by plain shared atomics (filter-red.patch), and on
# top the fused select of filter_kernel sorting one id a thread where k <= 512
# (filter-red-per1.patch; it sorted four, three of them empty), against the tree,
# alternated, three rounds; --check and the gpu / cluster tcases on the build with both;
# then the issue's sweep on the faster of tree and red+per1 (by the A/B's sum), a context
# and format at a time, as far as the device time allows.
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
mk /tmp/alt-r filter-red.patch && mk /tmp/alt-rp filter-red-per1.patch || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-r /tmp/b-r && cfg /tmp/alt-rp /tmp/b-rp || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j5 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-r -j5 --target strata_cli >/tmp/b1.log 2>&1 &
cmake --build /tmp/b-rp -j6 --target strata_cli kernels_gpu_indexer >/tmp/b2.log 2>&1 ||
	{ grep -E "error" /tmp/b2.log | head; exit 1; }
wait
[ -x /tmp/b-r/strata ] && [ -x build-gpu/strata ] || { grep -E "error" /tmp/b0.log /tmp/b1.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS [FMT]
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "tree:build-gpu" "red:/tmp/b-r" "red+per1:/tmp/b-rp"; do
		b="${v#*:}/strata" l="${v%%:*} r$r"
		pts "$l" "$b" 128K 8,32 2
		pts "$l" "$b" 512K 8 2
		pts "$l" "$b" 128K 8 1
		pts "$l" "$b" 32K 8 1,2
		pts "$l" "$b" 128K 32 1 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 90 /tmp/b-rp/strata bench indexer --check --ctx 512K,128K,32K --batch 8,32 --rows 1,2,4 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
timeout 60 /tmp/b-rp/strata bench indexer --check --ctx 128K,32K --batch 8,32 --rows 1,2 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_mx.txt" 2>&1
echo "check mx rc=$? $(grep -E '^mxfp4 ' "$OUT/check_mx.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
for t in gpu cluster; do
	s=$SECONDS
	CK_RUN_CASE=$t timeout 120 /tmp/b-rp/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$t.txt")"
	grep -iE "fail|error" "$OUT/tcase_$t.txt" | head -3
done
tot() { awk -v v="$1" '$1 == v {s += $8} END {printf "%.1f", s}' "$OUT/ab.txt"; }
t0=$(tot tree) t2=$(tot red+per1)
sb=build-gpu/strata sl=tree
awk -v a="$t2" -v b="$t0" 'BEGIN {exit !(a < b)}' && sb=/tmp/b-rp/strata sl=red+per1
echo "A/B sums: tree $t0, red+per1 $t2; sweep on $sl at $SECONDS s"
for c in 128K 512K 1M 32K; do
	for f in fp8 mxfp4; do
		[ $SECONDS -lt 400 ] || { echo "stopped before $c $f at $SECONDS s"; break 2; }
		timeout 100 $sb bench indexer --ctx $c --batch 1,8,32,64 --rows 1,2,4 --fmt $f --q8 --wgmma 2>&1 |
			grep -E "^(fp8|mxfp4) " | awk -v l="$sl" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
		echo "$c $f at $SECONDS s" >&2
	done
done >"$OUT/sweep.txt"
echo "done at $SECONDS s"
