#!/usr/bin/env bash
# One entry point for a fresh machine: set up .venv (once, from the lock), then
#   run  [LAB ...] [--profile ...]   execute the labs headless -> build/run/report.html
#   test [PYTEST ARGS ...]           the test suite: unit tests, and every lab's student copy run end to end
#                                    with papermill (CI's first row; `test labs --nbval-lax` adds nbval of the labs)
#   test-xla [PYTEST ARGS ...]       the torch-xla tests and labs 03/05 in .venv-xla (optional extra, ~7 GB)
#   test-latest [PYTEST ARGS ...]    the version matrix's second row, in .venv-latest on a Python >= 3.12
#                                    (python3.13, python3.12, then pyenv's) with the newest versions that
#                                    resolve (no lock): every lab under nbval and the runtime's version tests
#                                    (CI's second row); given PYTEST ARGS, those instead (`tests labs --nbval-lax`)
#   site                             the course as a static site -> build/site/index.html (labs with a
#                                    reference run's outputs, the cross-chip page); Sphinx in build/.venv-site
#   site-check                       screenshots of the built site (index, cross-chip page, Lab 06) with headless
#                                    Chromium (Debian: apt-get install chromium) -> build/site-shots/*.png
#   lock                             re-pin scripts/requirements-py311.lock from the current .venv
set -euo pipefail
cd "$(dirname "$0")/.."

# The lock pins Python 3.11's resolution (jax 0.10.x): use python3.11 where there is one, else python3.
PY=${PYTHON:-$(command -v python3.11 || echo python3)}
LOCK=scripts/requirements-py311.lock
cmd=${1:-test}
shift || true

die() { echo "course.sh: $*" >&2; exit 2; }

"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || die "needs Python >= 3.11 (found: $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11"

# setup VENV EXTRAS: (re)build VENV when the lock, pyproject.toml or the Python version changed.
setup() {
  local venv=$1 extras=$2 stamp=$1/.labkit-installed
  local want="$(cat "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1) $("$PY" --version 2>&1) $extras"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return; fi
  echo "course.sh: setting up $venv (first run, or the lock changed) ..."
  rm -rf "$venv"
  "$PY" -m venv "$venv" \
    || die "could not create a virtual environment. On Debian/Ubuntu: apt-get install python3-venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  if [ "$extras" = "dev,latest" ]; then
    # The matrix row: no lock, newest versions that resolve; record what they were.
    "$venv/bin/python" -m pip install --quiet --upgrade -e ".[dev]"
  elif [ "$extras" = "dev" ] && "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    # CI's exact pins (Python 3.11 resolves jax 0.10.x); packages not in the lock float.
    "$venv/bin/python" -m pip install --quiet -c "$LOCK" -e ".[$extras]"
  else
    # Python 3.12+ (jax >= 0.11), or the xla extra (torch 2.9, which the lock's torch excludes): no lock,
    # the newest versions pyproject.toml's lower bounds allow.
    [ "$extras" = "dev" ] && echo "course.sh: $("$PY" --version 2>&1) is not 3.11, so $LOCK does not apply:" \
      "installing the newest versions that resolve (set PYTHON=/path/to/python3.11 for CI's pins)" >&2
    "$venv/bin/python" -m pip install --quiet -e ".[$extras]"
  fi
  echo "$want" > "$stamp"
}

# latest_python: a Python >= 3.12 for the matrix (jax >= 0.11 needs it): $PYTHON_LATEST, python3.12 on PATH,
# or pyenv's; else the default Python (then the row tests the newest versions that resolve for it).
latest_python() {
  local c
  for c in "${PYTHON_LATEST:-}" python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[23]*/bin/python3; do
    [ -n "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo "$c"; return; }
  done
  echo "$PY"
}

if [ "$cmd" = "test-xla" ]; then VENV=.venv-xla; setup "$VENV" "xla,dev"
elif [ "$cmd" = "test-latest" ]; then VENV=.venv-latest; PY=$(latest_python); setup "$VENV" "dev,latest"
else VENV=.venv; setup "$VENV" dev; fi
export PATH="$PWD/$VENV/bin:$PATH"

# site_setup: Sphinx + MyST-NB (the `site` extra of pyproject.toml, nothing else) in their own venv
# under build/, so the course's .venv and CI's lock never see them.
site_setup() {
  local venv=build/.venv-site stamp=build/.venv-site/.labkit-installed
  local want="$(sha256sum pyproject.toml | cut -d' ' -f1) $("$PY" --version 2>&1)"
  if [ -x "$venv/bin/sphinx-build" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return; fi
  echo "course.sh: setting up $venv (the site extra) ..."
  rm -rf "$venv"
  "$PY" -m venv "$venv" || die "could not create $venv. On Debian/Ubuntu: apt-get install python3-venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet $(python -c 'import tomllib; print(" ".join(
      tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["site"]))')
  echo "$want" > "$stamp"
}

case "$cmd" in
  # The site's reference run: a committed GPU run whose executed notebooks are committed, else a CPU
  # run made now (SITE_RUN=DIR reuses one). Failed labs still get a page that says where they stopped.
  site)
    ref=$(python -m labkit.course.site reference 2>/dev/null) || {
      ref=${SITE_RUN:-build/site-run}
      if [ -z "${SITE_RUN:-}" ]; then
        mkdir -p "$ref"
        echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')" > "$ref/commit.txt"
        labkit run --out "$ref" "$@" || echo "course.sh: some labs failed; their pages say where"
      fi
    }
    python -m labkit.course.site assemble --run "$ref" --src build/site-src
    site_setup
    rm -rf build/site
    build/.venv-site/bin/sphinx-build -q -b html build/site-src build/site
    echo "site: build/site/index.html (reference run: $ref; cross-chip page: build/site/gathered/index.html)" ;;
  # The documented look at the site: a headless browser renders three pages to PNG for a person to open.
  site-check)
    [ -f build/site/index.html ] || die "no build/site: run 'bash scripts/course.sh site' first"
    browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
    [ -n "$browser" ] || die "no Chromium found; on Debian/Ubuntu: apt-get install chromium"
    mkdir -p build/site-shots
    for page in index gathered/index labs/06_cost_per_token; do
      shot="build/site-shots/$(echo "$page" | tr / _).png"
      timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2400 \
        --screenshot="$shot" "file://$PWD/build/site/$page.html" >/dev/null 2>&1 \
        && [ -s "$shot" ] || die "Chromium could not render build/site/$page.html"
      echo "site-check: $shot"
    done ;;
  run)  exec labkit run "$@" ;;
  # Two workers; --dist loadfile keeps each notebook (nbval) and each test file on one worker. Each CI row
  # executes every lab once: this one the student copies (tests/test_labs.py), test-latest the labs under nbval.
  test) exec python -m pytest tests --nbval-lax -p no:cacheprovider -n "${LABKIT_TEST_WORKERS:-2}" --dist loadfile "$@" ;;
  test-latest)
    python -c 'from labkit.runtime import versions; import json, sys; print("course.sh: matrix row", sys.version.split()[0], json.dumps({k: versions.version(k) for k in ("jax", "jaxlib", "flax", "optax", "numpy", "torch", "triton", "ml_dtypes")}))'
    # By default the part that meets new versions first, inside CI's 30 minutes: the seven labs as learners run
    # them, solutions included, and labkit.runtime's version gates. The lock's row runs everything else.
    [ $# -gt 0 ] || set -- labs --nbval-lax tests/runtime
    exec python -m pytest -p no:cacheprovider -n "${LABKIT_TEST_WORKERS:-2}" --dist loadfile "$@" ;;
  # The optional torch-xla extra (torch 2.9 + torch-xla 2.9, about 7 GB) in .venv-xla: the tests that
  # need it and the two labs with PyTorch/XLA sections, on simulated CPU devices. Not part of CI.
  test-xla) exec python -m pytest tests/sharding/test_layouts.py tests/export/test_routes.py tests/runtime/test_device.py \
      labs/03_gspmd_sharding.ipynb labs/05_train_tpu_serve_gpu.ipynb --nbval-lax -p no:cacheprovider "$@" ;;
  lock)
    { sed -n '1,3p' "$LOCK"; python -m pip freeze --exclude-editable | grep -v '^labkit' \
        | sed -E 's/^(torch==[0-9.]+)\+cpu$/\1/'; } > "$LOCK.new" && mv "$LOCK.new" "$LOCK"
    echo "re-pinned $LOCK" ;;
  *) die "unknown command '$cmd'; use: run [LAB ...] | test [PYTEST ARGS] | test-xla [PYTEST ARGS] | test-latest [PYTEST ARGS] | site | site-check | lock" ;;
esac
