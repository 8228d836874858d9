#!/usr/bin/env bash
# Session 39, run 6: the session's head (new: the working tree, all targets) against
# s38's head 020b1d5 (base: build-alt/base-src, the CLI), 3 rounds at the one-row points,
# 128K and 1M batch 8, two and four rows at 1M batch 8; the sampler's sleep between polls
# (STRATA_IDX_SAMP_SLEEP 0 / 100 against the default 500) at 128K and 256K; --check at 24
# points; every GPU test (ctest -L gpu), timed. Carry .deps and build-alt/base-src.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j11 >/tmp/build_new.log 2>&1 &
cmake --build build-alt/base -j5 --target strata_cli >/tmp/build_base.log 2>&1 || { tail -20 /tmp/build_base.log; exit 1; }
wait $! || { tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH FMT [ROWS]
	timeout 90 "$2" bench indexer --ctx "$3" --batch "$4" --rows "${6:-1}" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for b in new base; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		pts "$b r$r" $B 1M,512K,256K,128K,32K 1 mxfp4,fp8
		pts "$b r$r" $B 1M,128K 8 mxfp4,fp8
		[ $r = 1 ] && pts "$b r$r" $B 1M 8 mxfp4,fp8 2,4
	done
	for s in 0 100; do
		STRATA_IDX_SAMP_SLEEP=$s pts "sleep$s r$r" build-gpu/strata 256K,128K 1 mxfp4,fp8
	done
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
timeout 60 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2,4 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
s=$SECONDS
timeout $((590 - SECONDS)) ctest --test-dir build-gpu -L gpu -j2 --output-on-failure >"$OUT/ctest_gpu.txt" 2>&1
echo "ctest -L gpu rc=$? $((SECONDS - s)) s"; tail -4 "$OUT/ctest_gpu.txt"
echo "done at $SECONDS s"
