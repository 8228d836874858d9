# session 12, run 2 (device): the gather tail against 7bd5f84: every GPU test, the 1M A/B,
# --check, the other contexts, timelines
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
BASE=${BASE:-7bd5f84}
CTEST_R= OUT=$OUT scripts/gpu-idx.sh run "$BASE"
grep -E "tests passed|Failed|\*\*\*|rc=" "$OUT/ab.log"
d=$(mktemp -d); tar xzf "$OUT/ab.tgz" -C "$d"
grep -E "Failed|FAIL|Assertion|differences" "$d/ctest_gpu.txt" | head -30
for f in "$d"/*_[123].txt; do echo "== $(basename $f)"; grep -E "^(fp8|mxfp4) " "$f" | awk '{print $1,$4,$9,$16}'; done
B=build-gpu/strata
timeout 120 $B bench indexer --check --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print $1,$3,$4,$9,$16,$NF}'
for v in M "$BASE"; do
	b=build-alt/b$v/strata; [ "$v" = M ] && b=$B
	timeout 100 $b bench indexer --ctx 32K,128K,512K --batch 1 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma >"$OUT/ctx_$v.txt" 2>&1
	echo "== ctx $v"; grep -E "^(fp8|mxfp4) " "$OUT/ctx_$v.txt" | awk '{print $1,$3,$9}'
done
for f in "$OUT"/tr_*.txt; do echo "== $(basename $f)"; grep "idx-trace" "$f" | tail -2; done
tar czf "$OUT/logs.tgz" -C "$d" . && rm -f "$OUT/ab.tgz"
