#!/usr/bin/env bash
# For the next session (not run in s49): the one-row MXFP4 batch loop (one-set, five CTAs
# an SM since s49, 96 registers) with what its old 80-register cap had ruled out, both
# compiled without a spill here: rs1-wreg.patch (the head weights held in registers, no
# shared-memory reads before each epilogue) and rs1-early.patch (the first pages'
# indices read at once before the first copy). `w`: wreg alone; `we`: both; against the
# tree, three rounds; --check and the gpu tcase on `we`. ~5 min.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
P=$PWD/bench/results/2026-12-03-h200-s49
mk() { # DIR PATCHES...
	local d=$1; shift
	rm -rf "$d" && mkdir -p "$d" &&
		cp -r CMakeLists.txt README.md base bench cachemgr cmake engine kernels prefetch scripts tests tiers "$d"/ &&
		(cd "$d" && for p in "$@"; do git apply "$P/$p" || exit 1; done)
}
mk /tmp/alt-w rs1-wreg.patch && mk /tmp/alt-we rs1-wreg.patch rs1-early.patch || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-w /tmp/b-w && cfg /tmp/alt-we /tmp/b-we || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j5 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-w -j5 --target strata_cli >/tmp/b1.log 2>&1 &
cmake --build /tmp/b-we -j6 --target strata_cli kernels_gpu_indexer >/tmp/b2.log 2>&1 || { grep error /tmp/b2.log | head; exit 1; }
wait
[ -x build-gpu/strata ] && [ -x /tmp/b-w/strata ] || { grep -E "error" /tmp/b0.log /tmp/b1.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS FMT
	timeout 90 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt $6 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "tree:build-gpu" "w:/tmp/b-w" "we:/tmp/b-we"; do
		pts "${v%%:*} r$r" "${v#*:}/strata" 128K 8,32,64 1 mxfp4
		pts "${v%%:*} r$r" "${v#*:}/strata" 512K,1M 8,32 1 mxfp4
		pts "${v%%:*} r$r" "${v#*:}/strata" 1M 1 1 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 120 /tmp/b-we/strata bench indexer --check --ctx 512K,128K,32K --batch 8,32 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_we.txt" 2>&1
echo "check we rc=$? $(grep -E '^mxfp4 ' "$OUT/check_we.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
s=$SECONDS
CK_RUN_CASE=gpu timeout 150 /tmp/b-we/tests/kernels_gpu_indexer >"$OUT/tcase_gpu_we.txt" 2>&1
echo "tcase gpu (we) rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_gpu_we.txt")"
echo "done at $SECONDS s"
