#!/usr/bin/env bash
# The package as a user gets it: build the wheel, install it (no extras) into a fresh venv
# outside the source tree, and check that the library and the CLI work, and that a command
# needing the server extra says which extra to install instead of a traceback.
set -euo pipefail

BIN=$(cd "${1:-.venv/bin}" && pwd)
ROOT=$(pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
quiet() { "$@" >"$WORK/log" 2>&1 || { cat "$WORK/log" >&2; exit 1; }; }  # pip's output only on failure

quiet "$BIN/pip" wheel -q --no-deps -w "$WORK/dist" .
wheel=$(ls "$WORK"/dist/toolrelay-*.whl)
quiet "$BIN/python" -m venv "$WORK/venv"
quiet "$WORK/venv/bin/pip" install -q "$wheel"

cd "$WORK"  # away from ./src, so only the installed wheel can be imported
want=$("$BIN/python" -c "import toolrelay; print(toolrelay.__version__)")
got=$("$WORK/venv/bin/toolrelay" --version)
[ "$got" = "toolrelay $want" ] || { echo "check_wheel: --version printed '$got', want 'toolrelay $want'" >&2; exit 1; }
"$WORK/venv/bin/python" -c "import toolrelay, toolrelay.testing; assert toolrelay.__file__.startswith('$WORK/venv')"
# the web page ships: every file of src/toolrelay/web/static (its modules import each other)
pages=$(cd "$ROOT/src/toolrelay/web/static" && ls)
[ -n "$pages" ] || { echo "check_wheel: no files in src/toolrelay/web/static" >&2; exit 1; }
for page in $pages; do
  "$WORK/venv/bin/python" -c "from importlib.resources import files; assert files('toolrelay.web').joinpath('static', '$page').is_file(), '$page'"
done
env -u OPENAI_BASE_URL "$WORK/venv/bin/python" "$ROOT/examples/quickstart.py" >/dev/null
"$WORK/venv/bin/toolrelay" replay "$ROOT/tests/fixtures/streams/deepseek/reasoning-tool-call.sse" --json >/dev/null

set +e
out=$(HOME="$WORK" "$WORK/venv/bin/toolrelay" serve 2>&1)
code=$?
set -e
if [ "$code" != 2 ] || ! grep -q "pip install 'toolrelay\[server\]'" <<<"$out" || grep -q Traceback <<<"$out"; then
  echo "check_wheel: 'toolrelay serve' without the server extra (exit $code) said:" >&2
  echo "$out" >&2
  exit 1
fi
echo "check_wheel: $(basename "$wheel") installs alone; import, --version, quickstart, replay, the web page and the server-extra hint work"
