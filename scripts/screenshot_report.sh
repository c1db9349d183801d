#!/usr/bin/env bash
# Renders a gate HTML report in headless Chromium and saves a full-page screenshot next to it (or to OUT),
# then checks that the page's inline plots are there and that the screenshot is not blank.
# Usage: bash scripts/screenshot_report.sh reports/gate-NAME.html [OUT.png]
# Installs Debian's chromium when missing (run by hand; not part of CI).
set -euo pipefail
html="${1:?usage: screenshot_report.sh REPORT.html [OUT.png]}"
out="${2:-${html%.html}-screenshot.png}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
fi
plots=$(grep -o "data:image/png;base64" "$html" | wc -l)
echo "report: $html ($plots inline PNG plots)"
[ "$plots" -gt 0 ] || { echo "error: the report has no plots" >&2; exit 1; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 120 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --window-size=1280,2400 --screenshot="$(realpath -m "$out")" "file://$(realpath "$html")" 2>/dev/null || true
[ -s "$out" ] || { echo "error: chromium wrote no screenshot" >&2; exit 1; }
# Not blank: the screenshot must have many distinct colours (text + plots), checked with matplotlib.
/usr/bin/python3 - "$out" <<'PY'
import sys
import matplotlib.image as mpimg
import numpy as np
img = mpimg.imread(sys.argv[1])
colours = len(np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0))
print(f"screenshot: {sys.argv[1]} {img.shape[1]}x{img.shape[0]} px, {colours} distinct colours")
sys.exit(0 if colours > 50 else 1)
PY
