#!/usr/bin/env bash
# Installs what the job-queue comparison (make bench-jobs, bench/jobsbench)
# needs beyond scripts/deps.sh: the servers of the anchors it measures usher
# against. Nothing is installed when all is there. These packages are not in
# scripts/deps.sh on purpose: make test does not need them.
#
# The bench starts its own redis-server and its own PostgreSQL cluster (initdb
# in a temp dir, loopback only, as the user nobody when run as root); it uses
# neither Debian service, so this script starts nothing.
set -euo pipefail

packages=(
  redis-server # hibiken/asynq's broker
  postgresql   # riverqueue/river's database: initdb and postgres
)

source "$(dirname "$0")/apt-missing.sh"
apt_install_missing benchdeps "${packages[@]}"
