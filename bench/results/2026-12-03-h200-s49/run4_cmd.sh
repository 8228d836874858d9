#!/usr/bin/env bash
# s49 run 4: the landed tree's whole sweep (the issue's points, the standing figures);
# then, in the same binary, the two-set MXFP4 loop for one-row batches through the filter
# (STRATA_IDX_RS_TWOSET=1: one wave, =3: up to three) against the one-set loop (unset),
# alternated two rounds, with --check on the two-set form.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/b0.log 2>&1 || { grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
B=build-gpu/strata
for c in 128K 512K 1M 32K; do
	for f in fp8 mxfp4; do
		timeout 100 $B bench indexer --ctx $c --batch 1,8,32,64 --rows 1,2,4 --fmt $f --q8 --wgmma 2>&1 |
			grep -E "^(fp8|mxfp4) " | awk '{print "tree", $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
		echo "$c $f at $SECONDS s" >&2
	done
done >"$OUT/sweep.txt"
for i in 1 2; do
	timeout 60 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk '{print "tree", $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
done >"$OUT/b1.txt"
pts() { # LABEL ENV CTX BATCH ROWS FMT
	env $2 timeout 60 $B bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt $6 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for v in "one:STRATA_IDX_RS_TWOSET=0" "two1:STRATA_IDX_RS_TWOSET=1" "two3:STRATA_IDX_RS_TWOSET=3"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K 32,64 1 mxfp4
		pts "${v%%:*} r$r" "${v#*:}" 512K,1M 8,32 1 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
STRATA_IDX_RS_TWOSET=1 timeout 120 $B bench indexer --check --ctx 512K,128K --batch 8,32 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_two.txt" 2>&1
echo "check two rc=$? $(grep -E '^mxfp4 ' "$OUT/check_two.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
echo "done at $SECONDS s"
