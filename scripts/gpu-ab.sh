#!/usr/bin/env bash
# A/B of the working tree against other commits on the GPU machine, alternated so that
# drift between runs falls on both sides alike (the batch-1 ratios move by +-0.01
# from run to run; a per-layer trace median moves by ~0.3 us).
#
#   here:           scripts/gpu-ab.sh prepare REV...   (trees of REV... under build-alt/)
#   device tool:    OUT=$OUT [CTEST_R=regex] [AB_ARGS="bench decode ..."] \
#                   scripts/gpu-ab.sh run REV...        with carry [".deps", "build-alt"]
#
# run builds the tree (build-gpu, every target) and each REV (build-alt/b<REV>, the CLI
# only), runs `ctest -L gpu` on the tree (only the tests matching CTEST_R when set),
# then three rounds of AB_ARGS (default: 128K batch 1, 16 steps, --trace, the
# hisparse-early row) over the tree ("M") and each REV in turn, printing each run's
# ratios and per-CSA-layer scan+top-k and list/fetch. Logs go to OUT/all.tgz.
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
[ "$cmd" = run ] || { echo "usage: $0 prepare|run REV..." >&2; exit 2; }
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu
out=$(mktemp -d)
trap 'tar czf "${OUT:-$PWD/gpu-out}/all.tgz" -C "$out" .' EXIT
mkdir -p "${OUT:-$PWD/gpu-out}"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0))s] $*"; }
(cmake -B build-gpu -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >"$out/cfg_M.log" 2>&1 &&
	cmake --build build-gpu -j10 >"$out/build_M.log" 2>&1
	stamp "build M rc=$?") &
for v in "$@"; do
	(cmake -S "build-alt/$v" -B "build-alt/b$v" -DCMAKE_PREFIX_PATH="$deps/usr" \
		-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >"$out/cfg_$v.log" 2>&1 &&
		cmake --build "build-alt/b$v" -j6 --target strata_cli >"$out/build_$v.log" 2>&1
	stamp "build $v rc=$?") &
done
wait
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
