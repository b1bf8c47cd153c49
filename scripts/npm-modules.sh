#!/usr/bin/env bash
# scripts/npm-modules.sh DIR: installs, once, the npm packages that DIR's
# package.json and committed package-lock.json pin (npm ci, no install
# scripts) into a cache and prints the node_modules directory. The cache is
# the e2e harness's (internal/testenv NodeModules): $BOXD_CACHE, else
# boxd-cache in the temporary directory, keyed by the two files, so
# scripts/generate.sh and the tests share one install. Node and npm are the
# machine's (scripts/setup.sh installs them).
set -euo pipefail
dir=${1:?usage: $0 DIR}
[[ -f $dir/package-lock.json ]] || { echo "$dir: a committed package-lock.json is required" >&2; exit 1; }
cache=${BOXD_CACHE:-${TMPDIR:-/tmp}/boxd-cache}
key=$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -c1-16)
out=$cache/npm-$key
if [[ ! -e $out/.installed ]]; then
	mkdir -p "$cache"
	exec 9>"$cache/.npm.lock"
	flock -w 300 9 || { echo "timed out waiting for $cache/.npm.lock" >&2; exit 1; }
	if [[ ! -e $out/.installed ]]; then
		rm -rf "$out" # a partial install from a killed run
		mkdir -p "$out"
		cp "$dir/package.json" "$dir/package-lock.json" "$out/"
		if ! (cd "$out" && npm ci --ignore-scripts --no-audit --no-fund) >"$out.log" 2>&1; then
			cat "$out.log" >&2
			echo "npm ci for $dir failed" >&2
			exit 1
		fi
		rm -f "$out.log"
		: >"$out/.installed"
	fi
	flock -u 9
fi
echo "$out/node_modules"
