#!/usr/bin/env bash
# Two copies of the README's test command at once beside a CPU hog (`yes > /dev/null` per core): the check
# behind docs/performance.md "The suite beside a CPU hog". Each copy needs its own checkout with its own .venv
# (`python3 -m venv .venv && .venv/bin/pip install -e '.[test]'`), at the commit under test.
# usage: benchmarks/suite_under_load.sh CHECKOUT_A CHECKOUT_B OUT_DIR
set -u
a_dir=$1 b_dir=$2 out=$3
mkdir -p "$out"
hogs=()
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
for _ in $(seq "$(nproc)"); do yes > /dev/null & hogs+=($!); done
start=$SECONDS
run_copy() {  # $1 checkout, $2 log
    (cd "$1" && .venv/bin/python -m pytest -n auto --dist loadfile -p no:cacheprovider > "$2" 2>&1
     echo "rc=$? after $((SECONDS - start)) s" >> "$2")
}
run_copy "$a_dir" "$out/a.log" & a=$!
run_copy "$b_dir" "$out/b.log" & b=$!
wait "$a" "$b"
for x in a b; do
    echo "copy $x ($(git -C "$([ $x = a ] && echo "$a_dir" || echo "$b_dir")" rev-parse --short HEAD)):" \
         "$(tail -1 "$out/$x.log") | $(grep -E '[0-9]+ (passed|failed)' "$out/$x.log" | tail -1)"
done
