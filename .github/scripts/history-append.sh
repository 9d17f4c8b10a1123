#!/usr/bin/env bash
# Append a GPU job's runs to the history store, as the workflow does after a push to main.
#
#   history-append.sh RESULTS_DIR PERFGATE_HISTORY...
#
# RESULTS_DIR is where the job wrote its results (.perfgate/results, or the artifact's copy);
# PERFGATE_HISTORY... is how to run `perfgate history` here (`python -m perfgate history`, or
# `nox -s history --` on a runner's host). The store is the command's own choice: --db is never
# given, so PERFGATE_HISTORY_URL (the history server, a secret) wins over the table's db.
#
# Benchmark results only: the reports (ab.json, *.md) are not runs. A run the gate compared
# (its <mode>.compare.json beside it) is kept with its verdict: the triage's good commit is the
# newest that passed. Adding a run already kept adds nothing, so a retry is safe.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 RESULTS_DIR PERFGATE_HISTORY..." >&2; exit 2; }
dir=$1
shift
judged=()
unjudged=()
for f in "${dir}/device.json" "${dir}/host.json"; do
    [ -f "${f}" ] || continue
    if [ -f "${f%.json}.compare.json" ]; then judged+=("${f}"); else unjudged+=("${f}"); fi
done
if [ "${#judged[@]}" -eq 0 ] && [ "${#unjudged[@]}" -eq 0 ]; then
    echo "history-append: no device.json or host.json in ${dir}: nothing to append"
    exit 0
fi
if [ "${#judged[@]}" -gt 0 ]; then "$@" add "${judged[@]}" --branch main --verdicts; fi
if [ "${#unjudged[@]}" -gt 0 ]; then "$@" add "${unjudged[@]}" --branch main; fi
