#!/usr/bin/env bash
# Installs the servers and tools lockbench runs (Debian packages) when they
# are missing, or says exactly what to install when it cannot.
#   scripts/deps.sh        what `make bench` needs
#   scripts/deps.sh test   that, and what `make test` needs besides: sshd
#                          and sudo for the simulated hosts of the
#                          several-hosts tests (never started as a service)
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
# ip puts clusters' members and servers in network namespaces (partitions
# that cut TCP).
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
# fusermount3 mounts the lazy filesystem under the servers of power-loss
# cases; gcc builds the clock preload of clock-jump cases.
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# The report's browser test renders index.html in headless Chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# PostgreSQL's server binaries are not on PATH: Debian puts them in a
# versioned dir (compose finds them there, or through pg_config).
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
services=()
if [ "${1:-}" = test ]; then
  [ -x /usr/sbin/sshd ] || services+=(openssh-server)
  command -v sudo >/dev/null 2>&1 || missing+=(sudo)
fi

if [ ${#missing[@]} -eq 0 ] && [ ${#services[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing ${missing[*]} ${services[*]}"
  if [[ " ${missing[*]} " == *" postgresql "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    # lockbench starts servers of its own: no system cluster running on 5432.
    mkdir -p /etc/postgresql-common
    echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf
  fi
  # Packages install without starting their services (no system sshd on
  # port 22, no system PostgreSQL): lockbench starts its own servers.
  policy=/usr/sbin/policy-rc.d
  own_policy=false
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && own_policy=true
  fi
  trap '$own_policy && rm -f "$policy"' EXIT
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" "${services[@]}" >/dev/null
  exit 0
fi
echo "lockbench needs these packages: ${missing[*]} ${services[*]}" >&2
echo "install them with: sudo apt-get install -y ${missing[*]} ${services[*]}" >&2
exit 1
