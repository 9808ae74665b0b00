#!/usr/bin/env bash
# install-browser.sh — install the headless browser that the web page's
# tests drive (package web: Chromium through the DevTools protocol).
#
# Installs Debian's chromium with apt-get where apt is available and we
# are root; elsewhere it says so and the browser tests skip, naming why.
# Idempotent: nothing happens when a Chromium is already on PATH.
set -euo pipefail

for b in chromium chromium-browser google-chrome google-chrome-stable; do
	if command -v "$b" >/dev/null 2>&1; then
		exit 0
	fi
done
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	echo "installing chromium (apt-get) for the web page's browser tests"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	command -v chromium >/dev/null 2>&1
	exit 0
fi
echo "install-browser.sh: no Chromium and no apt-get as root: the browser tests of package web will skip (install chromium to run them)" >&2
