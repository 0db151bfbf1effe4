#!/usr/bin/env bash
# The image test: builds the usher image from this checkout with `make
# image`, then runs it as docs/deploy.md says, on Debian's Docker engine
# started here (dockerd --iptables=false: nothing of the host's firewall is
# touched, and build steps use the host's network):
#   1. under Docker's default seccomp profile the server refuses to start,
#      with one error that names the setting to change;
#   2. `docker run` as documented (usher's seccomp profile, read-only
#      root, no capabilities) answers /readyz and renders a 2D and a 3D
#      figure through the render API, and keeps its data over a restart;
#   3. compose.yaml's multi-node deployment renders through nginx;
#   4. deploy/usher.service runs under systemd (scripts/imagetest-systemd.sh).
# It prints the image's size and its cold start (container start to
# /readyz), the figures of docs/benchmarks.md.
#
# No image registry is needed: the base images the Dockerfile and
# compose.yaml name (golang, debian, redis, nginx) are replaced by
# stand-ins made from Debian's packages with debootstrap, kept with
# dockerd's state in $USHER_IMAGETEST_STATE between runs.
#
# COLD_STARTS=N measures the cold start N times (default 3).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
source scripts/apt-missing.sh
source scripts/deploy-blocks.sh
apt_install_missing imagetest docker.io debootstrap curl iproute2

state=${USHER_IMAGETEST_STATE:-/var/tmp/usher-imagetest}
run=$(mktemp -d /tmp/usher-imagetest.XXXXXX)
mkdir -p "$state"
export DOCKER_HOST="unix://$run/docker.sock"
# Debian's client, not another one the machine may have on its PATH.
docker() { /usr/bin/docker "$@"; }
# Docker Compose v2, the `docker compose` plugin the docs use, built from
# the Go module proxy (Debian bookworm packages only Compose v1, which
# cannot pass systempaths=unconfined), kept in $state.
compose_version=v2.29.7
export DOCKER_CONFIG=$state/docker-config COMPOSE_PROJECT_NAME=usherimagetest
compose() { docker compose "$@"; }
image=usher:imagetest
standin_debian=usher-standin/debian:bookworm
standin_go=usher-standin/golang:$(go env GOVERSION 2>/dev/null || /usr/local/go/bin/go env GOVERSION)
standin_tools=usher-standin/tools:bookworm
say() { echo "imagetest: $*"; }
fail() { echo "imagetest: FAIL: $*" >&2; exit 1; }

cleanup() {
  set +e
  [[ -n ${compose_pid:-} ]] && kill "$compose_pid" 2>/dev/null
  if [[ -S $run/docker.sock ]]; then
    compose -f compose.yaml down --volumes --timeout 5 >/dev/null 2>&1
    docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1
    docker volume prune -f >/dev/null 2>&1
  fi
  [[ -f $run/dockerd.pid ]] && kill "$(cat "$run/dockerd.pid")" 2>/dev/null
  for _ in $(seq 100); do [[ -e $run/dockerd.pid ]] || break; sleep 0.1; done
  ip link del "$bridge" 2>/dev/null
  # dockerd may leave its network namespace mounted under its exec root.
  grep -o " $run/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "imagetest: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR

# The engine's default bridge is one of this run's own, so that another
# engine on the machine (docker0) is never shared.
bridge=usherimg$(($$ % 100000))
subnet=10.77.$(($$ % 250)).1/24
start_dockerd() {
  ip link add "$bridge" type bridge
  ip addr add "$subnet" dev "$bridge"
  ip link set "$bridge" up
  dockerd --iptables=false --bridge "$bridge" --data-root "$state/docker" --exec-root "$run/exec" \
    --pidfile "$run/dockerd.pid" -H "$DOCKER_HOST" >"$run/dockerd.log" 2>&1 &
  for _ in $(seq 300); do
    docker version >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$run/dockerd.log" >&2
  fail "dockerd did not start"
}

# The stand-ins for the registry's images. The golang one is the host's Go
# toolchain and the host's CA certificates (the Go module proxy may be
# reached through a proxy of the machine's) on the Debian stand-in.
make_standins() {
  if ! docker image inspect "$standin_debian" >/dev/null 2>&1; then
    say "debootstrap (Debian bookworm, minbase) for $standin_debian"
    local root="$run/rootfs"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$run/debootstrap.log" 2>&1 ||
      { tail -20 "$run/debootstrap.log" >&2; fail "debootstrap"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - "$standin_debian" >/dev/null
    rm -rf "$root"
  fi
  if ! docker image inspect "$standin_go" >/dev/null 2>&1; then
    say "$standin_go from $(command -v go || echo /usr/local/go/bin/go)"
    local ctx="$run/goctx" goroot
    goroot=$(go env GOROOT 2>/dev/null || /usr/local/go/bin/go env GOROOT)
    mkdir -p "$ctx"
    cp -a "$goroot" "$ctx/go"
    cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
    printf '%s\n' "FROM $standin_debian" 'COPY go /usr/local/go' \
      'COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt' \
      'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' >"$ctx/Dockerfile"
    docker build -q -t "$standin_go" "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
  if ! docker image inspect "$standin_tools" >/dev/null 2>&1; then
    # One stand-in for redis:7-bookworm and nginx: Debian's redis-server
    # (7.0) and nginx, with nginx's conf.d as the official image has it.
    say "$standin_tools (Debian's redis-server and nginx)"
    local ctx="$run/toolsctx"
    mkdir -p "$ctx"
    printf '%s\n' "FROM $standin_debian" \
      'RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server nginx && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/*' \
      'CMD ["nginx", "-g", "daemon off;"]' >"$ctx/Dockerfile"
    docker build -q --network host -t "$standin_tools" "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
}

# build_compose: the docker compose plugin, when $state lacks it.
build_compose() {
  local plugin=$DOCKER_CONFIG/cli-plugins/docker-compose
  [[ -x $plugin && $(cat "$plugin.version" 2>/dev/null) == "$compose_version" ]] && return 0
  mkdir -p "$DOCKER_CONFIG/cli-plugins" "$run/gobin"
  GOBIN=$run/gobin GOFLAGS=-buildvcs=false go install "github.com/docker/compose/v2/cmd@$compose_version" >"$run/compose-build.log" 2>&1 ||
    { tail -20 "$run/compose-build.log" >&2; return 1; }
  mv "$run/gobin/cmd" "$plugin"
  echo "$compose_version" >"$plugin.version"
}

# wait_ready URL CONTAINER: polls URL for 60 s, failing early when the
# container stops.
wait_ready() {
  for _ in $(seq 600); do
    curl -fs "$1" >/dev/null 2>&1 && return 0
    [[ $(docker inspect -f '{{.State.Running}}' "$2" 2>/dev/null) == true ]] ||
      { docker logs "$2" >&2 2>&1; fail "$2 stopped before $1 answered"; }
    sleep 0.1
  done
  docker logs "$2" >&2 2>&1
  fail "$1 did not answer within 60 s"
}

# render URL FORMAT SOURCE MAGIC: POSTs SOURCE to the render API and
# checks the answer is a FORMAT image starting with MAGIC (hex).
render() {
  local out="$run/render.$2" code
  code=$(curl -s -o "$out" -w '%{http_code}' -H 'Content-Type: text/plain' --data-binary "$3" "$1/api/render?format=$2" || true)
  [[ $code == 200 ]] || fail "render $2 at $1: HTTP $code: $(head -c 500 "$out")"
  [[ $(head -c $((${#4} / 2)) "$out" | od -An -tx1 | tr -d ' \n') == "$4" ]] ||
    fail "render $2 at $1: not a $2 image: $(head -c 100 "$out" | od -c | head -3)"
  say "rendered $2 at $1 ($(wc -c <"$out") bytes)"
}
figure2d='size(3cm); draw(unitcircle); label("$\int_0^1 x\,dx$", (0,0));'
figure3d='import three; size(3cm); draw(unitsphere, red); label("$z$", (0,0,1.3));'
svg_magic=3c3f786d6c # "<?xml"
png_magic=89504e470d0a1a0a

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

test_refused() {
  say "under Docker's default seccomp profile the server refuses to start"
  local out code=0
  out=$(timeout 120 /usr/bin/docker run --rm "$image" serve 2>&1) || code=$?
  [[ $code != 0 && $code != 124 ]] || fail "usher serve under the default profile: exit code $code, want an error at start: $out"
  local last
  last=$(printf '%s\n' "$out" | tail -n 1)
  [[ $(printf '%s\n' "$out" | grep -c 'usher: ') == 1 ]] || fail "want one error line, got: $out"
  [[ $last == *"seccomp=deploy/seccomp-usher.json"* ]] || fail "the error does not name the setting to change: $last"
  say "refused with: ${last:0:200}..."
}

# run_documented PORT: docs/deploy.md's docker run (the container usher
# on the volume usher-data), published on PORT of the loopback address.
run_documented() {
  local block
  block=$(deploy_block run)
  [[ $block == *"-p 8080:8080"* ]] || fail "docs/deploy.md's run block has no -p 8080:8080 to replace"
  block=${block//-p 8080:8080/-p 127.0.0.1:$1:8080}
  (eval "${block//usher:latest/$image}") >/dev/null
}

# remove_documented: the container and volume of run_documented.
remove_documented() {
  docker rm -f usher >/dev/null
  docker volume rm usher-data >/dev/null
}

# test_run: docs/deploy.md's docker run, on a free port.
test_run() {
  local port
  port=$(free_port)
  say "docker run as docs/deploy.md says, on port $port"
  run_documented "$port"
  wait_ready "http://127.0.0.1:$port/readyz" usher
  render "http://127.0.0.1:$port" svg "$figure2d" "$svg_magic"
  render "http://127.0.0.1:$port" png "$figure3d" "$png_magic"
  # The data volume outlives the container: the admin token written at
  # the first start is the one after a restart.
  local token read_token
  read_token=$(deploy_block token)
  [[ -n $read_token ]] || fail "docs/deploy.md lacks the token block"
  token=$(eval "$read_token")
  docker restart usher >/dev/null
  wait_ready "http://127.0.0.1:$port/readyz" usher
  [[ $(eval "$read_token") == "$token" ]] || fail "the admin token changed over a restart"
  curl -fs -H "Authorization: Bearer $token" "http://127.0.0.1:$port/v1/queues" >/dev/null || fail "/v1 refuses the first start's admin token"
  test_backup "http://127.0.0.1:$port" "$token"
  remove_documented
}

# test_backup URL TOKEN: docs/deploy.md's backup, a change, then its
# restore, which must bring back the state of the backup.
test_backup() {
  local url=$1 token=$2 dir backup restore
  dir=$(mktemp -d "$run/backup.XXXXXX")
  backup=$(deploy_block backup)
  restore=$(deploy_block restore)
  [[ -n $backup && -n $restore ]] || fail "docs/deploy.md lacks the backup or restore block"
  queue() { curl -fs -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$@"; }
  [[ $(queue -X POST -H 'Content-Type: application/json' -d '{"name":"kept"}' "$url/v1/queues") == 201 ]] ||
    fail "could not create a queue"
  (cd "$dir" && eval "$backup") >/dev/null || fail "docs/deploy.md's backup block"
  [[ -s $dir/usher-backup.db ]] || fail "the backup block left no usher-backup.db"
  [[ $(queue -X DELETE "$url/v1/queues/kept") == 204 ]] || fail "could not delete the queue"
  (cd "$dir" && eval "${restore//usher:latest/$image}") >/dev/null || fail "docs/deploy.md's restore block"
  wait_ready "$url/readyz" usher
  [[ $(queue "$url/v1/queues/kept") == 200 ]] || fail "the restored data file lacks the queue made before the backup"
  say "backup and restore as docs/deploy.md says: the queue made before the backup is back"
}

# cold_start N: the image's size, and N cold starts of the container
# (docs/deploy.md's docker run, from its volume's creation to /readyz)
# alternating with N of bin/usher serve on the
# host (start to /readyz), the same binary's work without the container.
cold_start() {
  local size i t0 port container=() host=() pid
  size=$(docker image inspect -f '{{.Size}}' "$image")
  for i in $(seq "$1"); do
    port=$(free_port)
    t0=$(date +%s%N)
    run_documented "$port"
    wait_ready "http://127.0.0.1:$port/readyz" usher
    container+=("$((($(date +%s%N) - t0) / 1000000))")
    remove_documented
    port=$(free_port)
    t0=$(date +%s%N)
    bin/usher serve --listen "127.0.0.1:$port" --data "$run/host$i.db" --log-level warn >"$run/host.log" 2>&1 &
    pid=$!
    until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
      kill -0 "$pid" 2>/dev/null || { cat "$run/host.log" >&2; fail "bin/usher serve stopped"; }
      sleep 0.05
    done
    host+=("$((($(date +%s%N) - t0) / 1000000))")
    kill "$pid" && wait "$pid" || true
  done
  say "image size: $((size / 1000000)) MB"
  say "cold start, ms: container ${container[*]}; bin/usher on the host ${host[*]} (load $(cut -d' ' -f1-3 /proc/loadavg))"
}

# test_compose: docs/deploy.md's compose commands, then renders through
# nginx.
test_compose() {
  local port block
  port=$(free_port)
  block=$(deploy_block compose)
  [[ $block == *"docker compose up -d"* ]] || fail "docs/deploy.md's compose block has no docker compose up -d"
  say "compose.yaml: redis, 2 schedulers, 2 backends, 2 queue servers, nginx on port $port"
  (export USHER_IMAGE=$image REDIS_IMAGE=$standin_tools NGINX_IMAGE=$standin_tools USHER_PORT=$port
    eval "$block") >"$run/compose.log" 2>&1 || { cat "$run/compose.log" >&2; fail "docker-compose up"; }
  # Ready when a figure renders: the backends render their test figures
  # first, and until one has registered the queue servers answer 503.
  local i code
  for i in $(seq 240); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: text/plain' --data-binary "$figure2d" \
      "http://127.0.0.1:$port/api/render?format=svg" || true)
    [[ $code == 200 ]] && break
    sleep 0.5
  done
  [[ $code == 200 ]] || { compose -f compose.yaml logs --tail 30 >&2; fail "no figure rendered through nginx within 120 s (last answer $code)"; }
  # nginx takes turns between the queue servers: both render.
  render "http://127.0.0.1:$port" svg "$figure2d" "$svg_magic"
  render "http://127.0.0.1:$port" png "$figure3d" "$png_magic"
  render "http://127.0.0.1:$port" svg "$figure2d // again" "$svg_magic"
  compose -f compose.yaml down --volumes --timeout 10 >/dev/null 2>&1
}

export PATH=$PATH:/usr/local/go/bin
build_compose &
compose_pid=$!
# compose.yaml's network must be free on this machine (a stale bridge of
# a killed engine would take its packets).
if [[ -n $(ip route show 10.89.89.0/24) ]]; then
  fail "compose.yaml's network 10.89.89.0/24 is taken on this machine: $(ip route show 10.89.89.0/24)"
fi
start_dockerd
make_standins
say "make image"
make --no-print-directory image IMAGE="$image" GO_IMAGE="$standin_go" DEBIAN_IMAGE="$standin_debian" \
  IMAGE_FLAGS="--network host" DOCKER=/usr/bin/docker >"$run/build.log" 2>&1 ||
  { tail -40 "$run/build.log" >&2; fail "make image"; }
test_refused
test_run
cold_start "${COLD_STARTS:-3}"
wait "$compose_pid" || fail "go install github.com/docker/compose/v2/cmd@$compose_version"
compose_pid=
test_compose
if [[ -f scripts/imagetest-systemd.sh ]]; then
  IMAGE=$image STANDIN_DEBIAN=$standin_debian bash scripts/imagetest-systemd.sh
fi
say "ok"
