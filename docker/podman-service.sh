#!/usr/bin/env bash
# Start a Docker-API engine (Podman's `podman system service`) on a unix socket and wait until
# it answers. For CI machines and GPU-less dev boxes that have no Docker daemon; it lets the
# real-engine tests in tests/perfgate/test_container.py run.
#
#   apt-get install -y podman runc        # Debian's packages
#   export DOCKER_HOST=unix:///tmp/podman.sock
#   bash docker/podman-service.sh "$DOCKER_HOST"
#
# The service runs in the background until killed (its pid is printed and written next to the
# socket as <socket>.pid). Exit status 1 if it does not answer within 30 s.
set -euo pipefail

url="${1:-unix:///tmp/podman.sock}"
socket="${url#unix://}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v podman >/dev/null; then
    echo "podman-service: podman is not installed (apt-get install -y podman runc)" >&2
    exit 1
fi

rm -f "$socket"
CONTAINERS_CONF="$here/podman-ci.conf" nohup podman system service --time=0 "$url" \
    >"$socket.log" 2>&1 &
echo $! >"$socket.pid"

for _ in $(seq 1 60); do
    if [[ -S "$socket" ]] && podman --url "$url" version >/dev/null 2>&1; then
        echo "podman-service: Docker API at $url (pid $(cat "$socket.pid"), log $socket.log)"
        exit 0
    fi
    sleep 0.5
done
echo "podman-service: no answer at $url after 30 s; log:" >&2
cat "$socket.log" >&2
exit 1
