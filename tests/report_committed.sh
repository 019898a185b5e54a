#!/usr/bin/env bash
# The committed CSVs must still build the report (schema, notebooks and template agree), and
# the committed report/README.md, the results index and README.md's headline and versions tables
# must be what they build: a stale one fails here.
# Skips (77) when the Python lacks pandas or matplotlib.
set -euo pipefail
py=$1 root=$2
"$py" -c 'import pandas, matplotlib' 2>/dev/null || { echo "no pandas/matplotlib: skipping"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# --check-readme: README.md's headline and versions tables must be what the build gives (exit 1
# and a message when stale); README.md itself is not rewritten.
(cd "$root" && MPLBACKEND=Agg "$py" -m report.build --out "$out" --check-readme) > "$out/build.log" 2>&1 ||
  { cat "$out/build.log"; exit 1; }
# Output paths inside the text differ (out dir); compare everything else.
if ! diff <(sed "s#$out#report#g" "$out/README.md") "$root/report/README.md" > "$out/diff.txt"; then
  echo "report/README.md is stale: run ./study report and commit it"; head -20 "$out/diff.txt"; exit 1
fi
# The appendix pages: the same set, each what the build gives.
if ! diff <(cd "$out/appendix" && ls) <(cd "$root/report/appendix" && ls) > "$out/diff.txt"; then
  echo "report/appendix/ is not the set of pages the build gives: run ./study report and commit it"
  cat "$out/diff.txt"; exit 1
fi
for page in "$out"/appendix/*.md; do
  if ! diff <(sed "s#$out#report#g" "$page") "$root/report/appendix/${page##*/}" > "$out/diff.txt"; then
    echo "report/appendix/${page##*/} is stale: run ./study report and commit it"; head -20 "$out/diff.txt"; exit 1
  fi
done
if ! diff "$out/results_index.md" "$root/experiments/results/README.md" > "$out/diff.txt"; then
  echo "experiments/results/README.md is stale: run ./study report and commit it"; head -20 "$out/diff.txt"; exit 1
fi
echo "report builds from the committed CSVs and matches report/README.md, its appendix pages, experiments/results/README.md and README.md's tables"
