# install_lib.sh - what tests/mpi/install.sh checks an installed tree against,
# each from its source of truth: the functions tpload.h declares (read
# from the header itself, so a declaration without TPL_API, or a man page
# or consumer that misses one, fails) and the options of the command
# table (printed by tests/unit/cli_table), which tpload.1 and every `tpload
# CMD --help` must name, and name nothing else.  Sourced after lib.sh.
# shellcheck shell=bash

# public_functions HEADER: every function HEADER declares, one a line,
# sorted: the names before "(" once the preprocessor has removed comments
# and macros (TPL_API included).
public_functions() {
  ${CC:-cc} -E -P -x c "$1" | grep -o '\btpl_[a-z0-9_]*[[:space:]]*(' |
    sed 's/[[:space:](]//g' | sort -u
}

# man_functions PAGE: the functions PAGE's NAME section lists and those
# its SYNOPSIS declares, as "name NAME" and "synopsis NAME" lines.
man_functions() {
  sed 's/\\-/-/g; s/\\f[BIRP]//g' "$1" | awk '
    /^\.SH/ { sec = $2; next }
    sec == "NAME" {
      s = $0
      while (match(s, /tpl_[a-z0-9_]+/)) {
        print "name", substr(s, RSTART, RLENGTH)
        s = substr(s, RSTART + RLENGTH)
      }
    }
    sec == "SYNOPSIS" {
      s = $0
      gsub(/"/, "", s)
      if (match(s, /tpl_[a-z0-9_]+ *\(/)) {
        f = substr(s, RSTART, RLENGTH)
        sub(/ *\($/, "", f)
        print "synopsis", f
      }
    }' |
    sort -u
}

# option_problems TABLE MODE [CMD] <TEXT: what TEXT gets wrong about the
# options of TABLE (tests/unit/cli_table's output), one line each:
#   missing CMD --OPT   an option of CMD's table that TEXT never names
#   unknown --OPT: LINE  TEXT names an option its command does not have
# MODE help: TEXT is `tpload CMD --help`.  MODE man: TEXT is tpload.1's
# source; an option counts for the commands of the SYNOPSIS line or the
# COMMANDS subsection (.SS) it stands in; DESCRIPTION, EXAMPLES and the
# rest are not read (they quote mpirun's options).  Either way a line
# that says "tpload OTHER" is about OTHER's options.  --help is everyone's.
option_problems() {
  sed 's/\\-/-/g; s/\\f[BIRP]//g; s/\\e//g' | awk -v table="$1" \
    -v mode="$2" -v cmd="${3:-}" '
    BEGIN {
      while ((getline l < table) > 0) {
        n = split(l, w, " ")
        cmds[++ncmd] = w[1]
        iscmd[w[1]] = 1
        for (i = 2; i <= n; i++) {
          has[w[1], w[i]] = 1
          opts[w[1]] = opts[w[1]] " " w[i]
        }
      }
      if (mode == "help") { ctx = " " cmd; reading = 1 }
    }
    function commands_in(s, out,   t) {
      out = ""
      while (match(s, /[a-z][a-z_]*/)) {
        t = substr(s, RSTART, RLENGTH)
        if (t in iscmd) out = out " " t
        s = substr(s, RSTART + RLENGTH)
      }
      return out
    }
    mode == "man" && /^\.SH/ {
      sec = $2
      ctx = ""
      reading = (sec == "SYNOPSIS" || sec == "COMMANDS")
      next
    }
    mode == "man" && sec == "COMMANDS" && /^\.SS/ {
      ctx = commands_in(substr($0, 4))
      next
    }
    mode == "man" && sec == "SYNOPSIS" && /^\.B tpload [a-z]+/ &&
      match($0, /tpload [a-z]+/) {
      ctx = commands_in(substr($0, RSTART + 7, RLENGTH - 7))
    }
    !reading { next }
    {
      here = ctx; counts = 1
      if (match($0, /tpload [a-z]+/)) {
        other = commands_in(substr($0, RSTART + 7, RLENGTH - 7))
        if (other != "" && other != ctx) { here = other; counts = 0 }
      }
      s = $0
      while (match(s, /--[a-z][a-z0-9-]*[a-z0-9]/)) {
        o = substr(s, RSTART, RLENGTH)
        s = substr(s, RSTART + RLENGTH)
        if (o == "--help") continue
        n = split(here, cs, " ")
        ok = 0
        for (i = 1; i <= n; i++)
          if ((cs[i], o) in has) {
            ok = 1
            if (counts) seen[cs[i], o] = 1
          }
        if (!ok) printf "unknown %s: %s\n", o, $0
      }
    }
    END {
      for (c = 1; c <= ncmd; c++) {
        if (mode == "help" && cmds[c] != cmd) continue
        n = split(opts[cmds[c]], os, " ")
        for (i = 1; i <= n; i++)
          if (!((cmds[c], os[i]) in seen))
            printf "missing %s %s\n", cmds[c], os[i]
      }
    }'
}
