#!/usr/bin/env bash
# s48 run 2: the selects' classing pass by one warp scan a thread's keys (class-regs.patch)
# against the tree (4688a9a), alternated, three rounds; --check and the gpu / sampled /
# cluster tcases on the patched build; traces; Nsight Compute's source view of the list
# select. (class-sort.patch, sort_emit's counts zeroed ahead, did not build on the
# device: filter_cl_kernel's static shared memory over 48 KB; first attempt of run 2.)
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
mk /tmp/alt-c class-regs.patch || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-c /tmp/b-c || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j8 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-c -j8 --target strata_cli kernels_gpu_indexer >/tmp/b1.log 2>&1 ||
	{ grep -E "error" /tmp/b1.log | head; exit 1; }
wait
[ -x build-gpu/strata ] || { grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS [FMT]
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3 4; do
	for v in "tree:build-gpu" "cls:/tmp/b-c"; do
		b="${v#*:}/strata" l="${v%%:*} r$r"
		pts "$l" "$b" 1M 1 1
		pts "$l" "$b" 1M 1 1 mxfp4
		pts "$l" "$b" 128K 1 1
		pts "$l" "$b" 128K,512K 8 2
		pts "$l" "$b" 128K 32,64 2
		pts "$l" "$b" 1M 8 1
		pts "$l" "$b" 128K 32 1 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 120 /tmp/b-c/strata bench indexer --check --ctx 1M,128K --batch 1,8,32 --rows 1,2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
timeout 60 /tmp/b-c/strata bench indexer --check --ctx 1M,128K --batch 1,32 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_mx.txt" 2>&1
echo "check mx rc=$? $(grep -E '^mxfp4 ' "$OUT/check_mx.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
for t in gpu sampled cluster; do
	s=$SECONDS
	CK_RUN_CASE=$t timeout 150 /tmp/b-c/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$t.txt")"
	grep -iE "fail|error" "$OUT/tcase_$t.txt" | head -3
done
for v in "tree:build-gpu" "cls:/tmp/b-c"; do
	for f in mxfp4 fp8; do
		echo "== ${v%%:*} $f 1M b1"
		STRATA_IDX_TRACE=1 timeout 60 "${v#*:}/strata" bench indexer --ctx 1M --batch 1 --rows 1 \
			--fmt $f --q8 --wgmma --reps 3 2>&1 | grep idx-trace | tail -4
	done
	echo "== ${v%%:*} fp8 128K b32 2 rows"
	STRATA_IDX_TRACE=1 timeout 60 "${v#*:}/strata" bench indexer --ctx 128K --batch 32 --rows 2 \
		--fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep idx- | tail -8
done >"$OUT/traces.txt"
echo "traces at $SECONDS s"
s=$SECONDS
timeout 150 ncu --clock-control none -k "regex:select_list_kernel" --launch-skip 3 -c 1 \
	--section WarpStateStats --section SourceCounters --import-source no --sampling-interval 0 \
	-f -o /tmp/p_sel /tmp/b-c/strata bench indexer --ctx 1M --batch 1 --rows 1 --fmt mxfp4 --q8 \
	--wgmma --reps 3 >/tmp/ncu.log 2>&1
echo "ncu rc=$? $((SECONDS - s)) s"
if [ -f /tmp/p_sel.ncu-rep ]; then
	ncu -i /tmp/p_sel.ncu-rep --page details >"$OUT/ncu_sel_details.txt" 2>&1
	ncu -i /tmp/p_sel.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip >"$OUT/ncu_sel_sass.csv.gz"
fi
tail -3 /tmp/ncu.log
echo "done at $SECONDS s"
