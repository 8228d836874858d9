# run 1 of session 12 (device): A/B of three select variants vs head, then ncu of scan_rs_kernel at 1M b1 MXFP4
set -u
OUT=${OUT:-$PWD/gpu-out}
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
OUT=$OUT CTEST_R='^none$' AB_ARGS="bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma" \
	scripts/gpu-ab.sh run fa5a3a8 3bf4f14 3b86327 >"$OUT/ab.log" 2>&1
mv "$OUT/all.tgz" "$OUT/ab.tgz"
d=$(mktemp -d); tar xzf "$OUT/ab.tgz" -C "$d"
for f in "$d"/*_[123].txt; do echo "== $(basename $f)"; grep -E "^(fp8|mxfp4) " "$f" | awk '{print $1,$4,$9,$16}'; done
grep -h "rc=" "$OUT/ab.log"
NCU_K=regex:scan_rs_kernel NCU_ARGS="bench indexer --ctx 1M --batch 1 --rows 1 --fmt mxfp4 --q8 --wgmma --reps 2" OUT=$OUT scripts/gpu-idx.sh ncu
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued|No Eligible|Executed Ipc|Block Limit" "$OUT/details.txt" | head -20
python3 scripts/ncu-stalls.py "$OUT/sass.csv" 40 > "$OUT/rs_stalls.txt" 2>&1; head -30 "$OUT/rs_stalls.txt"
