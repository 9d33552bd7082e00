#!/usr/bin/env bash
# Fails when a module of strata-node uses a module above it in the layer
# order of DESIGN.md §3: each layer may use only itself and those before it.
# A file's layer is the first component of its path under node/src; lib.rs,
# main.rs and bin/ are the top. References are `crate::<layer>` anywhere in
# code (use lines and paths), comments excluded. Also: data command families
# touch only their narrow context (keys, client, configuration).
# Last, import circles between files (scripts/import_graph.py, whose header
# says what an edge is; test code is counted apart and closes no circle):
# each is reported, and the check fails when there are more than MAX_CIRCLES.
# To look closer: scripts/import_graph.py --edges (the whole graph), --strict
# (uses of an enclosing mod.rs's own items count too), --with-tests.
set -euo pipefail
# Import circles in node/src (7 before issue 20, 2 now): the generated key-spec
# table and its reader (key_specs_table.rs, key_specs.rs), and the store's core
# (a KeyAccess is a view of locked partitions, and partitions queue blocked
# clients that are served through one: access, partition, events, cold/pending,
# cold/recall). Lower it as circles are broken; the script says when it can.
MAX_CIRCLES=2
scripts=$(cd "$(dirname "$0")" && pwd)
python3 "$scripts/import_graph.py" --self-test
cd "$scripts/../node/src"
ORDER=(base sys protocol config metrics policy store tier durability memory session cluster commands server main)
rank() {
  local i
  for i in "${!ORDER[@]}"; do [[ ${ORDER[$i]} == "$1" ]] && { echo "$i"; return; }; done
  echo -1
}
status=0
while IFS= read -r file; do
  top=${file%%/*}
  top=${top%.rs}
  case $top in lib | main | bin) top=main ;; esac
  me=$(rank "$top")
  if ((me < 0)); then
    echo "check-layers: $file is in '$top', which is not a layer (${ORDER[*]})" >&2
    status=1
    continue
  fi
  # Strip line comments (doc comments included), then list crate::<name>.
  while IFS=: read -r line used; do
    them=$(rank "$used")
    if ((them < 0)); then
      echo "check-layers: node/src/$file:$line uses crate::$used, which is not a layer" >&2
      status=1
    elif ((them > me)); then
      echo "check-layers: node/src/$file:$line: '$top' uses crate::$used, a layer above it" >&2
      status=1
    fi
  done < <(sed -E 's://.*$::' "$file" | grep -noE 'crate::[a-z_]+' | sed -E 's/crate:://' | sort -u -t: -k2,2 || true)
done < <(find . -name '*.rs' -printf '%P\n' | sort)
# Data commands (every file of commands/data/) get a narrow context: their
# keys, their client and the configuration (`ctx.config()`), never the node's
# shared state or the server.
for file in commands/data/*.rs; do
  if hits=$(sed -E 's://.*$::' "$file" | grep -nE 'ctx\.(node|server)\b'); then
    while IFS= read -r hit; do
      echo "check-layers: node/src/$file:${hit%%:*}: a data command reaches past its narrow context (use ctx.keys, ctx.client, ctx.config())" >&2
    done <<<"$hits"
    status=1
  fi
done
if ((status == 0)); then
  echo "check-layers: every module uses only the layers before it (${ORDER[*]}); data commands stay in their narrow context"
fi
python3 "$scripts/import_graph.py" --root . --max "$MAX_CIRCLES" || status=1
exit $status
