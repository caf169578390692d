#!/bin/sh
# harden_socket.sh - both sides of the daemon's trust boundary, with a
# second uid (nobody, 65534) playing the attacker:
# - consumers (status, dump, tpl_attach) refuse an impostor daemon: one
#   in a socket directory another user made, one listening as another
#   user in root's own directory (SO_PEERCRED), one behind a symbolic
#   link, one under a directory another user can change; the same
#   impostor is accepted when its uid is the one the client was told to
#   trust (so the refusals are about trust, not about the impostor);
# - `serve` refuses a symlinked socket directory, one another user made
#   first, and one under a directory another user can change, before
#   anything listens;
# - a real one-rank daemon is trusted, its attach reply carries the job id
#   of its ready file and the model, `dump` refuses to overwrite a file
#   without --force, and --health answers while another client holds
#   every connection slot.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"

FAKE="$TESTS_SRCDIR/oracle/fake_daemon.py"
ATTACH="$TESTS_BUILDDIR/unit/harden_attach"
NOBODY=65534
# fake NAME SOCKET [UID]: starts an impostor (as the caller, or dropping
# to UID before it listens) and waits until it listens.
fake() {
  local name=$1; shift
  "$ORACLE" "$FAKE" "$1" "$T_TMP/pub/$name.ready" ${2:+"$2"} &
  PIDS="$PIDS $!"
  wait_file "$T_TMP/pub/$name.ready" ||
    { echo "Bail out! impostor $name did not start"; exit 99; }
}
# t_refused NAME SOCKET WORD: status and dump on SOCKET exit 69 naming
# WORD, and dump writes nothing.
t_refused() {
  t_exit "$1: status refuses (69)" 69 "$TPLOAD" status "$2"
  if grep -q -- "$3" "$T_TMP/err"; then t_ok "$1: the message says '$3'"
  else t_fail "$1: the message says '$3'" "$(cat "$T_TMP/err")"; fi
  t_exit "$1: dump refuses (69)" 69 "$TPLOAD" dump "$2" --out "$T_TMP/d.st"
  if [ ! -e "$T_TMP/d.st" ]; then t_ok "$1: dump wrote nothing"
  else t_fail "$1: dump wrote nothing" "$T_TMP/d.st exists"; rm -f "$T_TMP/d.st"; fi
  t_exit "$1: tpl_attach refuses (69)" 69 "$ATTACH" "$2"
}

# nobody must reach its own directories below $T_TMP.
chmod 0711 "$T_TMP"
mkdir -m 0777 "$T_TMP/pub"
# nobody runs the impostor from here: the source tree may sit in a
# directory only root can enter (a clone under mktemp -d is 0700).
cp "$FAKE" "$T_TMP/pub/fake_daemon.py"
chmod 0644 "$T_TMP/pub/fake_daemon.py"

# 1. An impostor in a socket directory nobody made first.
mkdir -m 0700 "$T_TMP/theirs"
chown $NOBODY:$NOBODY "$T_TMP/theirs"
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
  "$ORACLE" "$T_TMP/pub/fake_daemon.py" "$T_TMP/theirs/rank0.sock" \
  "$T_TMP/pub/theirs.ready" &
PIDS="$PIDS $!"
wait_file "$T_TMP/pub/theirs.ready" ||
  { echo "Bail out! nobody's impostor did not start"; exit 99; }
t_refused "directory of another uid" "$T_TMP/theirs/rank0.sock" \
  "expected owner uid 0, found uid $NOBODY"
"$TPLOAD" status "$T_TMP/theirs/rank0.sock" --health >/dev/null 2>&1
t_exit_rc=$?
if [ $t_exit_rc -eq 69 ]; then t_ok "directory of another uid: --health says 69"
else t_fail "directory of another uid: --health says 69" "it said $t_exit_rc"; fi
t_exit "the same impostor with --daemon-uid $NOBODY: --health 0" 0 \
  "$TPLOAD" status "$T_TMP/theirs/rank0.sock" --health --daemon-uid $NOBODY
t_exit "the same impostor with TPLOAD_DAEMON_UID=$NOBODY: --health 0" 0 \
  env TPLOAD_DAEMON_UID=$NOBODY "$TPLOAD" status "$T_TMP/theirs/rank0.sock" \
  --health
t_exit "--daemon-uid takes only a number (64)" 64 \
  "$TPLOAD" status "$T_TMP/theirs/rank0.sock" --daemon-uid nobody

# 2. An impostor listening as nobody in root's own private directory.
mkdir -m 0700 "$T_TMP/mine"
fake peer "$T_TMP/mine/rank0.sock" $NOBODY
t_refused "a listener of another uid (SO_PEERCRED)" \
  "$T_TMP/mine/rank0.sock" "expected a daemon of uid 0, found uid $NOBODY"

# 3. The socket directory is a symbolic link (to a private directory).
ln -s "$T_TMP/mine" "$T_TMP/link"
t_refused "a symlinked socket directory" "$T_TMP/link/rank0.sock" \
  "symbolic link"

# 4. Root's private directory inside one nobody can change.
mkdir -m 0755 "$T_TMP/open"
chown $NOBODY "$T_TMP/open"
mkdir -m 0700 "$T_TMP/open/sock"
fake open "$T_TMP/open/sock/rank0.sock"
t_refused "a socket directory under another uid's directory" \
  "$T_TMP/open/sock/rank0.sock" "not trusted: uid $NOBODY"

# 5. serve refuses the same places before anything listens (73).
gen m --seed 5101 --layout single
for d in link open/sock theirs; do
  t_exit "serve refuses --socket-dir $d (73)" 73 \
    mpi 1 serve "$M/m" --plan "$M/m/plan.json" --socket-dir "$T_TMP/$d" \
    --quiet
done
mpi 1 serve "$M/m" --plan "$M/m/plan.json" --socket-dir "$T_TMP/new/x" \
  --quiet >/dev/null 2>"$T_TMP/err"
if [ $? -ne 0 ] && [ ! -e "$T_TMP/new/x" ]; then
  t_ok "serve does not create missing parents of --socket-dir"
else t_fail "serve does not create missing parents of --socket-dir"; fi

# 6. The real daemon: trusted, the job identity, dump's --force.
"$MPIRUN" -np 1 "$TPLOAD" serve "$M/m" --plan "$M/m/plan.json" \
  --socket-dir "$T_TMP/real" --ready-file "$T_TMP/ready" --quiet >"$T_TMP/serve.out" 2>"$T_TMP/serve.err" &
JOB=$!
PIDS="$PIDS $JOB"
if wait_file "$T_TMP/ready"; then t_ok "the real daemon is ready"
else t_fail "the real daemon is ready" "$(cat "$T_TMP/serve.err")"; fi
t_exit "the real daemon: --health 0" 0 \
  "$TPLOAD" status "$T_TMP/real/rank0.sock" --health
t_check "tpl_attach trusts the real daemon" "$ATTACH" "$T_TMP/real/rank0.sock"
cp "$T_TMP/out" "$T_TMP/ident"
t_py "the attach reply's job id is the ready file's (32 hex digits), and the model" '
import json, re, sys
ident = open(sys.argv[1]).read().split("\n")
ready = json.load(open(sys.argv[2]))
if not re.fullmatch("[0-9a-f]{32}", ident[0]):
    sys.exit("job id: expected 32 hex digits, found %r" % ident[0])
if ready.get("job_id") != ident[0]:
    sys.exit("job id: ready file %r, attach reply %r" % (ready.get("job_id"), ident[0]))
if ident[1] != sys.argv[3]:
    sys.exit("model: expected %r, found %r" % (sys.argv[3], ident[1]))
' "$T_TMP/ident" "$T_TMP/ready" "$M/m"
t_exit "dump to a new file: 0" 0 \
  "$TPLOAD" dump "$T_TMP/real/rank0.sock" --out "$T_TMP/r0.st"
echo keep >"$T_TMP/old.st"
t_exit "dump over an existing file without --force: 73" 73 \
  "$TPLOAD" dump "$T_TMP/real/rank0.sock" --out "$T_TMP/old.st"
if [ "$(cat "$T_TMP/old.st")" = keep ]; then t_ok "the existing file is untouched"
else t_fail "the existing file is untouched"; fi
t_exit "dump over an existing file with --force: 0" 0 \
  "$TPLOAD" dump "$T_TMP/real/rank0.sock" --out "$T_TMP/old.st" --force
t_check "the forced dump is the same bytes" cmp "$T_TMP/r0.st" "$T_TMP/old.st"
# Same-uid clients holding all 256 connection slots: health still
# answers (a reserved slot, one reply, then closed); other requests there
# are told the daemon is busy.
"$ORACLE" "$TESTS_SRCDIR/oracle/conn_holder.py" "$T_TMP/real/rank0.sock" 256 \
  "$T_TMP/held" 2>"$T_TMP/holder.err" &
HOLDER=$!
PIDS="$PIDS $HOLDER"
if wait_file "$T_TMP/held"; then t_ok "a client holds all 256 slots"
else t_fail "a client holds all 256 slots" "$(cat "$T_TMP/holder.err")"; fi
t_exit "every slot held: --health still 0" 0 \
  "$TPLOAD" status "$T_TMP/real/rank0.sock" --health
t_exit "every slot held: status is told busy (69)" 69 \
  "$TPLOAD" status "$T_TMP/real/rank0.sock"
if grep -q busy "$T_TMP/err"; then t_ok "every slot held: the message says busy"
else t_fail "every slot held: the message says busy" "$(cat "$T_TMP/err")"; fi
kill -KILL "$HOLDER"
wait "$HOLDER" 2>/dev/null
# The slots are free once the daemon has seen the holder's connections
# close, which it may not have yet: a --shutdown sent before would be
# told busy and the job would never end.
if wait_until "$TPLOAD" status "$T_TMP/real/rank0.sock" >/dev/null 2>&1; then
  t_ok "the slots are free again once the holder is gone"
else t_fail "the slots are free again once the holder is gone"; fi
t_exit "the real daemon stops on --shutdown" 0 \
  "$TPLOAD" status "$T_TMP/real/rank0.sock" --shutdown
wait "$JOB"
t_done
