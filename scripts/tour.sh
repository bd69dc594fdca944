#!/usr/bin/env bash
# The README's tour, run for real: starts the embedded system in a scratch folder,
# runs each step, prints every command before its output, and stops everything.
# Usage: scripts/tour.sh > docs/tour.txt
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/.venv/bin"
home="$(mktemp -d /tmp/seedline-tour-XXXXXX)"
port=${TOUR_NATS_PORT:-14555}  # tests/test_tour.py gives free ones
monitor=${TOUR_MONITOR_PORT:-18555}
export SEEDLINE_HOME="$home/home" SEEDLINE_NATS_URL="nats://127.0.0.1:$port"
export SEEDLINE_NATS_MONITOR_URL="http://127.0.0.1:$monitor" COLUMNS=100 NO_COLOR=1

"$bin/seedline" up --nats-port "$port" --monitor-port "$monitor" > "$home/up.log" 2>&1 &
up_pid=$!
second_runner=""
cleanup() {
  [ -n "$second_runner" ] && kill "$second_runner" 2>/dev/null || true
  kill -INT "$up_pid" 2>/dev/null || true
  wait "$up_pid" 2>/dev/null || true
  rm -rf "$home"
}
trap cleanup EXIT
for _ in $(seq 1 120); do grep -q "Seedline is up" "$home/up.log" && break; sleep 0.5; done
grep -q "Seedline is up" "$home/up.log" || { cat "$home/up.log" >&2; exit 1; }

step() { printf '\n'; "$bin/python" -c 'import shlex, sys; print("$ " + shlex.join(sys.argv[1:]))' "$@"; "$@" 2>&1; }
seedline() { "$bin/seedline" "$@"; }

echo "# seedline up is running (embedded NATS, Postgres, four services, demo runner)"
step seedline runners
step seedline status
step seedline publish --instance demo --repo apps/hello --conversation first-chat --kind chat_user \
  --content "Add a README with install steps" --entry-id tour-1
step seedline publish --instance demo --repo apps/hello --conversation first-chat --kind chat_assistant \
  --content "Added README.md: install with make, run with make run." --entry-id tour-2
step seedline publish --file docs/entries.jsonl
opened=$(seedline open --instance demo --repo apps/hello --engine scripted --node demo-runner \
  --json "What were we doing?")
printf '\n$ seedline open --instance demo --repo apps/hello --engine scripted --node demo-runner '"'"'What were we doing?'"'"' --json  # fields shortened\n'
echo "$opened" | "$bin/python" -c 'import json,sys; r=json.load(sys.stdin); print(json.dumps({k: r[k] for k in ("outcome","resumed","seeded","continuity","brief")}, indent=2)); print(r["notice"]["console"])'
conversation=$(echo "$opened" | "$bin/python" -c 'import json,sys; print(json.load(sys.stdin)["session_id"])')
step seedline brief show "$conversation"
step seedline stop "$conversation" --reason "the person went home"
step seedline publish --instance demo --repo apps/hello --conversation first-chat --kind chat_user \
  --content "Next: add a license file" --entry-id tour-3
# The message wakes the conversation: wait until it is live (not a fixed sleep, which a
# busy machine outlasts), then show it.
for _ in $(seq 1 120); do
  seedline conversations --json | grep -q '"session_id"' && break
  sleep 0.25
done
step seedline conversations
"$bin/seedline" runner --node-id laptop-2 --label "Laptop" --engine scripted > "$home/runner2.log" 2>&1 &
second_runner=$!
for _ in $(seq 1 40); do seedline runners --json | grep -q laptop-2 && break; sleep 0.25; done
woken=$(seedline conversations --json | "$bin/python" -c 'import json,sys; print(json.load(sys.stdin)["conversations"][0]["session_id"])')
step seedline relocate "$woken" --node laptop-2
for _ in $(seq 1 120); do
  seedline timeline --instance demo --repo apps/hello | grep -q "relocated to laptop-2" && break
  sleep 0.25
done
step seedline timeline --instance demo --repo apps/hello
step seedline rejected
