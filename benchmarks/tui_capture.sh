#!/usr/bin/env bash
# Open `workbench watch` on a fresh rmsnorm project inside tmux, save the kernel the way an editor
# does (first a copy whose column mask stops one short, then the fixed one), and capture the screen
# after each step as text: what a user sees. Needs tmux.
# Usage: bash benchmarks/tui_capture.sh OUTDIR [WAIT_SECONDS]
set -uo pipefail
out=${1:-/tmp/tui-capture}
wait_s=${2:-12}
mkdir -p "$out"
work=$(mktemp -d)
python3 -m workbench.cli new rmsnorm --dir "$work" >/dev/null
kernel="$work/rmsnorm/kernel.py"
cp "$kernel" "$work/good.py"
# Break the single-pass path: its mask stops one column short, so each row's last column is never written.
sed 's/        mask = cols < n_cols$/        mask = cols < n_cols - 1/' "$work/good.py" > "$work/broken.py"
cmp -s "$work/good.py" "$work/broken.py" && echo "warning: the break did not apply"
save() { cp "$1" "$kernel.tmp" && mv "$kernel.tmp" "$kernel"; }
capture() { tmux capture-pane -p -t wb > "$out/$1.txt"; echo "== $1"; cat "$out/$1.txt"; }
tmux kill-session -t wb 2>/dev/null
tmux new-session -d -s wb -x 180 -y 50 "python3 -m workbench.cli watch $work/rmsnorm; sleep 30"
sleep "$wait_s"; capture 1-start
save "$work/broken.py"; sleep "$wait_s"; capture 2-broken
save "$work/good.py"; sleep "$wait_s"; capture 3-fixed
tmux send-keys -t wb 2; sleep 1; capture 4-autotune
tmux send-keys -t wb 3; sleep 1; capture 5-changes
tmux send-keys -t wb q; sleep 2
tmux kill-session -t wb 2>/dev/null
exit 0
