# Sourced by benches/run.sh and benches/resilience.sh.
# install_missing CALLER COMMAND:PACKAGE...: apt-get installs the packages whose
# command is missing (as root), else says which are missing and carries on.
install_missing() {
  local caller=$1 pair need=()
  shift
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "$caller: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "$caller: missing ${need[*]} (apt-get install them as root); continuing without" >&2
  fi
}
