"""The fixed POSIX ``sh`` scripts perflab runs on hosts to manage detached processes.

They are constants: every variable part (paths, keys, argv) is passed as a positional argument, so
user text is never parsed by a shell. They need only ``sh``, ``setsid``, ``grep``, ``kill``, ``sleep``
and ``/proc`` (Linux), which every GPU/NPU host has.

A run's processes are recognised two ways, because a pid alone may be reused by an unrelated process:
- they carry the environment entry ``PERFLAB_PROCESS=<run dir>/<name>`` (found in /proc/<pid>/environ);
- they sit in the process group the launcher created, provided the group leader recorded at launch is
  gone or has the recorded start time (a reused pid has a different one), and started no earlier.
"""

from __future__ import annotations

# members PGID START MARKER -> prints the live (non-zombie) pids of one detached process ("-": no START).
# A scan is not atomic: a process may fork after /proc was listed and exit before it was read, so two
# scans are made and their union is printed.
_MEMBERS = r"""
scan_members() {
  marked=$(grep -lzxF -- "$3" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/##; s#/environ$##')
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v grp="$1" -v start="$2" -v marked=" $(echo $marked) " '
    {
      pid = $1; rest = $0; sub(/.*\) /, "", rest); split(rest, f, " ")
      if (pid == grp) leader_start = f[20]
      if (f[1] == "Z") next
      if (index(marked, " " pid " ")) { found[pid] = 1; next }
      if (f[3] == grp) group[pid] = f[20]
    }
    END {
      if (start == "-") start = ""
      if (start == "" || leader_start == "" || leader_start == start)
        for (pid in group) if (start == "" || group[pid] + 0 >= start + 0) found[pid] = 1
      for (pid in found) printf "%s ", pid
    }'
}
members() {
  union=""
  for pid in $(scan_members "$@") $(scan_members "$@"); do
    case " $union " in *" $pid "*) ;; *) union="$union $pid" ;; esac
  done
  echo $union
}
"""

# launch RUN_DIR NAME CMD_JSON ENV_ASSIGNMENT... -- ARGV...
# Starts ARGV in a new session, stdin from /dev/null, stdout+stderr appended to NAME.log; a wrapper
# records the exit status in NAME.exit. Writes NAME.pid (pid, then start time) and prints the pid.
LAUNCH = r"""
dir=$1; name=$2; cmd_json=$3; shift 3
mkdir -p -- "$dir" || exit 125
printf '%s\n' "$cmd_json" > "$dir/cmd.json" || exit 125
rm -f -- "$dir/$name.exit"
env "$@" </dev/null >>"$dir/$name.log" 2>&1 &
pid=$!
start=-
if read -r line 2>/dev/null < "/proc/$pid/stat"; then rest=${line##*) }; set -- $rest; start=${20}; fi
if ! printf '%s\n%s\n' "$pid" "$start" > "$dir/$name.pid"; then
  kill -KILL -- "-$pid" "$pid" 2>/dev/null
  exit 125
fi
echo "$pid $start"
"""

# The wrapper LAUNCH runs inside the new session: runs the command, records how it ended.
WRAPPER = r'exit_file=$1; shift; "$@"; echo $? > "$exit_file"'

# record PID_FILE ARGV... -> writes PID_FILE (pid, then start time) as LAUNCH does, then becomes ARGV.
# For a process the caller runs attached (its output streamed back) that must still be found and
# stopped later, e.g. after the caller died.
RECORD = r"""
pid_file=$1; shift
start=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$$/stat" 2>/dev/null)
printf '%s\n%s\n' "$$" "${start:--}" > "$pid_file" || exit 125
exec "$@"
"""

# listening -> the hex port of every listening TCP socket (IPv4 or IPv6, any address), one per line.
LISTENING = r"""
awk '$4 == "0A" { n = split($2, address, ":"); print address[n] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
exit 0
"""

# serves PORT PGID START MARKER -> exit status 0 when a member of the detached process holds the socket
# listening on TCP PORT (its inode, from /proc/net/tcp{,6}, among the members' open files).
SERVES = (
    _MEMBERS
    + r"""
port=$(printf ':%04X' "$1"); shift
inodes=$(awk -v port="$port" '$4 == "0A" && substr($2, length($2) - 4) == port { print $10 }' \
  /proc/net/tcp /proc/net/tcp6 2>/dev/null)
[ -n "$inodes" ] || exit 1
for pid in $(members "$@"); do
  for fd in /proc/"$pid"/fd/*; do
    link=$(readlink "$fd" 2>/dev/null) || continue
    for inode in $inodes; do
      [ "$link" = "socket:[$inode]" ] && exit 0
    done
  done
done
exit 1
"""
)

# state PGID START MARKER EXIT_FILE -> "pids: ..." and "exit: <status or empty>". The exit file is read
# first: once it exists, every process the command started is already there to be found.
STATE = (
    _MEMBERS
    + r"""
code=""
[ -f "$4" ] && read -r code < "$4"
pids=$(members "$1" "$2" "$3")
echo "pids: $pids"
echo "exit: $code"
"""
)

# stop PGID START MARKER GRACE_TENTHS -> TERM every member, wait up to the grace, KILL what is left.
# Prints "stopped: none|term|kill" or "left: <pids>".
STOP = (
    _MEMBERS
    + r"""
grp=$1; start=$2; marker=$3; ticks=$4
pids=$(members "$grp" "$start" "$marker")
if [ -z "$pids" ]; then echo "stopped: none"; exit 0; fi
signalled=" $pids "
kill -TERM $pids 2>/dev/null
i=0
while [ "$i" -lt "$ticks" ]; do
  sleep 0.1
  pids=$(members "$grp" "$start" "$marker")
  if [ -z "$pids" ]; then echo "stopped: term"; exit 0; fi
  for pid in $pids; do
    case $signalled in *" $pid "*) ;; *) kill -TERM "$pid" 2>/dev/null; signalled="$signalled$pid " ;; esac
  done
  i=$((i + 1))
done
i=0
while [ "$i" -lt 50 ]; do
  kill -KILL $pids 2>/dev/null
  sleep 0.1
  pids=$(members "$grp" "$start" "$marker")
  if [ -z "$pids" ]; then echo "stopped: kill"; exit 0; fi
  i=$((i + 1))
done
echo "left: $pids"
"""
)

# leftovers RUNS_DIR -> one line per pid file whose process still has members:
# "<run-key> <name> <pgid> <start> <pids...>"
LEFTOVERS = (
    _MEMBERS
    + r"""
for pid_file in "$1"/*/*.pid; do
  [ -f "$pid_file" ] || continue
  run_dir=${pid_file%/*}; run_key=${run_dir##*/}; name=${pid_file##*/}; name=${name%.pid}
  { read -r grp; read -r start; } < "$pid_file"
  case $grp in ''|*[!0-9]*) continue ;; esac
  pids=$(members "$grp" "$start" "PERFLAB_PROCESS=$run_dir/$name")
  [ -n "$pids" ] && echo "$run_key $name $grp $start $pids"
done
exit 0
"""
)
