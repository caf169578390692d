#!/bin/sh
# include-graph.sh - the module import graph of src/ and its circles.
# A module is a .c/.h pair (src/plan.c + src/plan.h = "plan") with its
# private header, if any (src/engine_internal.h is module "engine"'s, as
# libuv's src/unix/internal.h is its unit's); module A imports B when a
# file of A includes one of B's headers.  Prints every circle (a
# strongly connected set of two or more modules) and exits 1 when there
# is one, 0 otherwise.  Usage: scripts/include-graph.sh [--edges] [SRCDIR]
edges=0
[ "$1" = "--edges" ] && { edges=1; shift; }
src=${1:-$(dirname "$0")/../src}
exec "${PYTHON:-python3}" - "$src" "$edges" <<'PY'
import os, re, sys
src, show_edges = sys.argv[1], sys.argv[2] == "1"
graph = {}
def module(name):
    return re.sub(r"_internal$", "", name)
for f in sorted(os.listdir(src)):
    mod, ext = os.path.splitext(f)
    if ext not in (".c", ".h"):
        continue
    mod = module(mod) if ext == ".h" else mod
    deps = graph.setdefault(mod, set())
    for line in open(os.path.join(src, f), encoding="utf-8"):
        m = re.match(r'\s*#\s*include\s+"([^"]+)\.h"', line)
        if m and "/" not in m.group(1) and module(m.group(1)) != mod:
            deps.add(module(m.group(1)))
if show_edges:
    for mod in sorted(graph):
        print(mod, "->", " ".join(sorted(graph[mod])))
# Tarjan's strongly connected components.
index, low, stack, on, sccs = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))
for v in sorted(graph):
    if v not in index:
        visit(v)
for c in sccs:
    print("circle:", " ".join(c))
print(len(sccs), "circles among", len(graph), "modules")
sys.exit(1 if sccs else 0)
PY
