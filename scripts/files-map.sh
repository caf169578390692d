#!/bin/sh
# files-map.sh - holds docs/FILES.md to the code.  Reads the table between
# "<!-- files-map: table" and "<!-- files-map: end -->" (a row's Layer
# cell, when not empty, starts the next box; its File cell names modules
# by their .c, or a header alone) and the units table after
# "<!-- files-map: units", then checks:
#  (a) each unit's files, in the table's order, are its sources in
#      Makefile.am, in the same order (a module's .h before its .c);
#  (b) the unit that sees mpi.h / uv.h is the one src/guard/mpi/mpi.h /
#      src/guard/uv/uv.h names, the only one Makefile.am builds without
#      that guard, and the only one whose files include it;
#  (c) every src/*.c and src/*.h is in the table, once, and every file
#      the table names exists;
#  (d) no file includes a header of a box to its right.
# Prints every violation and exits 1 when there is one, 0 otherwise.
# Usage: scripts/files-map.sh [TOPDIR]
top=${1:-$(dirname "$0")/..}
exec "${PYTHON:-python3}" - "$top" <<'PY'
import fnmatch, os, re, sys

top = sys.argv[1]
src = os.path.join(top, "src")
errors = []


def fail(msg):
    errors.append(msg)


def marked_rows(text, mark):
    """The cells of each row of the table after <!-- files-map: MARK."""
    at = text.find("<!-- files-map: " + mark)
    end = text.find("<!-- files-map: end -->", at)
    if at < 0 or end < 0:
        sys.exit("files-map: docs/FILES.md has no '%s' table" % mark)
    rows = []
    for line in text[at:end].splitlines()[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        rows.append(cells)
    return rows[1:]  # the header row


def named(cell):
    return re.findall(r"`([A-Za-z0-9_]+\.[ch])`", cell)


def expand(names):
    """A module's .c brings its header of the same name, header first."""
    out = []
    for n in names:
        h = n[:-2] + ".h"
        if n.endswith(".c") and os.path.exists(os.path.join(src, h)):
            out.append(h)
        out.append(n)
    return out


text = open(os.path.join(top, "docs", "FILES.md"), encoding="utf-8").read()

# The table: box order and every file's box.
boxes, box_of, order = [], {}, []
for cells in marked_rows(text, "table"):
    if len(cells) < 2:
        continue
    if cells[0]:
        if cells[0] in boxes:
            fail("docs/FILES.md: box '%s' appears twice" % cells[0])
        boxes.append(cells[0])
    if not boxes:
        sys.exit("files-map: the table's first row names no box")
    for f in expand(named(cells[1])):
        if f in box_of:
            fail("docs/FILES.md: %s is in two rows" % f)
        box_of[f] = len(boxes) - 1
        order.append(f)

# (c) the table against src/.
present = sorted(f for f in os.listdir(src)
                 if f.endswith((".c", ".h"))
                 and os.path.isfile(os.path.join(src, f)))
for f in present:
    if f not in box_of:
        fail("src/%s: not in docs/FILES.md's table" % f)
for f in order:
    if f not in present:
        fail("docs/FILES.md names %s: there is no src/%s" % (f, f))

# The units.
units, sees, rest = {}, {}, None
for cells in marked_rows(text, "units"):
    m = re.match(r"`([A-Za-z0-9_]+)`", cells[0])
    if not m:
        continue
    name = m.group(1)
    files = expand(named(cells[1]))
    for f in files:
        if f not in box_of:
            fail("docs/FILES.md: unit %s lists %s, which the table lacks"
                 % (name, f))
    if files:  # in the table's order
        units[name] = [f for f in order if f in files]
    else:
        rest = name
    for h in ("mpi.h", "uv.h"):
        if len(cells) > 2 and "`%s`" % h in cells[2]:
            sees[h] = name
if rest is not None:  # every file no other unit lists
    taken = {f for fs in units.values() for f in fs}
    units[rest] = [f for f in order if f not in taken]

# Makefile.am's sources and include flags per unit.
mk = open(os.path.join(top, "Makefile.am"), encoding="utf-8").read()
mk = mk.replace("\\\n", " ")
sources, flags = {}, {}
for line in mk.splitlines():
    m = re.match(r"(\w+)_(SOURCES|CPPFLAGS)\s*(\+?=)\s*(.*)", line)
    if not m or m.group(1).startswith("nodist_"):
        continue
    var, kind, words = m.group(1), m.group(2), m.group(4).split()
    table = sources if kind == "SOURCES" else flags
    if m.group(3) == "=":
        table[var] = []
    table.setdefault(var, []).extend(words)
am_flags = next((l.split("=", 1)[1].split() for l in mk.splitlines()
                 if re.match(r"AM_CPPFLAGS\s*=", l)), [])


def mkvar(unit):
    return unit + "_la" if unit.startswith("lib") else unit


# (a) each unit's list against Makefile.am's, in order.
for unit, files in units.items():
    want = ["src/" + f for f in files]
    got = [w for w in sources.get(mkvar(unit), []) if w.startswith("src/")]
    for f in sorted(set(want) - set(got)):
        fail("%s: %s is in docs/FILES.md's list, not in Makefile.am's"
             % (unit, f))
    for f in sorted(set(got) - set(want)):
        fail("%s: %s is in Makefile.am's list, not in docs/FILES.md's"
             % (unit, f))
    if set(want) == set(got) and want != got:
        i = next(i for i, (a, b) in enumerate(zip(want, got)) if a != b)
        fail("%s: Makefile.am lists %s where docs/FILES.md's order has %s"
             % (unit, got[i], want[i]))

# (b) the walls: guard header, Makefile.am's flags, the includes.
for h, guard in (("mpi.h", "GUARD_MPI"), ("uv.h", "GUARD_UV")):
    unit = sees.get(h)
    if unit is None:
        fail("docs/FILES.md: no unit sees %s" % h)
        continue
    path = os.path.join(src, "guard", h[:-2], h)
    # A name may be a glob (src/engine_*.c): it stands for the files of
    # src/ it matches.
    guard_files = set()
    for pat in re.findall(r"src/([A-Za-z0-9_*]+\.c)",
                          open(path, encoding="utf-8").read()):
        guard_files |= set(fnmatch.filter(os.listdir(src), pat)) or {pat}
    unit_files = {f for f in units.get(unit, []) if f.endswith(".c")}
    if guard_files != unit_files:
        fail("src/guard/%s/%s names %s; %s (sees %s) is %s"
             % (h[:-2], h, " ".join(sorted(guard_files)), unit, h,
                " ".join(sorted(unit_files))))
    for other in units:
        var = mkvar(other)
        guarded = "$(%s)" % guard in flags.get(var, am_flags)
        if other == unit and guarded:
            fail("Makefile.am: %s sees %s but builds with $(%s)"
                 % (unit, h, guard))
        if other != unit and not guarded and var in sources:
            fail("Makefile.am: %s builds without $(%s)" % (other, guard))

# (d) every include against the box order.
narrows = 0
for f in present:
    for line in open(os.path.join(src, f), encoding="utf-8"):
        m = re.match(r'\s*#\s*include\s*([<"])([^">]+)[">]', line)
        if not m:
            continue
        inc = m.group(2)
        if m.group(1) == "<":
            unit = sees.get(inc)
            if unit is not None and f not in units.get(unit, []):
                fail("src/%s includes <%s>, which only %s may"
                     % (f, inc, unit))
            continue
        if "/" in inc or inc not in box_of or f not in box_of:
            continue
        narrows += 1
        if box_of[inc] > box_of[f]:
            fail("src/%s (%s) includes %s (%s): a box to its right"
                 % (f, boxes[box_of[f]], inc, boxes[box_of[inc]]))

for e in errors:
    print(e)
print("files-map: %d files in %d boxes, %d includes, %d violations"
      % (len(present), len(boxes), narrows, len(errors)))
sys.exit(1 if errors else 0)
PY
