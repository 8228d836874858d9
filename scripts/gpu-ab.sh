#!/usr/bin/env bash
# A/B of the working tree against other commits on the GPU machine, alternated so that
# drift between runs falls on both sides alike (the batch-1 ratios move by +-0.01
# from run to run; a per-layer trace median moves by ~0.3 us).
#
#   here:           scripts/gpu-ab.sh prepare REV...   (trees of REV... under build-alt/)
#   device tool:    OUT=$OUT [CTEST_R=regex] [AB_ARGS="bench decode ..."] \
#                   scripts/gpu-ab.sh run REV...        with carry [".deps", "build-alt"]
#                   OUT=$OUT [NCU_ARGS="bench indexer ..."] [NCU_K=regex] \
#                   scripts/gpu-ab.sh ncu REV...        (the same carry)
#
# run builds the tree (build-gpu, every target) and each REV (build-alt/b<REV>, the CLI
# only), runs `ctest -L gpu` on the tree (only the tests matching CTEST_R when set),
# then three rounds of AB_ARGS (default: 128K batch 1, 16 steps, --trace, the
# hisparse-early row) over the tree ("M") and each REV in turn, printing each run's
# ratios and per-CSA-layer scan+top-k and list/fetch. Logs go to OUT/all.tgz.
#
# ncu builds the CLI of the tree and of each REV, then runs Nsight Compute on one launch
# of the kernels NCU_K names (default: the indexer's wgmma scans) inside NCU_ARGS
# (default: 1M keys, batch 8, FP8) on each side: the full set (stall reasons, pipes,
# memory) and the SASS with its per-line samples (details_*.txt, sass_*.csv).
set -u
cmd=${1:-}
shift || true
if [ "$cmd" = prepare ]; then
	for v in "$@"; do
		rm -rf "build-alt/$v" && mkdir -p "build-alt/$v" &&
			git archive "$v" | tar x -C "build-alt/$v" || exit 1
	done
	exit 0
fi
[ "$cmd" = run ] || [ "$cmd" = ncu ] || { echo "usage: $0 prepare|run|ncu REV..." >&2; exit 2; }
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu
out=$(mktemp -d)
trap 'tar czf "${OUT:-$PWD/gpu-out}/all.tgz" -C "$out" .' EXIT
mkdir -p "${OUT:-$PWD/gpu-out}"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0))s] $*"; }
target=
[ "$cmd" = ncu ] && target=strata_cli
(cmake -B build-gpu -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >"$out/cfg_M.log" 2>&1 &&
	cmake --build build-gpu -j10 ${target:+--target $target} >"$out/build_M.log" 2>&1
	stamp "build M rc=$?") &
for v in "$@"; do
	(cmake -S "build-alt/$v" -B "build-alt/b$v" -DCMAKE_PREFIX_PATH="$deps/usr" \
		-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTRATA_REV="$v" \
		>"$out/cfg_$v.log" 2>&1 &&
		cmake --build "build-alt/b$v" -j6 --target strata_cli >"$out/build_$v.log" 2>&1
	stamp "build $v rc=$?") &
done
wait
if [ "$cmd" = ncu ]; then
	args=${NCU_ARGS:-bench indexer --ctx 1M --batch 8 --rows 1 --fmt fp8 --q8 --wgmma --reps 2}
	for v in M "$@"; do
		b=build-alt/b$v/strata
		[ "$v" = M ] && b=build-gpu/strata
		timeout 150 ncu --set full --import-source no -k "${NCU_K:-regex:scan_(ss|rs)_kernel}" \
			--launch-skip 3 -c 1 -o "$out/ncu_$v" "$b" $args >"$out/ncu_$v.log" 2>&1
		stamp "ncu $v rc=$?"
		ncu -i "$out/ncu_$v.ncu-rep" --page details >"$out/details_$v.txt" 2>&1
		ncu -i "$out/ncu_$v.ncu-rep" --page source --csv --print-source sass >"$out/sass_$v.csv" 2>&1
		grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued|No Eligible" \
			"$out/details_$v.txt" | head -12
	done
	exit 0
fi
ctest --test-dir build-gpu -L gpu ${CTEST_R:+-R "$CTEST_R"} --output-on-failure -j4 --timeout 300 \
	>"$out/ctest_gpu.txt" 2>&1
grep -E "tests passed|Failed|\*\*\*" "$out/ctest_gpu.txt"
stamp ctest
args=${AB_ARGS:-bench decode --check --contexts 128K --batches 1 --reps 16 --trace --rows hisparse-early}
for i in 1 2 3; do
	for v in M "$@"; do
		b=build-alt/b$v/strata
		[ "$v" = M ] && b=build-gpu/strata
		timeout 120 "$b" $args >"$out/${v}_$i.txt" 2>&1
		echo "$v $i: $(grep -E '^ *[0-9]+ +[0-9]+ ' "$out/${v}_$i.txt" | awk '{print $3, $4, $8, $10}' | tr '\n' ' ')| $(grep '^# trace' "$out/${v}_$i.txt" | grep -oE 'scan\+top-k [0-9.]+, list/fetch [0-9.]+' | tr '\n' ' ')"
	done
done
stamp done
