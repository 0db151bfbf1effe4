# Sourced by scripts/deps.sh.
# apt_install_missing NAME PKG...: installs with apt-get (one update, then
# one install) the Debian packages that are not installed; nothing when all
# are. NAME prefixes the message.
apt_install_missing() {
  local name=$1 p
  shift
  local missing=()
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} > 0)); then
    echo "$name: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}
