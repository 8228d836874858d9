#!/usr/bin/env bash
# s49 run 6 (the session's last ~280 s of device time): next2_cmd.sh cut down: the tree
# and `we` (rs1-wreg.patch + rs1-early.patch) only, two rounds, --check on `we`, then the
# gpu tcase on `we` if time is left (each output written as it comes).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
P=$PWD/bench/results/2026-12-03-h200-s49
rm -rf /tmp/alt-we && mkdir -p /tmp/alt-we &&
	cp -r CMakeLists.txt README.md base bench cachemgr cmake engine kernels prefetch scripts tests tiers /tmp/alt-we/ &&
	(cd /tmp/alt-we && git apply "$P/rs1-wreg.patch" "$P/rs1-early.patch") || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt-we /tmp/b-we || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j8 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-we -j8 --target strata_cli >/tmp/b1.log 2>&1 || { grep error /tmp/b1.log | head; exit 1; }
wait
[ -x build-gpu/strata ] || { grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH ROWS FMT
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt $6 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for v in "tree:build-gpu" "we:/tmp/b-we"; do
		pts "${v%%:*} r$r" "${v#*:}/strata" 128K 32,64 1 mxfp4 >>"$OUT/ab.txt"
		pts "${v%%:*} r$r" "${v#*:}/strata" 512K,1M 8 1 mxfp4 >>"$OUT/ab.txt"
	done
	echo "round $r at $SECONDS s"
done
cat "$OUT/ab.txt"
timeout 60 /tmp/b-we/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_we.txt" 2>&1
echo "check we rc=$? $(grep -E '^mxfp4 ' "$OUT/check_we.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ') at $SECONDS s"
echo "done at $SECONDS s"
