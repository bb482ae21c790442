#!/usr/bin/env bash
# One-command set-up for climnb on Debian/Ubuntu (called by `make setup`, `make test`, `make demo`).
#
#   1. system packages with apt (only when running as root and apt-get exists)
#   2. a virtual environment in .venv with `pip install -e .[train,dev,bench]`, and IPART (the
#      reference river detector of the label benchmark and notebook 01) with --no-deps
#   3. Horovod 0.28.1 built from source against that TensorFlow, with MPI and Gloo;
#      the wheel is cached in $CLIMNB_CACHE (default ~/.cache/climnb) so it is compiled
#      at most once per machine
#   4. Horovod must load in TensorFlow with MPI and Gloo built (what `horovodrun --check-build`
#      lists)
#
# A stamp keyed on the dependency files makes a repeat run take well under a second. Once a
# set-up has succeeded, its venv is kept in $CLIMNB_CACHE/venvs (hard links: no second copy on
# disk), keyed on the same files and the interpreter; a new clone or a removed .venv then gets a
# copy of it with climnb's own editable install redone, in seconds instead of minutes.
# Environment: PYTHON (interpreter for the venv, default python3.11 or python3),
#              CLIMNB_CACHE (wheel and venv cache), CLIMNB_SKIP_APT=1 (never call apt-get),
#              CLIMNB_PIP=pip (install with pip instead of uv),
#              CLIMNB_VENV_CACHE=0 (neither use nor keep a cached venv: install afresh).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${VENV:-$ROOT/.venv}
CACHE=${CLIMNB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/climnb}
HOROVOD_VERSION=0.28.1
IPART_VERSION=2.0.2
# slurm-wlm, munge and libpmix2 (Slurm's PMIx plugin) let the tests start a one-node Slurm
# cluster of their own (tests/slurm_cluster.py); no service is configured or enabled for you.
APT_PACKAGES=(build-essential cmake openmpi-bin libopenmpi-dev libhighwayhash-dev libfarmhash-dev
              chromium chromium-driver slurm-wlm munge libpmix2)

say() { printf '[setup %4ds] %s\n' "$SECONDS" "$*"; }
# a copy of the folder $1 at $2: hard links where both are on one file system, else a copy
copy_tree() { cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2"; cp -a "$1" "$2"; }; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

key=$(cat pyproject.toml setup.py tools/setup.sh | sha256sum | cut -c1-16)
stamp=$VENV/.climnb-setup-$key
if [[ -f $stamp ]]; then
    exit 0
fi
say "setting up climnb in $VENV (the first time on a machine takes 5-15 minutes: Horovod compiles)"

# --- 1. system packages ------------------------------------------------------------------
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ ${CLIMNB_SKIP_APT:-0} != 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        say "apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    elif ! command -v mpicc >/dev/null || ! command -v cmake >/dev/null; then
        die "missing system packages: ${missing[*]}.
  This set-up installs them with apt-get only when run as root on Debian/Ubuntu.
  Either install them yourself (see docs/setup.md), or use conda:
      conda env create -f environment.yml && conda activate climnb && pip install -e . --no-deps"
    else
        say "not root (or CLIMNB_SKIP_APT=1): assuming the system provides ${missing[*]}"
    fi
fi

# --- 2. virtual environment --------------------------------------------------------------
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$PYTHON is $("$PYTHON" -V 2>&1); climnb needs Python >= 3.10"
# the venv of an earlier set-up with these dependency files and this interpreter, if kept
# (the interpreter by its installation, not its path: a venv's python and a pyenv shim are one)
interpreter=$("$PYTHON" -c 'import sys; print(sys.base_prefix, sys.version)')
snap_key=$(printf '%s %s' "$key" "$interpreter" | sha256sum | cut -c1-16)
snap=$CACHE/venvs/$snap_key
use_snapshots=${CLIMNB_VENV_CACHE:-1}
from_snapshot=0
if [[ $use_snapshots == 1 && ! -e $VENV && -f $snap/.climnb-snapshot ]]; then
    say "copying the venv of an earlier set-up ($snap; CLIMNB_VENV_CACHE=0 installs afresh)"
    made_in=$(cat "$snap/.climnb-snapshot")
    tmp=$VENV.tmp$$
    rm -rf "$tmp"
    copy_tree "$snap" "$tmp"
    rm -f "$tmp/.climnb-snapshot"
    # console and activate scripts name the venv they were made in (sed -i writes new files:
    # the cached ones stay as they are); climnb's own editable install is redone below
    { grep -rlIZ -F "$made_in" "$tmp/bin" "$tmp/pyvenv.cfg" || true; } | xargs -0 -r sed -i "s#$made_in#$VENV#g"
    mv "$tmp" "$VENV"
    from_snapshot=1
fi
if [[ ! -x $VENV/bin/python ]]; then
    say "creating $VENV with $("$PYTHON" -V 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
# pip -q still repeats some warnings of this machine's configuration; keep the log readable.
NOISE="is ignored: it is neither a file nor a directory|BuildBackendWarning|^ *!!|^ *\*{20,}|^ *$|Please be careful with folders|name as your package|with strategy, WheelFile"
pip_() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 | { grep -vE "$NOISE" || true; }; }
# uv installs what pip would (the same versions: checked against a pip-made venv) in a fraction
# of the time (parallel downloads and builds, a shared cache: ~/.cache/uv); pip is the fallback,
# or the choice with CLIMNB_PIP=pip. uv does not read pip's configuration: an index-url set there
# is passed on. --compile-bytecode as pip does: without it every first import compiles (the
# first `import tensorflow` took minutes).
install_() { pip_ install "$@"; }
if [[ ${CLIMNB_PIP:-uv} == uv ]] && { [[ -x $VENV/bin/uv ]] || pip_ install -q uv; } && [[ -x $VENV/bin/uv ]]; then
    index=$("$VENV/bin/python" -m pip config get global.index-url 2>/dev/null || true)
    index=${PIP_INDEX_URL:-$index}
    [[ -n $index ]] && export UV_INDEX_URL=$index
    install_() { "$VENV/bin/uv" pip install --python "$VENV/bin/python" --compile-bytecode "$@"; }
    say "installing with $("$VENV/bin/uv" --version)"
fi
if [[ $from_snapshot == 1 ]]; then
    say "install -e . (this clone's climnb; its dependencies came with the copy)"
    install_ -q --no-deps -e .
else
    install_ -q --upgrade pip setuptools wheel
    say "install -e .[train,dev,bench]"
    install_ -q -e ".[train,dev,bench]"
    # IPART's metadata pins matplotlib 2.2.3 and basemap (no Python 3.11 wheels; only its
    # plotting needs them): install it alone, its detection needs only the bench extra.
    install_ -q --no-deps "ipart==$IPART_VERSION"
fi

# --- 3. Horovod --------------------------------------------------------------------------
tf_version=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))' 2>/dev/null \
    || "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
py_tag=$("$VENV/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheel_dir=$CACHE/wheels/horovod-$HOROVOD_VERSION-tf$tf_version-$py_tag
have_horovod() {
    TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" - <<'EOF' 2>/dev/null
import horovod.tensorflow as hvd
import sys
sys.exit(not (hvd.mpi_built() and hvd.gloo_built()))
EOF
}
if ! have_horovod; then
    if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
        say "building Horovod $HOROVOD_VERSION against TensorFlow $tf_version (7-8 minutes on 2 cores)"
        mkdir -p "$wheel_dir"
        t0=$SECONDS
        HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
        HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
        MAKEFLAGS="-j$(nproc)" \
            pip_ wheel -q --no-deps --no-cache-dir --no-build-isolation \
            -w "$wheel_dir.tmp" "horovod==$HOROVOD_VERSION"
        mv "$wheel_dir.tmp"/horovod-*.whl "$wheel_dir"/ && rm -rf "$wheel_dir.tmp"
        say "Horovod wheel built in $((SECONDS - t0)) s, cached in $wheel_dir"
    else
        say "installing cached Horovod wheel from $wheel_dir"
    fi
    install_ -q "$wheel_dir"/horovod-*.whl
    # --- 4. verify -----------------------------------------------------------------------
    # What `horovodrun --check-build` lists as TensorFlow, the MPI and Gloo controllers and
    # tensor operations, asked in one process (check-build imports TensorFlow in a new process
    # for each of its 8 questions: 25-30 s of a set-up)
    have_horovod || die "Horovod $HOROVOD_VERSION was installed but does not load in TensorFlow with MPI and Gloo:
$(TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/horovodrun" --check-build 2>&1 | tail -20)"
fi
say "Horovod $HOROVOD_VERSION: TensorFlow, MPI and Gloo built"

rm -f "$VENV"/.climnb-setup-*
# keep this venv for the next clone (hard links where the cache is on the same file system)
if [[ $use_snapshots == 1 && $from_snapshot == 0 ]]; then
    mkdir -p "$CACHE/venvs"
    rm -rf "$snap.tmp"
    if copy_tree "$VENV" "$snap.tmp"; then
        printf '%s\n' "$VENV" > "$snap.tmp/.climnb-snapshot"
        find "$CACHE/venvs" -mindepth 1 -maxdepth 1 -type d ! -name "$snap_key.tmp" -exec rm -rf {} +
        mv "$snap.tmp" "$snap"
        say "kept this venv for the next set-up in $snap"
    fi
fi
touch "$stamp"
say "done in ${SECONDS} s"
