#!/usr/bin/env bash
# The history job's store on the perf-history branch: read it, and replace it only after reading it.
#
#   history-store.sh fetch STORE   the branch's history.sqlite to STORE; the commit it came from is
#                                  recorded beside it (STORE.from). A fetch that fails (network,
#                                  auth) is retried, then fails the job: an empty store pushed over
#                                  the branch would erase every kept run. An absent branch fails
#                                  too, unless PERFGATE_HISTORY_CREATE=1 says to start one on
#                                  purpose (then STORE.from records "new").
#   history-store.sh push STORE    STORE as one orphan commit replacing the branch, only if fetch
#                                  read it: with --force-with-lease on the commit it was read from,
#                                  so a store written meanwhile by another job is never overwritten.
#
# REMOTE (default origin) is where the branch lives; PUSH_URL (default REMOTE) where it is pushed.
set -euo pipefail
branch=perf-history
remote=${REMOTE:-origin}
tries=${HISTORY_FETCH_TRIES:-3}

die() { echo "history-store: $*" >&2; exit 1; }

fetch() {
    local store=$1 listed rc=0 n
    for ((n = 1; n <= tries; n++)); do
        rc=0
        listed=$(git ls-remote --exit-code "${remote}" "refs/heads/${branch}") || rc=$?
        [ "${rc}" -ne 128 ] && break  # 128: could not reach or read the remote
        echo "history-store: could not read ${remote} (try ${n} of ${tries})" >&2
        # a wait only before another try: after the last one it would only delay the failure
        if [ "${n}" -lt "${tries}" ]; then sleep $((n * 5)); fi
    done
    case "${rc}" in
        0) ;;
        2)
            [ "${PERFGATE_HISTORY_CREATE:-0}" = 1 ] ||
                die "${remote} has no ${branch} branch; set PERFGATE_HISTORY_CREATE=1 to start one on purpose"
            echo "history-store: no ${branch} branch: starting a new store (PERFGATE_HISTORY_CREATE=1)"
            mkdir -p "$(dirname "${store}")"
            rm -f "${store}"
            echo new > "${store}.from"
            return 0
            ;;
        *) die "could not read ${remote} after ${tries} tries (git ls-remote exited ${rc}); nothing is pushed" ;;
    esac
    local sha=${listed%%[[:space:]]*}
    git fetch -q "${remote}" "refs/heads/${branch}" || die "git fetch of ${branch} failed; nothing is pushed"
    mkdir -p "$(dirname "${store}")"
    git show "${sha}:history.sqlite" > "${store}.tmp" || die "${branch} at ${sha} holds no history.sqlite"
    mv "${store}.tmp" "${store}"
    echo "${sha}" > "${store}.from"
    echo "history-store: read ${branch} at ${sha}"
}

push() {
    local store=$1 from work lease url
    [ -f "${store}.from" ] || die "${store} was not read from ${branch} (history-store.sh fetch): not pushed"
    [ -f "${store}" ] || die "${store} does not exist: not pushed"
    from=$(cat "${store}.from")
    if [ "${from}" = new ]; then lease="--force-with-lease=${branch}:"; else lease="--force-with-lease=${branch}:${from}"; fi
    url=${PUSH_URL:-$(git remote get-url "${remote}" 2>/dev/null || echo "${remote}")}
    work=$(mktemp -d)
    cp "${store}" "${work}/history.sqlite"
    (
        cd "${work}"
        git init -q -b "${branch}"
        git add history.sqlite
        git -c user.name=perfgate -c user.email=perfgate@users.noreply.github.com \
            commit -qm "history at ${GITHUB_SHA:-$(date -u +%FT%TZ)}"
        git push -q "${lease}" "${url}" "HEAD:refs/heads/${branch}"
    ) || die "push refused (another job wrote ${branch} since it was read?); the store was not replaced"
    rm -rf "${work}"
    echo "history-store: ${branch} replaced (was ${from})"
}

case "${1:-}" in
    fetch | push) [ $# -eq 2 ] || die "usage: $0 fetch|push STORE"; "$1" "$2" ;;
    *) echo "usage: $0 fetch|push STORE" >&2; exit 2 ;;
esac
