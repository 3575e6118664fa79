#!/usr/bin/env bash
# Installs the servers lockbench runs (Debian packages) when they are
# missing, or says exactly what to install when it cannot.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
# ip puts PeerNetwork clusters' members in network namespaces (partitions).
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
# The report's browser test renders index.html in headless Chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# PostgreSQL's server binaries are not on PATH: Debian puts them in a
# versioned dir (compose finds them there, or through pg_config).
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing ${missing[*]}"
  if [[ " ${missing[*]} " == *" postgresql "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    # lockbench starts servers of its own: no system cluster running on 5432.
    mkdir -p /etc/postgresql-common
    echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "lockbench needs these packages: ${missing[*]}" >&2
echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
exit 1
