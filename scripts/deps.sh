#!/usr/bin/env bash
# Installs the Debian packages strata builds with, when any is missing (needs root).
set -euo pipefail
pkgs="build-essential cmake pkg-config liburing-dev librocksdb-dev libxxhash-dev check"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
