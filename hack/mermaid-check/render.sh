#!/usr/bin/env bash
# render.sh DIAGRAM.mmd OUT.png — draws a Mermaid diagram (kubectl express
# history -o mermaid, plan -o mermaid) to a PNG with Mermaid's own renderer
# in headless Chromium (Debian package chromium). Run `npm ci` here first.
set -euo pipefail
in=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
page=$(mktemp --suffix=.html)
trap 'rm -f "$page"' EXIT
{
  echo '<!doctype html><html><body style="background:white">'
  echo '<pre class="mermaid">'
  sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' "$in"
  echo '</pre><script>'
  cat "$here/node_modules/mermaid/dist/mermaid.min.js"
  echo '</script><script>mermaid.initialize({startOnLoad: true, gantt: {useWidth: 1400}});</script></body></html>'
} >"$page"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,${HEIGHT:-700} \
  --virtual-time-budget=5000 --screenshot="$out" "file://$page" 2>/dev/null
echo "wrote $out"
