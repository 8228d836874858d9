#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer with
# find_package(strata) and, separately, with pkg-config.
# Args: BUILD_DIR SOURCE_DIR [PREFIX_PATH] (where the dependencies were found, if not /usr).
set -euo pipefail
build=$1 src=$2 deps=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix;$deps" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
"$tmp/cmake/consumer"
pcdir=$(dirname "$(find "$tmp/prefix" -name strata.pc)")
ldirs="" pcpath="$pcdir"
for d in ${deps//;/ }; do
  ldirs="$ldirs -L$d/lib/x86_64-linux-gnu -L$d/lib"
  pcpath="$pcpath:$d/lib/x86_64-linux-gnu/pkgconfig:$d/lib/pkgconfig"
done
flags=$(PKG_CONFIG_PATH="$pcpath" pkg-config --cflags --libs strata)
cc -o "$tmp/pc" "$src/tests/install/consumer/main.c" $flags $ldirs
"$tmp/pc"
