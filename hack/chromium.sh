#!/usr/bin/env bash
# Prints the path of a headless Chromium for the browser tests
# (testkit/browser, AUTHVAULT_CHROMIUM), installing Debian's
# chromium-headless-shell package with apt-get when none is found.
#
# It looks, in order, at $AUTHVAULT_CHROMIUM (which must then be an
# executable: a wrong value is an error, never passed over), at
# chromium-headless-shell on PATH (the program behind Debian's wrapper
# script: /usr/lib/chromium/chromium-headless-shell), and then installs the
# package, with sudo when not root. Without apt-get (macOS, another
# distribution) it fails and says what to install.
#
# --cached: only tell whether one is found, installing nothing
# (hack/tools.sh). Progress goes to stderr, the path to stdout.
set -euo pipefail

package=chromium-headless-shell
cache=${AUTHVAULT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/authvault}

# unwrap PATH: the program PATH runs. Debian's /usr/bin/chromium-headless-shell
# is a shell script that runs /usr/lib/chromium/chromium-headless-shell as its
# child, not with exec: a test that kills the script to end the browser would
# leave the browser running, so the browser is started itself.
unwrap() {
  local real
  if [ "$(head -c 2 "$1")" = '#!' ]; then
    real=$(grep -o "/[^[:space:]\"']*/$package" "$1" | head -n 1 || true)
    if [ -n "$real" ] && [ -x "$real" ] && [ "$(head -c 4 "$real")" = $'\x7fELF' ]; then
      echo "$real"
      return
    fi
  fi
  echo "$1"
}

# found: prints the browser's path, or fails when there is none.
found() {
  local path
  if [ -n "${AUTHVAULT_CHROMIUM:-}" ]; then
    if [ -x "$AUTHVAULT_CHROMIUM" ] && [ ! -d "$AUTHVAULT_CHROMIUM" ]; then
      echo "$AUTHVAULT_CHROMIUM"
      return 0
    fi
    echo "chromium: AUTHVAULT_CHROMIUM=$AUTHVAULT_CHROMIUM is not an executable file" >&2
    exit 1
  fi
  path=$(command -v "$package") || return 1
  unwrap "$path"
}

if found; then
  exit 0
fi
[ "${1:-}" = --cached ] && exit 1

if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: no $package on PATH and no apt-get to install it with: install a headless Chromium (Debian's $package, or Chrome's chrome-headless-shell) and set AUTHVAULT_CHROMIUM to its path" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "chromium: installing $package needs root, and there is no sudo: run apt-get install $package as root, or set AUTHVAULT_CHROMIUM" >&2
    exit 1
  fi
  sudo=(sudo)
fi

# One install at a time (make test's background tools stage beside a go
# test run by hand): two apt-gets at once would fail on dpkg's own lock.
mkdir -p "$cache"
. "$(cd "$(dirname "$0")" && pwd)/lock.sh"
take_lock chromium "$cache/chromium.lock"
if found; then
  exit 0
fi

start=$SECONDS
echo "chromium: installing Debian's $package with apt-get ..." >&2
# apt's output is progress: stderr, so that stdout stays the path.
"${sudo[@]}" apt-get update >&2
# fonts-liberation: a recommendation of chromium-common's, so that pages
# render with real fonts; the other recommendations (udev, a notification
# daemon) a headless browser does not use.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$package" fonts-liberation >&2
echo "chromium: installed $package in $((SECONDS - start)) s" >&2
if ! found; then
  echo "chromium: apt-get installed $package but it is not on PATH; it installed:" >&2
  dpkg -L "$package" | grep /bin/ >&2 || true
  exit 1
fi
