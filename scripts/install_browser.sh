#!/usr/bin/env bash
# The tests' headless Chromium (tests/e2e: the report page and the operator's loop), Debian's
# package: Playwright drives the system's browser (`playwright install` cannot download one
# here). `make test` runs this; `make demo` does not need a browser. Idempotent.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  as_root=""
  [ "$(id -u)" -eq 0 ] || as_root="sudo"
  if ! { $as_root apt-get install -y -q chromium || { $as_root apt-get update -q && $as_root apt-get install -y -q chromium; }; }; then
    echo "install_browser: could not install Debian's chromium (the e2e tests open pages in it);" \
         "install it yourself: apt-get install -y chromium" >&2
    exit 1
  fi
fi
