#!/usr/bin/env bash
# Builds fio (the `strata bench tiers` baseline) from Debian's source tarball with no
# optional engines, so that it links only libc, libm and zlib, and puts it in
# DEPS/usr/bin (default .deps, the folder ../shared/tools/gpu-deps.sh makes). The GPU
# machine cannot install packages; carry .deps there and put .deps/usr/bin on PATH.
#
#   usage: scripts/gpu-fio.sh [DEPS]
set -euo pipefail
deps=${1:-.deps}
ver=3.33
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -sSfL -o "$tmp/fio.tar.gz" "http://deb.debian.org/debian/pool/main/f/fio/fio_${ver}.orig.tar.gz"
tar -xzf "$tmp/fio.tar.gz" -C "$tmp"
cd "$tmp/fio-$ver"
./configure --disable-numa --disable-rdma --disable-rados --disable-rbd --disable-http \
	--disable-gfapi --disable-pmem --disable-tcmalloc --disable-libzbc --disable-xnvme \
	--disable-dfs --disable-native >/dev/null
make -j"$(nproc)" fio >/dev/null
cd - >/dev/null
mkdir -p "$deps/usr/bin"
cp "$tmp/fio-$ver/fio" "$deps/usr/bin/fio"
echo "$deps/usr/bin/fio: $("$deps/usr/bin/fio" --version)"
