#!/usr/bin/env bash
# Set up everything thinwan needs, from inside the project: a virtualenv in .venv with the
# Python dependencies and the native module built in release mode. Idempotent and quick
# on a second run. Set THINWAN_EXTRAS=test,ns3 to add the test / ns-3 dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: '$1' not found: $2" >&2; exit 1; }; }
need python3 "install Python 3.10 or newer"
need cargo "install Rust (rustup) 1.80 or newer"

# The lab (network namespaces) needs iproute2 and pgrep; install them when we can.
if [ "$(id -u)" = 0 ] && ! { command -v ip >/dev/null && command -v pgrep >/dev/null; }; then
  echo "setup: installing iproute2 procps (apt)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 procps >/dev/null
fi

# The `ssh` peer of the tunnel benchmark and lab (docs/mux.md "OpenSSH as a peer"): sshd
# and ssh, started per run with their own config and keys; the system's sshd config and
# host keys are never used. Debian's package creates host keys in /etc/ssh and, on a
# machine with systemd, enables the ssh service, which thinwan does not need.
if [ "$(id -u)" = 0 ]; then
  ssh_missing=()
  for p in openssh-server openssh-client; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || ssh_missing+=("$p")
  done
  if [ "${#ssh_missing[@]}" -gt 0 ]; then
    echo "setup: installing ${ssh_missing[*]} (apt)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${ssh_missing[@]}" >/dev/null
  fi
fi

# The remote-desktop platforms, viewers, capture tools and the desktops' test user
# (docs/desktop.md).
if [ "$(id -u)" = 0 ]; then
  bash scripts/setup-desktop.sh
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
extras=${THINWAN_EXTRAS:-}
spec="."
[ -n "$extras" ] && spec=".[$extras]"
# Dependencies first (cheap when already there), then the native module in release mode.
.venv/bin/python -m pip install -q maturin==1.16.0 >/dev/null
deps=$(.venv/bin/python - "$extras" <<'PY'
import sys, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = list(p["dependencies"])
for e in filter(None, sys.argv[1].split(",")):
    deps += p["optional-dependencies"][e]
print("\n".join(deps))
PY
)
printf '%s\n' "$deps" > .venv/requirements.txt
.venv/bin/python -m pip install -q -r .venv/requirements.txt
echo "setup: building the native module (release)" >&2
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" .venv/bin/maturin develop --release -q >/dev/null 2>.venv/maturin.log \
  || { cat .venv/maturin.log >&2; echo "setup: building the native module failed" >&2; exit 1; }
echo "setup: building the lab, tunnel and middlebox binaries (thinwan-link, thinwan-net, thinwan-mux, thinwan-yamux-peer, thinwan-qds)" >&2
cargo build --release -q -p thinwan-net -p thinwan-mux -p thinwan-qds
# Beside the interpreter, where thinwan looks for them (then $PATH): an installed
# package finds its binaries without knowing where the source tree is.
for bin in thinwan-link thinwan-net thinwan-mux thinwan-yamux-peer thinwan-qds; do
  install -m 0755 "target/release/$bin" .venv/bin/
done
echo "setup: ready (.venv/bin/thinwan)" >&2
