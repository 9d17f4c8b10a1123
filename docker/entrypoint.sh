#!/usr/bin/env bash
# Entrypoint of the suite's ROCm image.
#
# 1. Checks that torch sees a gfx950 GPU (perfgate-gpu-check), unless PERFGATE_SKIP_GPU_CHECK=1
#    (set by `python -m perfgate container --allow-no-gpu`, for GPU-less sessions such as isa).
# 2. Runs the command, forwarding SIGINT/SIGTERM to it (bash as PID 1 would ignore them).
# 3. Hands every file it created in the bind-mounted repository back to the host user
#    (PERFGATE_HOST_UID/GID), so the runner can clean its checkout; then exits with the
#    command's status.
set -uo pipefail

if [[ "${PERFGATE_SKIP_GPU_CHECK:-0}" != "1" ]]; then
    perfgate-gpu-check || exit $?
fi

if [[ $# -eq 0 ]]; then
    echo "perfgate-entrypoint: no command given" >&2
    exit 2
fi

child=0
# shellcheck disable=SC2317  # called from the traps below
forward() {
    if [[ "$child" -ne 0 ]]; then
        kill -s "$1" "$child" 2>/dev/null || true
    fi
}
trap 'forward TERM' TERM
trap 'forward INT' INT

"$@" &
child=$!
# `wait` returns early when a trapped signal arrives: wait again until the child is gone.
while kill -0 "$child" 2>/dev/null; do
    wait "$child"
done
wait "$child"
status=$?

if [[ -n "${PERFGATE_HOST_UID:-}" && -n "${PERFGATE_HOST_GID:-}" && -d /workspace ]]; then
    find /workspace -xdev \( ! -uid "$PERFGATE_HOST_UID" -o ! -gid "$PERFGATE_HOST_GID" \) \
        -exec chown -h "$PERFGATE_HOST_UID:$PERFGATE_HOST_GID" {} + 2>/dev/null || true
fi
exit "$status"
