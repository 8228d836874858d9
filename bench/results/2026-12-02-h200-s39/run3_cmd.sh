#!/usr/bin/env bash
# Session 39, run 3: the one-row MXFP4 loop converting the next tile's second key half
# after the MMA wait, beside the epilogue (new = the working tree) against 4f701ea (base:
# build-alt/base-src) and s38's head 020b1d5 (s38: build-alt/s38-src, the CLI only), 3
# rounds; --check of both at 24 points; then kernels_gpu_indexer's tcases that run the
# changed scans (waves, ranges, copies, gpu: the latter with the new wide-scale MXFP4
# cases), each timed, on the faster of new and base at MXFP4 1M.
# Carry .deps, build-alt/base-src and build-alt/s38-src.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base && cfg build-alt/s38-src build-alt/s38 ||
	{ echo "configure failed"; exit 1; }
cmake --build build-gpu -j7 >/tmp/build_new.log 2>&1 &
p1=$!
cmake --build build-alt/base -j6 >/tmp/build_base.log 2>&1 &
p2=$!
cmake --build build-alt/s38 -j3 --target strata_cli >/tmp/build_s38.log 2>&1 || { tail -20 /tmp/build_s38.log; exit 1; }
wait $p1 || { tail -20 /tmp/build_new.log; exit 1; }
wait $p2 || { tail -20 /tmp/build_base.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH FMT
	timeout 90 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for b in new base s38; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata; [ $b = s38 ] && B=build-alt/s38/strata
		pts "$b r$r" $B 1M,512K,256K,128K 1 fp8,mxfp4
		pts "$b r$r" $B 1M,128K 8 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
med() { grep "^$1 " "$OUT/ab.txt" | awk '$3=="mxfp4" && $4==1048576 && $5==1 {print $7}' | sort -n | sed -n 2p; }
W=build-gpu; awk -v a="$(med new)" -v b="$(med base)" 'BEGIN { exit !(a > b) }' && W=build-alt/base
echo "mxfp4 1M median new $(med new) base $(med base): tests on $W"
for b in build-gpu build-alt/base; do
	timeout 60 $b/strata bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2,4 \
		--fmt fp8,mxfp4 --q8 --wgmma >/tmp/check.txt 2>&1
	echo "check $b rc=$?: $(grep -E '^(fp8|mxfp4) ' /tmp/check.txt | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
	(echo "== $b"; cat /tmp/check.txt) >>"$OUT/check.txt"
done
for c in waves ranges copies gpu; do
	s=$SECONDS
	CK_RUN_CASE=$c timeout $((590 - SECONDS)) $W/tests/kernels_gpu_indexer >"/tmp/tcase_$c.txt" 2>&1
	echo "tcase $c rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_$c.txt)"
	(echo "== tcase $c on $W"; cat "/tmp/tcase_$c.txt") >>"$OUT/tcases.txt"
done
echo "done at $SECONDS s"
