#!/usr/bin/env bash
# Installs the Debian 12 packages urt needs (cmake/debian-packages.txt, one
# per line, # comments). Does nothing, and needs no network, when all of them
# are installed already. Never prompts. Used by cmake/test.sh and .ci/run.
set -euo pipefail

list="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/debian-packages.txt"
[[ -r "$list" ]] || { echo "install-deps: cannot read $list" >&2; exit 1; }

packages=()
while IFS= read -r line || [[ -n "$line" ]]; do
  line="${line%%#*}"                      # drop comments
  line="${line//[[:space:]]/}"            # and blanks
  [[ -n "$line" ]] && packages+=("$line")
done <"$list"
[[ ${#packages[@]} -gt 0 ]] || { echo "install-deps: $list lists no package" >&2; exit 1; }

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages of $(basename "$list") are installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update </dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}" </dev/null
