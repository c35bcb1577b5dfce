#!/usr/bin/env bash
# One entry point that makes this checkout usable: .venv with Python 3.11, the ROS 2 Kilted wheels,
# Debian packages, r3_msgs built into install/r3_msgs, and r3 installed editable.
# Idempotent: each stage keeps a stamp of its inputs and is skipped when nothing changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PREFIX="$ROOT/install/r3_msgs"
BUILD="$ROOT/build/r3_msgs"
PY_VERSION=3.11
DEBIAN_PACKAGES=(cmake g++ make libosmesa6 libusb-1.0-0)
VENV_GB=7  # the installed .venv, measured on x86_64 (torch's CUDA build is most of it)

say() { printf '[r3 setup] %s\n' "$*"; }
die() { printf '[r3 setup] error: %s\n' "$*" >&2; exit 1; }
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
# A full disk is the commonest cause of a failed install on a fresh machine: say so in one line.
pip_failed() {
  grep -vE '^WARNING: Location' "$VENV/pip-install.log" | tail -20 >&2
  if grep -q 'No space left on device' "$VENV/pip-install.log"; then
    die "pip install -r ${1#$ROOT/} ran out of disk: the environment needs about ${VENV_GB} GB free under $ROOT, $(df -h --output=avail "$ROOT" | tail -1 | tr -d ' ') is left (full log: $VENV/pip-install.log)"
  fi
  die "pip install -r ${1#$ROOT/} failed (full log: $VENV/pip-install.log)"
}

# --- Debian packages ------------------------------------------------------------------------
missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  elif command -v apt-get >/dev/null && command -v sudo >/dev/null; then
    say "installing Debian packages with sudo: ${missing[*]}"
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    die "missing system packages: ${missing[*]}. Install them with your package manager (Debian/Ubuntu: apt-get install ${missing[*]}) and run this script again."
  fi
fi

# --- Python 3.11 virtual environment ---------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  PYTHON="$(command -v "python$PY_VERSION" || true)"
  [ -n "$PYTHON" ] || die "python$PY_VERSION not found on PATH. The ROS 2 Kilted wheels are built for CPython $PY_VERSION only; install it (Debian: apt-get install python3.11 python3.11-venv; or pyenv install 3.11) and run this script again."
  say "creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -c "import sys; assert sys.version_info[:2] == (3, 11)" 2>/dev/null \
  || die "$VENV is not Python $PY_VERSION; remove it and run this script again."
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

# --- Python packages ---------------------------------------------------------------------------
REQ_FILES=("$ROOT"/requirements/*.txt)
SOURCE_BUILDS=("$ROOT"/requirements/source-builds/*.txt)
req_hash="$(hash_of "${REQ_FILES[@]}" "${SOURCE_BUILDS[@]}")"
if ! stamp_ok "$VENV/.r3-requirements" "$req_hash"; then
  say "installing Python packages (${REQ_FILES[*]##*/})"
  # requirements/ml.txt pins torch and torchvision to one matching pair, so no dependency pulls
  # another torch release; that pair is a CUDA build of about 5.5 GB.
  for req in "${REQ_FILES[@]}"; do
    "${PIP[@]}" install -r "$req" >"$VENV/pip-install.log" 2>&1 || pip_failed "$req"
  done
  # Source-only packages that build against the venv's torch (see the files' headers).
  for req in "${SOURCE_BUILDS[@]}"; do
    SAM2_BUILD_CUDA=0 "${PIP[@]}" install --no-build-isolation -r "$req" >"$VENV/pip-install.log" 2>&1 \
      || pip_failed "$req"
  done
  echo "$req_hash" > "$VENV/.r3-requirements"
fi

# --- r3_msgs ---------------------------------------------------------------------------------
# The wheels' exported CMake files name the wheel builder's Python and numpy include folders;
# point them at this venv's, otherwise rosidl's Python generator cannot configure.
PY_INCLUDE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INCLUDE="$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
for f in $(grep -rlE '/opt/python/cp311-cp311' "$VENV/share" --include='*.cmake' 2>/dev/null || true); do
  sed -i -E \
    -e "s#/opt/python/cp311-cp311/include/python3\.11#$PY_INCLUDE#g" \
    -e "s#/opt/python/cp311-cp311/lib/python3\.11/site-packages/numpy/(_core|core)/include#$NP_INCLUDE#g" \
    "$f"
done

msg_hash="$(cd "$ROOT/msg" && find . -type f | sort | xargs cat | sha256sum | cut -d' ' -f1)"
if ! stamp_ok "$PREFIX/.r3-msgs" "$msg_hash" || ! "$VENV/bin/python" -c "import r3_msgs.msg" 2>/dev/null; then
  say "building r3_msgs into ${PREFIX#$ROOT/}"
  rm -rf "$BUILD" "$PREFIX"
  mkdir -p "$BUILD"
  (
    cd "$BUILD"
    export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    cmake "$ROOT/msg" -DCMAKE_INSTALL_PREFIX="$PREFIX" -DPython3_EXECUTABLE="$VENV/bin/python" \
      -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DCMAKE_INSTALL_RPATH="$PREFIX/lib" -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON >cmake.log 2>&1 \
      || { tail -30 cmake.log >&2; die "cmake configure of r3_msgs failed (full log: $BUILD/cmake.log)"; }
    make -j"$(nproc)" install >make.log 2>&1 \
      || { tail -30 make.log >&2; die "building r3_msgs failed (full log: $BUILD/make.log)"; }
  )
  echo "$msg_hash" > "$PREFIX/.r3-msgs"
fi
# Make the prefix usable from the venv with a .pth file: its first line puts the Python package on
# sys.path; its second adds the prefix's lib/ to LD_LIBRARY_PATH, where rosidl's type-support
# dispatch dlopens the generated libraries by name. The ROS wheels' own .pth
# (ros_wheels_bootstrapper.pth) re-executes Python once with that variable; site.py reads .pth
# files in name order, so r3_msgs.pth runs first and its addition is part of the re-exec.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
MSG_SITE="$(find "$PREFIX/lib" -maxdepth 3 -type d -name site-packages | head -1)"
[ -n "$MSG_SITE" ] || die "r3_msgs built but no site-packages folder under $PREFIX/lib"
cat > "$SITE/r3_msgs.pth" <<PTH
$MSG_SITE
import os; p = '$PREFIX/lib'; l = os.environ.get('LD_LIBRARY_PATH', ''); p in l.split(os.pathsep) or os.environ.__setitem__('LD_LIBRARY_PATH', p + (os.pathsep + l if l else ''))
PTH

# --- r3 itself ---------------------------------------------------------------------------------
# Node folders are part of the stamp: each one gets a console script when r3 is (re)installed.
setup_hash="$( (cat "$ROOT/setup.py" "$ROOT/package.xml"; cd "$ROOT" && ls -d r3_*_node 2>/dev/null) | sha256sum | cut -d' ' -f1)"
if ! stamp_ok "$VENV/.r3-editable" "$setup_hash"; then
  say "installing r3 (editable)"
  "${PIP[@]}" install --no-deps --no-build-isolation -e "$ROOT" >"$VENV/pip-install.log" 2>&1 \
    || { tail -20 "$VENV/pip-install.log" >&2; die "installing r3 failed (full log: $VENV/pip-install.log)"; }
  echo "$setup_hash" > "$VENV/.r3-editable"
fi

"$VENV/bin/python" -c "from r3_msgs.action import RunTask, FollowInstruction; from r3_msgs.msg import ReasonerStep" \
  || die "r3_msgs does not import from $VENV; remove build/ and install/ and run this script again."
say "ready: source .venv/bin/activate (or call .venv/bin/r3 directly)"
