#!/usr/bin/env bash
# The indexer's GPU passes (issue 3), one device call each, from the repository root
# with the Debian libraries in .deps; logs under OUT (default ./gpu-out). Session 11
# ran them as scripts/s11-{diag,ab,ncu-sel,run,final}.sh (bench/results/2026-11-30-h200-s11).
#
#   diag             one-row timelines (STRATA_IDX_TRACE) with cold and warm L2, at 128K,
#                    and Nsight Compute of filter_kernel
#   ncu              Nsight Compute of NCU_K (default the select kernel) inside NCU_ARGS
#                    at the finest warp sampling: details.txt, sass.csv
#                    (read with scripts/ncu-stalls.py: where warps wait; and
#                    scripts/ncu-insts.py: instructions per warp, single-shot code)
#   run REV          `ctest -L gpu` (CTEST_R: only those; `^none$`: none) and an A/B of
#                    AB_ARGS against REV (gpu-ab.sh run; carry build-alt too, after
#                    `scripts/gpu-ab.sh prepare REV` here), then one-row timelines
#   final REV        run REV with every gpu test, then batch 32, --check at batch 1 and 8,
#                    the default scan, timelines
#   quick            build everything, the tests matching CTEST_R (default the indexer's;
#                    `^none$`: none), one-row timelines, and 1M batch 1 / 8 of both
#                    formats once (CTX: other contexts): a first look at a change
#   abq REV...       quick's build, tests and timelines, then each REV's CLI (after
#                    `scripts/gpu-ab.sh prepare REV...` here; carry build-alt too) and three
#                    rounds alternating the tree (M) and each REV (M first in odd rounds,
#                    last in even ones) over 1M batch 1 / 8 of both
#                    formats (CTX, BATCH, ROWS: other points), one line a point: graph us, eff,
#                    idx us and eff_call (bench indexer's columns; also OUT/abq.txt);
#                    ROUNDS: rounds (3); CTEST_L=gpu CTEST_R=. CTEST_J=4: every GPU
#                    test, 4 at a time; TRB8=1: one-row and batch-8 timelines of every
#                    binary, idx-cta lines too (tr_all.txt); CHECK=1: --check of the tree
#                    at batch 1 and 8 (rows CHECK_ROWS, default 1); CTEST_TO: the tests' timeout (300 s)
#   lean             the CLI alone (no tests), one-row timelines of both formats (the
#                    last two of each printed, labelled) and 1M batch 1 / 8 once: ~40 s of device
#                    time, for a first look at a tail change (carry .deps only)
#   scanend V...     the CLI of the tree (M) and of each tree build-alt/V (any folder with
#                    a source tree: `gpu-ab.sh prepare REV`, or a copy with a part of the
#                    kernel removed, as session 22's ablations), then ROUNDS (2) rounds of
#                    1M (CTX) batch 8 (BATCH) rows 1 / 2 (ROWSL, spaces) of both formats
#                    with STRATA_IDX_TRACE=1: a line a point with the latest scan CTA's
#                    loop end and the call's end (us, three calls) and the graph us;
#                    carry build-alt too
#   ranges           build everything, `ctest -L gpu` (CTEST_J=4 at a time; CTEST_R: only
#                    those), `--check` of FP8 rows 2 / 4 at 1M batch 8 with --pages
#                    shuffled, then ROUNDS (2) rounds of STRATA_IDX_RANGES 0 / 2 (MODES)
#                    over FP8 rows 2 / 4 (ROWS) at 1M (CTX) batch 8 / 32 (BATCH), pages
#                    seq and shuffled (PAGES): does the tile-range gain (s28) hold on a
#                    pool's scattered pages? One line a point (OUT/ranges.txt)
#   tools            cuobjdump and nvdisasm, gzipped, into OUT: scripts/sass.sh reads SASS
#                    here with them (this machine has nvcc and ptxas only)
set -u
mode=${1:-}
shift || true
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
B=build-gpu/strata
build() { # [TARGET] (default strata_cli; "all": every target, the tests too)
	cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
		-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
		cmake --build build-gpu -j16 --target "${1:-strata_cli}" >"$OUT/build.log" 2>&1
}
build_alts() { # JOBS V...: the CLI of each build-alt/V into build-alt/bV, in the background
	local j=$1 v
	shift
	for v in "$@"; do
		(cmake -S "build-alt/$v" -B "build-alt/b$v" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
			-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
			cmake --build "build-alt/b$v" -j"$j" --target strata_cli >"$OUT/build_$v.log" 2>&1) &
	done
}
traces() { # one-row timelines, both key formats (extra bench args: $@)
	for f in fp8 mxfp4; do
		STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f \
			--q8 --wgmma --reps 8 "$@" >"$OUT/tr_$f${1:+_$2}.txt" 2>&1
	done
}
show_traces() { # the last two timelines of each format (traces' files)
	for f in fp8 mxfp4; do grep -h "idx-trace" "$OUT/tr_$f.txt" | tail -2 | sed "s/^/$f /"; done
}
first_look() { # the tests matching CTEST_R (default the indexer's), one-row timelines
	ctest --test-dir build-gpu ${CTEST_L:+-L "$CTEST_L"} -R "${CTEST_R:-kernels_gpu_indexer}" \
		-j "${CTEST_J:-1}" --output-on-failure --timeout "${CTEST_TO:-300}" >"$OUT/ctest.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.txt" | head -20
	traces
	show_traces
}
points() { # BINARY [LABEL...]: 1M (CTX) batch 1 / 8 (BATCH), rows 1 (ROWS), both formats, a line a point
	local b=$1
	shift
	timeout 100 $b bench indexer --ctx "${CTX:-1M}" --batch "${BATCH:-1,8}" --rows "${ROWS:-1}" \
		--fmt fp8,mxfp4 --q8 --wgmma 2>&1 | grep -E "^(fp8|mxfp4) " |
		awk -v l="$*" '{print (l == "" ? "" : l " ") $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, "idx", $7, "eff_call", $NF}'
}
ab() { # REV: gpu-ab.sh run, its logs in OUT/ab.tgz
	OUT=$OUT CTEST_R="${CTEST_R-}" \
		AB_ARGS="${AB_ARGS:-bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma}" \
		scripts/gpu-ab.sh run "$1" >"$OUT/ab.log" 2>&1
	mv "$OUT/all.tgz" "$OUT/ab.tgz"
}
case $mode in
diag)
	build || exit 1
	traces --l2 cold
	traces --l2 warm
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 128K --batch 1 --rows 1 --fmt fp8 \
		--q8 --wgmma --reps 8 >"$OUT/tr_fp8_128k.txt" 2>&1
	NCU_K=${NCU_K:-regex:filter_kernel} "$0" ncu
	;;
ncu)
	build || exit 1
	args=${NCU_ARGS:-bench indexer --ctx 1M --batch 1 --rows 1 --fmt fp8 --q8 --wgmma --reps 2}
	timeout 200 ncu --set full --import-source no --warp-sampling-interval 0 \
		-k "${NCU_K:-regex:select_kernel}" --launch-skip 3 -c 1 -o "$OUT/ncu" \
		$B $args >"$OUT/ncu.log" 2>&1
	echo "ncu rc=$?"
	ncu -i "$OUT/ncu.ncu-rep" --page details >"$OUT/details.txt" 2>&1
	ncu -i "$OUT/ncu.ncu-rep" --page source --csv --print-source sass >"$OUT/sass.csv" 2>&1
	rm -f "$OUT/ncu.ncu-rep"
	;;
run)
	ab "$1"
	traces
	;;
final)
	CTEST_R= ab "$1"
	timeout 100 $B bench indexer --ctx 1M --batch 32 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma \
		>"$OUT/b32.txt" 2>&1
	timeout 150 $B bench indexer --check --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 \
		--wgmma >"$OUT/check.txt" 2>&1
	echo "check rc=$?" >>"$OUT/check.txt"
	timeout 60 $B bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 >"$OUT/dflt.txt" 2>&1
	traces
	;;
quick)
	build all || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
	first_look
	points $B
	;;
abq)
	build_alts 6 "$@"
	build all || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
	wait
	first_look
	tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls build*.log tr_*.txt ctest.txt 2>/dev/null) &&
		(cd "$OUT" && rm -f build*.log tr_fp8.txt tr_mxfp4.txt)
	for i in $(seq "${ROUNDS:-3}"); do # even rounds run the REVs first (no position bias)
		[ $((i % 2)) = 1 ] && points $B M "$i"
		for v in "$@"; do
			points "build-alt/b$v/strata" "$v" "$i"
		done
		[ $((i % 2)) = 0 ] && points $B M "$i"
	done | tee "$OUT/abq.txt" # every line also comes back as a file (output tails cut)
	if [ -n "${TRB8-}" ]; then # batch-1 and batch-8 timelines of every binary, one file
		for v in M "$@"; do
			b=build-alt/b$v/strata
			[ "$v" = M ] && b=$B
			for f in fp8 mxfp4; do
				for n in 1 8; do
					STRATA_IDX_TRACE=1 timeout 60 $b bench indexer --ctx 1M --batch $n \
						--rows 1 --fmt $f --q8 --wgmma --reps 4 2>&1 |
						grep -E "idx-(trace|cta)" | sed "s/^/$v $f b$n /"
				done
			done
		done >"$OUT/tr_all.txt"
	fi
	if [ -n "${CHECK-}" ]; then # the tree's results against the CPU twin
		timeout 150 $B bench indexer --check --ctx 1M --batch 1,8 --rows "${CHECK_ROWS:-1}" \
			--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
		echo "check rc=$?" | tee -a "$OUT/check.txt"
	fi
	;;
lean)
	build || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
	traces
	show_traces
	points $B
	;;
scanend)
	build_alts 4 "$@"
	build || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
	wait
	for i in $(seq "${ROUNDS:-2}"); do
		for v in M "$@"; do
			b=build-alt/b$v/strata
			[ "$v" = M ] && b=$B
			for f in fp8 mxfp4; do
				for r in ${ROWSL:-1 2}; do
					STRATA_IDX_TRACE=1 timeout 60 $b bench indexer --ctx "${CTX:-1M}" \
						--batch "${BATCH:-8}" --rows $r --fmt $f --q8 --wgmma --reps 4 \
						>"$OUT/t.txt" 2>&1
					t=$(grep idx-trace "$OUT/t.txt" | tail -3)
					echo "$i $v $f r$r | $(echo "$t" | grep -oE 'scan1 [0-9.]+/[0-9.]+' |
						tr '\n' ' ')| $(echo "$t" | grep -oE ' end [0-9.]+/[0-9.]+' |
						tr '\n' ' ')| $(grep -E '^(fp8|mxfp4) ' "$OUT/t.txt" |
						awk '{print "graph", $9}')"
				done
			done
		done
	done
	rm -f "$OUT/t.txt"
	;;
ranges)
	build all || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
	ctest --test-dir build-gpu -L gpu ${CTEST_R:+-R "$CTEST_R"} -j "${CTEST_J:-4}" \
		--output-on-failure --timeout "${CTEST_TO:-500}" >"$OUT/ctest.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.txt" | head -20
	timeout 150 $B bench indexer --check --pages shuffled --ctx 1M --batch 8 --rows 2,4 \
		--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
	echo "check rc=$?" | tee -a "$OUT/check.txt"
	for i in $(seq "${ROUNDS:-2}"); do
		for pg in ${PAGES:-seq shuffled}; do
			for v in ${MODES:-0 2}; do
				STRATA_IDX_RANGES=$v timeout 100 $B bench indexer --pages $pg \
					--ctx "${CTX:-1M}" --batch "${BATCH:-8,32}" --rows "${ROWS:-2,4}" \
					--fmt fp8 --q8 --wgmma 2>&1 | grep -E "^fp8 " |
					awk -v l="$pg r$v $i" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
			done
		done
	done | tee "$OUT/ranges.txt"
	;;
tools)
	for t in cuobjdump nvdisasm; do
		gzip -c "/usr/local/cuda/bin/$t" >"$OUT/$t.gz"
	done
	;;
*)
	echo "usage: $0 diag|ncu|run REV|final REV|quick|abq REV...|lean|scanend V...|ranges|tools" >&2
	exit 2
	;;
esac
