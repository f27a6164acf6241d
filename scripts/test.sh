#!/usr/bin/env bash
# The README's test command (`npm test`, arguments passed to vitest): first makes sure of what the
# suite needs on this machine kind (Debian), then runs it.
#   - Debian's chromium (the browser tests drive it with puppeteer-core) and poppler-utils (the
#     statement tests read their PDFs back): installed with apt-get when missing.
#   - Postgres at TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test, trust auth,
#     a role that may create databases: each test file makes its own): when it is the local default,
#     the server is installed, started and the database created when absent.
#   - Temporary files in memory (a directory of the run's own on /dev/shm, removed at its end) when
#     the machine has a tmpfs and TMPDIR is not set.
#   - The static checks, when the whole suite runs (no arguments): types (tsc), format and lint
#     (Biome), unused files, exports and dependencies (knip), import cycles and layers
#     (dependency-cruiser). They run beside the tests; one that fails is reported as soon as it
#     fails, and the run then exits 1 whatever the tests say. With arguments they are skipped, so
#     `npm test -- test/x.test.ts` stays quick; STATIC_CHECKS=on|off forces either way.
# `npm test -- --project unit --project pglite` runs the half that needs no Postgres.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'npm test: %s\n' "$*" >&2; }

# The static checks (types, format and lint, unused code, layers) run when no arguments are given,
# as CI runs it; `npm test -- <args>` skips them, STATIC_CHECKS=on|off decides either way.
static_checks_default=on
run_checks=${STATIC_CHECKS:-$([ $# -eq 0 ] && echo "$static_checks_default" || echo off)}

# Postgres is needed unless projects are named and "postgres" is not one of them.
needs_postgres=1
projects=""
prev=""
for arg in "$@"; do
  case "$arg" in
    --project=*) projects="$projects ${arg#--project=}" ;;
  esac
  [ "$prev" = "--project" ] && projects="$projects $arg"
  prev="$arg"
done
if [ -n "$projects" ] && ! printf '%s\n' $projects | grep -qx postgres; then needs_postgres=0; fi

apt_install() {
  if [ "$(id -u)" = 0 ]; then run_as_root=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then run_as_root="sudo -n"
  else
    say "missing Debian packages: $*. Install them (sudo apt-get install -y $*) and run npm test again."
    exit 1
  fi
  say "installing Debian packages: $* (one time)"
  $run_as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $run_as_root apt-get install -y -qq "$@" >/dev/null
}

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v pdftotext >/dev/null 2>&1 || missing+=(poppler-utils)
if [ "$needs_postgres" = 1 ] && [ -z "${TEST_POSTGRES_URL:-}" ] && ! command -v pg_ctlcluster >/dev/null 2>&1; then
  missing+=(postgresql)
  fresh_postgres=1
fi
if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi

if [ "$needs_postgres" = 1 ]; then
  if [ -n "${TEST_POSTGRES_URL:-}" ]; then
    # A server of the caller's choosing: used as it is, only checked.
    psql "$TEST_POSTGRES_URL" -tAc "select 1" >/dev/null 2>&1 \
      || { say "TEST_POSTGRES_URL ($TEST_POSTGRES_URL) does not answer; start it, or unset it to use the local server."; exit 1; }
  else
    if [ "${fresh_postgres:-0}" = 1 ]; then
      # The suite connects as postgres over TCP without a password, as on this machine kind.
      conf=$(ls -d /etc/postgresql/*/main | head -n 1)
      printf 'local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n' > "$conf/pg_hba.conf"
    fi
    if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
      say "starting the local Postgres"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start \
        || { say "could not start Postgres at 127.0.0.1:5432; start it, or run npm test -- --project unit --project pglite"; exit 1; }
      for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
    fi
    admin="postgresql://postgres@127.0.0.1:5432/postgres"
    psql "$admin" -tAc "select rolcreatedb or rolsuper from pg_roles where rolname = current_user" 2>/dev/null | grep -qx t \
      || { say "Postgres at 127.0.0.1:5432 must let user postgres in without a password (trust) and create databases."; exit 1; }
    psql "$admin" -tAc "select 1 from pg_database where datname = 'test'" | grep -qx 1 || psql "$admin" -qc "create database test"
  fi
fi

# Every Node process of the run (vitest's workers, and the Ponder, anvil-launcher and tsx children the
# tests start) keeps its compiled code here: each child starts faster than the one before it.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$PWD/node_modules/.cache/node-compile}"
# ... and loads the files of installed ES module packages without parsing their package.json's
# `exports` again for each one (test/support/esm-scope-cache.mjs: about 0.5 s of every indexer's start).
export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--import=\"$PWD/test/support/esm-scope-cache.mjs\""

# The run's temporary files (PGlite clusters, IPFS blocks, devnet manifests, private Postgres
# clusters, Chromium profiles) in memory when the machine has a tmpfs and TMPDIR is not set: PGlite
# makes a system call per page it reads or writes, and on disk that costs the CPU-bound run about
# 4% of its time (2026-11-28, two cores: 418 s against 434-442 s). Removed when the run ends; what a
# person looks at afterwards (screenshots, statements' PDFs) goes to /tmp (test/support/artifacts.ts).
export TEST_ARTIFACTS_DIR="${TEST_ARTIFACTS_DIR:-${TMPDIR:-/tmp}}"
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  TMPDIR=$(mktemp -d /dev/shm/celo-reputation-test.XXXXXX)
  # As /tmp is: the private Postgres clusters some tests start run initdb as the postgres user.
  chmod 1777 "$TMPDIR"
  export TMPDIR
  # Removed once this process has exited (vitest itself after exec, or this script once vitest and
  # the checks are done), however it ends, by a watcher beside it.
  (
    trap '' INT TERM HUP
    while kill -0 $$ 2>/dev/null; do sleep 2; done
    rm -rf "$TMPDIR"
  ) </dev/null >/dev/null 2>&1 &
fi
[ "$run_checks" = on ] || exec vitest run "$@"

# The checks beside the tests: on two cores their 13 CPU-s (8 of them tsc, TypeScript 7 on one
# thread: TypeScript 5.9 took 29, 2026-12-02) share the cores with the CPU-bound tests instead of
# holding the run up one after another.
# Their output is shown only for one that fails, at once; the tests are not stopped (their indexers
# and devnets are stopped by the tests).
checks_log=$(mktemp)
(
  failed=0
  for check in typecheck lint knip deps; do
    if ! npm run --silent "$check" >"$checks_log" 2>&1; then
      cat "$checks_log" >&2
      say "npm run $check failed: fix what it names above (npm run format fixes formatting), then run npm test again."
      failed=1
    fi
  done
  rm -f "$checks_log"
  [ "$failed" = 0 ] && say "static checks passed: typecheck, lint, knip, deps"
  exit "$failed"
) </dev/null &
checks_pid=$!

# vitest is a child here, not this process: every signal this script gets goes on to it, as if the
# script had exec'd it.
vitest run "$@" &
vitest_pid=$!
for signal in INT TERM HUP; do trap "kill -$signal $vitest_pid 2>/dev/null" "$signal"; done
tests=0
wait "$vitest_pid" || tests=$?
# A signal interrupts wait (status > 128) while vitest is still stopping: wait for its own status.
while kill -0 "$vitest_pid" 2>/dev/null; do wait "$vitest_pid" || tests=$?; done
checks=0
wait "$checks_pid" || checks=$?
if [ "$checks" != 0 ]; then
  say "the static checks failed (above)"
  exit 1
fi
exit "$tests"
