#!/usr/bin/env bash
# One pass over the GPU side on a machine like the H200 of the device tool: build,
# the gpu tests, then the benchmarks that carry the issues' targets, each into its own
# file under OUT (default ./gpu-out). Run from the repository root with the Debian
# libraries in .deps (../shared/tools/gpu-deps.sh .deps; fio: scripts/gpu-fio.sh .deps).
#
#   usage: [REV=commit] scripts/gpu-run.sh [quick|decode|targets|early|ediag|ratios|b1|s7|s8f|s8h|scrub|pf|sel|trace|step|prio|final|dry|huge|diag|full]  (quick: tests + 1-row indexer,
#                                               decode 128K b1/b32 with every miss path,
#                                               attention; ~4 min. decode: quick + 1M
#                                               b1/b8, default and 8192-entry hot cache.
#                                               targets: quick's tests, attention and
#                                               indexer, then fetch 512/32K and decode
#                                               128K b1/b32 and 1M b32, ~8 min)
set -uo pipefail
mode=${1:-quick}
# Logs go to a scratch folder; at exit they are packed into OUT/all.tgz (the device
# tool returns at most 8 files).
dest=${OUT:-$PWD/gpu-out}
out=$(mktemp -d /tmp/gpu-run.XXXXXX)
mkdir -p "$dest"
trap 'tar czf "$dest/all.tgz" -C "$out" .' EXIT
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$deps/usr/bin:$PATH
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
# REV=<commit>: the revision the result headers name (the device machine's copy of
# the tree may carry a stale .git); default: git HEAD there.
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release -DSTRATA_REV="${REV:-}" >"$out/cfg.log" 2>&1 &&
	cmake --build build-gpu -j"$(nproc)" >"$out/build.log" 2>&1 ||
	{ grep -B3 -A10 error "$out/build.log" | head -60; exit 1; }
stamp build
case $mode in # modes that run their own tests, or none
final | dry | ediag | ratios | b1 | s7 | s8f | s8h | scrub | pf | sel) ;;
*)
	ctest --test-dir build-gpu -L gpu --output-on-failure -j4 --timeout 300 >"$out/ctest_gpu.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$out/ctest_gpu.txt"
	stamp ctest
	;;
esac
B=build-gpu/strata
run() { # name timeout args...
	local name=$1 t=$2
	shift 2
	timeout "$t" stdbuf -oL "$B" "$@" >"$out/$name.txt" 2>&1
	stamp "$name rc=$?"
	grep -v '^#' "$out/$name.txt" | head -40
}
if [ "$mode" = dry ]; then # what early staging's machinery costs without its kernel (no tests)
	T="bench decode --check --contexts 128K --batches 1 --reps 8 --trace"
	run d_dry 100 $T --rows hisparse-direct,hisparse-early --early-dry
	run d_early 100 $T --rows hisparse-early
	run d_1m_dry 150 bench decode --check --contexts 1M --batches 1 --reps 8 --trace --rows hisparse-direct,hisparse-early --early-dry --host-gib 110
	exit 0
fi
if [ "$mode" = final ]; then # issue 4's gather and hot-cache figures, issue 5's 1M batch 32 (~5 min, no tests)
	run fetch 150 bench fetch --check --sizes 512,32768
	run decode_1m_b32 300 bench decode --check --contexts 1M --batches 32 --reps 4 --rows hisparse-direct --host-gib 110
	exit 0
fi
if [ "$mode" = prio ]; then # the compute stream's priority and the early staging's shape at batch 1
	T="bench decode --check --contexts 128K --batches 1 --reps 8 --trace"
	run p_base 100 $T --rows hisparse-direct,hisparse-early
	run p_prio 100 $T --rows hisparse-direct,hisparse-early --priority-main
	run p_prio_c4 100 $T --rows hisparse-early --priority-main --early-ctas 4
	run p_prio_s1 100 $T --rows hisparse-early --priority-main --early-slots 1
	run p_step 200 bench decode --check --contexts 128K --batches 1,8,32 --reps 8 --rows hisparse-direct,hisparse-early --priority-main
	run p_1m 200 bench decode --check --contexts 1M --batches 1 --reps 8 --rows hisparse-direct,hisparse-early --priority-main --host-gib 110
	exit 0
fi
if [ "$mode" = step ]; then # issue 5's decode ratios, mean and median, plus a batch-1 trace (~5 min)
	run decode_128k 240 bench decode --check --contexts 128K --batches 1,8,32 --reps 8 --rows hisparse-direct
	run trace_128k 100 bench decode --check --contexts 128K --batches 1 --reps 8 --rows hisparse-direct --trace
	run decode_1m 240 bench decode --check --contexts 1M --batches 1,8 --reps 8 --rows hisparse-direct --host-gib 110
	exit 0
fi
if [ "$mode" = s7 ]; then # gpu tests, issue 5's ratios paired at 32 steps, where the 1M indexer's time goes (ncu), the gather from packed host entries, ~8 min
	ctest --test-dir build-gpu -L gpu --output-on-failure -j4 --timeout 300 >"$out/ctest_gpu.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$out/ctest_gpu.txt"
	stamp ctest
	run p_128k 240 bench decode --check --paired --contexts 128K --batches 1,8,32 --reps 32 --rows hisparse-direct
	run p_1m 240 bench decode --check --paired --contexts 1M --batches 1,8 --reps 32 --rows hisparse-direct --host-gib 110
	timeout 150 ncu --set full -k 'regex:scan_kernel|filter_kernel|select_kernel' --launch-skip 6 -c 3 \
		"$B" bench indexer --ctx 1M --batch 1 --rows 1 --fmt mxfp4 --reps 3 >"$out/ncu_indexer.txt" 2>&1
	stamp "ncu indexer rc=$?"
	run fetch 150 bench fetch --check --sizes 512,8192,32768,262144
	exit 0
fi
if [ "$mode" = pf ]; then # issue 4: the gather with L2 prefetch sizes 64/128/256 B (never run yet) and its gpu test, ~3 min
	ctest --test-dir build-gpu -R kernels_gpu_gather --output-on-failure --timeout 300 >"$out/ctest_gather.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$out/ctest_gather.txt" | head -5
	stamp ctest
	run fetch_pf 200 bench fetch --check --sizes 512,8192,32768,262144
	exit 0
fi
if [ "$mode" = scrub ]; then # issue 5's 128K/1M b1 ratio with L2 scrubbed before every step: unpaired both orders and paired (never run yet), ~4 min
	D="bench decode --check --batches 1 --reps 32 --rows hisparse-direct --l2-scrub"
	run s_first 120 $D --contexts 128K
	run s_last 120 $D --contexts 128K --resident-last
	run s_paired 120 $D --contexts 128K --paired
	run s_1m 200 $D --contexts 1M --paired --host-gib 110
	exit 0
fi
if [ "$mode" = sel ]; then # issue 3: timelines of the scan's flush, the select and its sort (STRATA_IDX_TRACE); SEL_TEST=1: then kernels_gpu_indexer, ~1 - 3 min
	for f in fp8 mxfp4; do
		STRATA_IDX_TRACE=1 run sel_wg_$f 60 bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 --wgmma --reps 8
	done
	STRATA_IDX_TRACE=1 run sel_dflt 60 bench indexer --ctx 1M --batch 1 --rows 1 --fmt fp8 --reps 8
	STRATA_IDX_TRACE=1 run sel_b8 60 bench indexer --ctx 1M --batch 8 --rows 1 --fmt fp8 --q8 --wgmma --reps 4
	[ -n "${SEL_TEST:-}" ] && ctest --test-dir build-gpu -R kernels_gpu_indexer --output-on-failure --timeout 300 >"$out/ctest_indexer.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$out/ctest_indexer.txt" 2>/dev/null
	exit 0
fi
if [ "$mode" = s8h ]; then # session 8's last check: gpu tests on the final GPU code, the 1M indexer points, ~3 min
	ctest --test-dir build-gpu -L gpu --output-on-failure -j4 --timeout 300 >"$out/ctest_gpu.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$out/ctest_gpu.txt" | head -20
	stamp ctest
	run wg 60 bench indexer --check --ctx 1M --batch 1,8 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma
	run dflt 60 bench indexer --check --ctx 1M --batch 1,8 --rows 1 --fmt mxfp4,fp8
	exit 0
fi
if [ "$mode" = s8f ]; then # session 8's closing figures: gpu tests, indexer sweep (cold L2) default and wgmma, issue 5's paired ratios, ~7 min
	ctest --test-dir build-gpu -L gpu --output-on-failure -j4 --timeout 300 >"$out/ctest_gpu.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*|wgmma scan" "$out/ctest_gpu.txt" | head -20
	stamp ctest
	run idx_sweep 200 bench indexer --check --ctx 32K,128K,512K,1M --batch 1,8,32 --rows 1 --fmt mxfp4,fp8
	run idx_rows4 100 bench indexer --check --ctx 128K,1M --batch 1,8 --rows 4 --fmt mxfp4,fp8
	run idx_wg 150 bench indexer --check --ctx 128K,1M --batch 1,8,32 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma
	run p_128k 150 bench decode --check --paired --contexts 128K --batches 1,8 --reps 32 --rows hisparse-direct
	run p_1m 150 bench decode --check --paired --contexts 1M --batches 1 --reps 32 --rows hisparse-direct --host-gib 110
	exit 0
fi
if [ "$mode" = b1 ]; then # batch-1 ratios at 32 steps and the isolated kernel times of EARLY (no tests), ~2 min
	run b1_128k 60 bench decode --check --paired --contexts 128K --batches 1 --reps 32 --rows hisparse-direct
	run b1_1m 90 bench decode --check --paired --contexts 1M --batches 1 --reps 32 --rows hisparse-direct --host-gib 110
	for v in "hisparse-early" "hisparse-early --early-slots 1"; do
		n=ncu_$(echo "$v" | tr -c 'a-z0-9\n' _)
		timeout 60 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
			"$B" bench decode --contexts 128K --batches 1 --reps 2 --rows $v --profile >"$out/$n.csv" 2>"$out/$n.err"
		stamp "$n rc=$?"
	done
	exit 0
fi
if [ "$mode" = ratios ]; then # issue 5's ratios with AUTO (no tests), ~4 min
	run decode_128k 200 bench decode --check --paired --contexts 128K --batches 1,8,32 --reps 16 --rows hisparse-direct,hisparse-staged
	run trace_128k 100 bench decode --check --paired --contexts 128K --batches 1 --reps 16 --rows hisparse-direct --trace
	run decode_1m 200 bench decode --check --paired --contexts 1M --batches 1,8 --reps 16 --rows hisparse-direct --host-gib 110
	exit 0
fi
run attn 60 bench attn --check
run indexer_1row 60 bench indexer --phases --check --ctx 128K,1M --batch 1 --rows 1
if [ "$mode" = targets ]; then # one pass over the open issues' figures (~8 min)
	run fetch 120 bench fetch --check --sizes 512,32768
	run decode_128k 200 bench decode --check --contexts 128K --batches 1,32 --reps 5
	run decode_1m_b32 240 bench decode --check --contexts 1M --batches 32 --reps 3 --rows hisparse-direct --host-gib 110
	exit 0
fi
if [ "$mode" = diag ]; then # where batch 1 loses: spare SMs for the side streams, the bus taken out
	for v in "" "--spare-sms 1" "--spare-sms 2" "--host-on-device" "--host-on-device --spare-sms 1"; do
		run "diag_128k${v// /}" 120 bench decode --check --contexts 128K --batches 1,8 --reps 5 --rows hisparse-direct $v
	done
	run diag_1m_spare1 150 bench decode --check --contexts 1M --batches 1 --reps 5 --rows hisparse-direct --spare-sms 1
	exit 0
fi
if [ "$mode" = huge ]; then # the host tier on 2 MiB pages against 4 KiB pages, ~4 min
	echo 4096 >/proc/sys/vm/nr_hugepages 2>/dev/null; grep -i hugepages_ /proc/meminfo | head -3
	run decode_128k_plain 150 bench decode --check --contexts 128K --batches 1,32 --reps 5 --rows hisparse-direct
	run decode_128k_huge 150 bench decode --check --contexts 128K --batches 1,32 --reps 5 --rows hisparse-direct,hisparse-early --host-huge
	run decode_1m_huge 200 bench decode --check --contexts 1M --batches 1 --reps 5 --rows hisparse-direct --host-huge
	run fetch_huge 100 bench fetch --check --sizes 512,32768
	exit 0
fi
if [ "$mode" = trace ]; then # where a batch-1 step's time goes, per CSA layer and kernel
	run trace_128k 150 bench decode --check --contexts 128K --batches 1 --reps 8 --rows hisparse-direct,hisparse-early --trace
	run trace_128k_hod 100 bench decode --check --contexts 128K --batches 1 --reps 8 --rows hisparse-direct --trace --host-on-device
	run trace_1m 150 bench decode --check --contexts 1M --batches 1 --reps 5 --rows hisparse-direct,hisparse-early --trace --host-gib 110
	timeout 240 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
		"$B" bench decode --contexts 128K --batches 1 --reps 2 --rows hisparse-direct,hisparse-early --profile \
		>"$out/ncu_b1.csv" 2>"$out/ncu_b1.err"
	stamp "ncu rc=$?"
	exit 0
fi
if [ "$mode" = ediag ]; then # where early staging's extra top-k time goes at batch 1 (no tests)
	T="bench decode --check --contexts 128K --batches 1 --reps 16 --trace"
	run e_base 100 $T --rows hisparse-direct,hisparse-early
	run e_slots1 100 $T --rows hisparse-early --early-slots 1
	run e_ctas4 100 $T --rows hisparse-early --early-ctas 4
	timeout 200 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
		"$B" bench decode --contexts 128K --batches 1 --reps 2 --rows hisparse-direct,hisparse-early --profile \
		>"$out/ncu_b1.csv" 2>"$out/ncu_b1.err"
	stamp "ncu rc=$?"
	exit 0
fi
if [ "$mode" = early ]; then # early staging inside the indexer call (EARLY) against AUTO and STAGED, ~6 min
	R=hisparse-staged,hisparse-direct,hisparse-early
	run decode_128k 240 bench decode --check --contexts 128K --batches 1,8,32 --reps 8 --rows $R
	run trace_128k 120 bench decode --check --contexts 128K --batches 1 --reps 16 --rows $R --trace
	run decode_1m 240 bench decode --check --contexts 1M --batches 1,8 --reps 8 --rows $R --host-gib 110
	exit 0
fi
run decode_128k 200 bench decode --check --direct-all --contexts 128K --batches 1,32 --reps 5
if [ "$mode" = decode ]; then
	run decode_1m 420 bench decode --check --direct-all --contexts 1M --batches 1,8 --reps 5 --host-gib 110
	run decode_1m_hot8k 300 bench decode --check --direct --contexts 1M --batches 1,8 --reps 5 --hot 8192 --host-gib 110
fi
if [ "$mode" = full ]; then
	run decode_128k_tc 150 bench decode --check --direct --tc --contexts 128K --batches 1,32 --reps 5
	run decode_128k_b8 90 bench decode --check --direct --contexts 128K --batches 8 --reps 5
	run decode_1m 300 bench decode --check --direct --contexts 1M --batches 1,8,32 --reps 5 --host-gib 110
	run indexer 240 bench indexer
	run fetch 90 bench fetch --check
	run tiers 240 bench tiers --file /tmp/strata-tiers.dat --size 4G
	run prefix 120 bench prefix --check --reps 10 --dir /tmp/strata-pfx
	run demo 90 demo
fi
