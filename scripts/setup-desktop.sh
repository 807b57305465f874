#!/usr/bin/env bash
# Install what `thinwan desktop` needs to bring real remote desktops up in the lab's
# namespaces (docs/desktop.md): the servers and viewers of every platform, X tools to
# inject input and take screenshots, tcpdump for the client-side capture, tshark to read
# it, Debian's python3-tk + Pillow for the benchmark application (which runs under
# /usr/bin/python3 so that a desktop session of another user can start it), and the web
# and video benchmarks' browser (Chromium), player (mpv) and clip renderer (ffmpeg).
# Idempotent; root only. Called from scripts/setup.sh.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "setup-desktop: must run as root (installs Debian packages)" >&2
  exit 1
fi

pkgs=(
  xvfb x11-utils x11-xserver-utils xauth xdotool imagemagick fonts-dejavu-core
  tigervnc-standalone-server tigervnc-viewer tigervnc-tools
  x11vnc
  xrdp xorgxrdp freerdp2-x11
  tcpdump tshark
  python3-tk python3-pil python3-pil.imagetk python3-xlib
  chromium mpv ffmpeg
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-desktop: installing ${missing[*]} (apt)" >&2
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # One package that cannot be installed must not stop the others: thinwan reports a
  # platform whose package is missing as unavailable, with the reason.
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    for p in "${missing[@]}"; do
      apt-get install -y -qq --no-install-recommends "$p" >/dev/null \
        || echo "setup-desktop: could not install $p" >&2
    done
  fi
fi

# xrdp logs a *user* in (PAM): a local test user whose desktop session is our benchmark
# application. Its password stays locked except while a desktop is up (thinwan sets a
# fresh random one for the login and locks it again at tear-down); it owns no files but
# its home directory, where Xorg writes its log.
if ! id thinwan-desk >/dev/null 2>&1; then
  echo "setup-desktop: creating the xrdp test user thinwan-desk (password locked)" >&2
  useradd --system --create-home --home-dir /var/lib/thinwan-desk --shell /bin/sh \
    --comment "thinwan desktop benchmark (xrdp test user)" thinwan-desk
  passwd -l thinwan-desk >/dev/null
fi
echo "setup-desktop: ready" >&2
