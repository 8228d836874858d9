#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer with
# find_package(strata) and, separately, with pkg-config. Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix;${CMAKE_PREFIX_PATH:-}" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
"$tmp/cmake/consumer"
pcdir=$(dirname "$(find "$tmp/prefix" -name strata.pc)")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs strata)
cc -o "$tmp/pc" "$src/tests/install/consumer/main.c" $flags
"$tmp/pc"
