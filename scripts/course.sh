#!/usr/bin/env bash
# One entry point for a fresh machine: set up .venv (once, from the lock), then
#   run  [LAB ...] [--profile ...]   execute the labs headless -> build/run/report.html
#   test [PYTEST ARGS ...]           the whole test suite (unit tests + every lab via papermill and nbval)
#   lock                             re-pin scripts/requirements-py311.lock from the current .venv
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv
LOCK=scripts/requirements-py311.lock
STAMP=$VENV/.labkit-installed

die() { echo "course.sh: $*" >&2; exit 2; }

"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || die "needs Python >= 3.11 (found: $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11"

want="$(cat "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1) $("$PY" --version 2>&1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "course.sh: setting up $VENV (first run, or the lock changed) ..."
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" \
    || die "could not create a virtual environment. On Debian/Ubuntu: apt-get install python3-venv"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  if "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    # CI's exact pins (Python 3.11 resolves jax 0.10.x); packages not in the lock float.
    "$VENV/bin/python" -m pip install --quiet -c "$LOCK" -e '.[dev]'
  else
    # Python 3.12+ gets jax >= 0.11: lower bounds from pyproject.toml, no lock.
    "$VENV/bin/python" -m pip install --quiet -e '.[dev]'
  fi
  echo "$want" > "$STAMP"
fi
export PATH="$PWD/$VENV/bin:$PATH"

cmd=${1:-test}
shift || true
case "$cmd" in
  run)  exec labkit run "$@" ;;
  # Two workers; --dist loadfile keeps each notebook (nbval) and each test file on one worker.
  test) exec python -m pytest tests labs --nbval-lax -p no:cacheprovider -n "${LABKIT_TEST_WORKERS:-2}" --dist loadfile "$@" ;;
  lock)
    { sed -n '1,3p' "$LOCK"; python -m pip freeze --exclude-editable | grep -v '^labkit' \
        | sed -E 's/^(torch==[0-9.]+)\+cpu$/\1/'; } > "$LOCK.new" && mv "$LOCK.new" "$LOCK"
    echo "re-pinned $LOCK" ;;
  *) die "unknown command '$cmd'; use: run [LAB ...] | test [PYTEST ARGS] | lock" ;;
esac
