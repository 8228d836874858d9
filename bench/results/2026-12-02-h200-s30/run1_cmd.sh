#!/usr/bin/env bash
# Session 30 run 1: the select with its sort counted as ids are placed (the tree, "M")
# against 2c266ab: --check of the tree, then rounds alternating the two CLIs over the
# one-row points, then batch-1 timelines of both. Carry .deps and build-alt
# (scripts/gpu-ab.sh prepare 2c266ab).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
REV=2c266ab
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
(cfg "build-alt/$REV" "build-alt/b$REV" &&
	cmake --build "build-alt/b$REV" -j8 --target strata_cli >"$OUT/build_$REV.log" 2>&1) &
cfg . build-gpu && cmake --build build-gpu -j12 --target strata_cli kernels_gpu_indexer \
	>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x "build-alt/b$REV/strata" ] || { tail -30 "$OUT/build_$REV.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
timeout 240 $B bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2,4 --fmt fp8,mxfp4 \
	--q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?" | tee -a "$OUT/check.txt"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $NF}' | head -30
pts() { # BINARY LABEL CTX BATCH ROWS
	timeout 120 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt fp8,mxfp4 --q8 \
		--wgmma 2>&1 | grep -E "^(fp8|mxfp4) " |
		awk -v l="$2" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for v in M $REV; do
		b=$B
		[ $v = M ] || b=build-alt/b$v/strata
		pts $b "$v $i" 1M 1,8 1
		pts $b "$v $i" 512K 8 1,2
		pts $b "$v $i" 128K 8,32 1
	done
done | tee "$OUT/ab.txt"
for v in M $REV; do
	b=$B
	[ $v = M ] || b=build-alt/b$v/strata
	for f in fp8 mxfp4; do
		STRATA_IDX_TRACE=1 timeout 60 $b bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f \
			--q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -4 | sed "s/^/$v $f /"
	done
done >"$OUT/traces.txt"
echo "done $(date +%T)"
