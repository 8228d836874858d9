#!/usr/bin/env bash
# SASS of one kernel of a .cu file, compiled here for sm_90a, without device time:
#
#   scripts/sass.sh kernels/indexer_wgmma.cu 'scan_rs_kernel.*Lb1E' [TOOLS]
#
# prints ptxas's register and spill lines for every kernel, then the SASS of the kernels
# whose mangled names match the regex (one instruction a line, encodings dropped).
# cuobjdump and nvdisasm are not on this machine (nvcc and ptxas are): fetch them once
# from the GPU machine with `scripts/gpu-idx.sh tools` (they come back gzipped in $OUT),
# gunzip them into TOOLS (default /tmp/cu) and chmod +x.
set -euo pipefail
src=$1 re=$2 tools=${3:-/tmp/cu}
export PATH=$tools:$PATH
obj=$(mktemp --suffix=.o)
trap 'rm -f "$obj"' EXIT
nvcc -O3 -std=c++17 -I. -Ikernels -isystem=/usr/local/cuda/include \
	--generate-code=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
	-DSTRATA_HAVE_CUDA=1 -c "$src" -o "$obj" -Xptxas -v 2>&1 |
	grep -E "Compiling entry|Used [0-9]+ registers|spill" | sed 's/ptxas info *: //'
command -v cuobjdump >/dev/null || { echo "no cuobjdump in $tools (see the header)" >&2; exit 1; }
cuobjdump -sass "$obj" | grep -oE "Function : [^ ]+" | awk '{print $3}' | grep -E "$re" |
	while read -r fn; do
		echo "== $fn"
		cuobjdump -sass -fun "$fn" "$obj" | grep -E '^\s+/\*[0-9a-f]{4}\*/' |
			sed 's@/\* 0x[0-9a-f]* \*/@@; s/ \+/ /g; s/ ;//'
	done
