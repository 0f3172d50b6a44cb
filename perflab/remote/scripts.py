"""The fixed POSIX ``sh`` scripts perflab runs on hosts to manage detached processes.

They are constants: every variable part (paths, keys, argv) is passed as a positional argument, so
user text is never parsed by a shell. They need only ``sh``, ``setsid``, ``grep``, ``kill``, ``sleep``
and ``/proc`` (Linux), which every GPU/NPU host has.

A run's processes are recognised two ways, because a pid alone may be reused by an unrelated process:
- they carry the environment entry ``PERFLAB_PROCESS=<run dir>/<name>`` (found in /proc/<pid>/environ);
- they sit in the process group the launcher created, provided the group leader recorded at launch is
  gone or has the recorded start time (a reused pid has a different one), and started no earlier.

Which processes may still be alive is kept in an index beside the run dirs, ``<runs>/.active/<run
key>/<name>``: an entry is made when a pid file is written (``LAUNCH``, ``RECORD``) and dropped once the
process is known to be gone (a clean ``STOP``, or a ``LEFTOVERS`` scan that finds none of its
processes). So the scan for leftovers reads the entries of unfinished processes only, however many runs
the workdir has kept, and makes one pass over /proc for all of them.
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

# index_since RUNS_DIR: the stamp of when the index began (pid files older than it were written without
# their entry); index_entry RUN_DIR NAME / unindex RUN_DIR NAME: the entry of one process in the index of
# those that may still be alive (see the module doc).
_INDEX = r"""
index_since() {
  [ -e "$1/.index-since" ] || { mkdir -p -- "$1" 2>/dev/null && : > "$1/.index-since"; }
}
index_entry() {
  index="${1%/*}/.active/${1##*/}"
  mkdir -p -- "$index" 2>/dev/null && : > "$index/$2"
}
unindex() {
  index="${1%/*}/.active/${1##*/}"
  rm -f -- "$index/$2"
  rmdir -- "$index" 2>/dev/null
  return 0
}
"""

# launch RUN_DIR NAME CMD_JSON ENV_ASSIGNMENT... -- ARGV...
# Starts ARGV in a new session, stdin from /dev/null, stdout+stderr appended to NAME.log; a wrapper
# records the exit status in NAME.exit. Writes NAME.pid (pid, then start time) and prints the pid.
# It runs under the process's marker, so the child it forks carries the marker before it execs.
LAUNCH = (
    _INDEX
    + r"""
dir=$1; name=$2; cmd_json=$3; shift 3
index_since "${dir%/*}"
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
index_entry "$dir" "$name"
echo "$pid $start"
"""
)

# The wrapper LAUNCH runs inside the new session: runs the command, records how it ended.
WRAPPER = r'exit_file=$1; shift; "$@"; echo $? > "$exit_file"'

# record PID_FILE ARGV... -> writes PID_FILE (pid, then start time) as LAUNCH does, then becomes ARGV.
# For a process the caller runs attached (its output streamed back) that must still be found and
# stopped later, e.g. after the caller died.
RECORD = (
    _INDEX
    + r"""
pid_file=$1; shift
run_dir=${pid_file%/*}
index_since "${run_dir%/*}"
start=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$$/stat" 2>/dev/null)
printf '%s\n%s\n' "$$" "${start:--}" > "$pid_file" || exit 125
name=${pid_file##*/}
index_entry "$run_dir" "${name%.pid}"
exec "$@"
"""
)

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
    + _INDEX
    + r"""
grp=$1; start=$2; marker=$3; ticks=$4
path=${marker#PERFLAB_PROCESS=}
pids=$(members "$grp" "$start" "$marker")
if [ -z "$pids" ]; then unindex "${path%/*}" "${path##*/}"; echo "stopped: none"; exit 0; fi
signalled=" $pids "
kill -TERM $pids 2>/dev/null
i=0
while [ "$i" -lt "$ticks" ]; do
  sleep 0.1
  pids=$(members "$grp" "$start" "$marker")
  if [ -z "$pids" ]; then unindex "${path%/*}" "${path##*/}"; echo "stopped: term"; exit 0; fi
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
  if [ -z "$pids" ]; then unindex "${path%/*}" "${path##*/}"; echo "stopped: kill"; exit 0; fi
  i=$((i + 1))
done
echo "left: $pids"
"""
)

# leftovers RUNS_DIR -> "examined: <n>" (the processes looked at), then one line per process whose
# members are alive: "leftover: <run-key> <name> <pgid> <start> <pids...>". The index of processes that
# may be alive is read, with one pass over /proc for all of them; an entry whose processes are gone is
# dropped from it. The first scan of a workdir also looks at the pid files written before the index
# began (in the same pass, indexing only those still alive), so later scans never read them again.
LEFTOVERS = (
    _INDEX
    + r"""
runs=$1
candidates=""
count=0
consider() {
  grp=""; start=""
  [ -f "$runs/$1/$2.pid" ] && { read -r grp; read -r start; } < "$runs/$1/$2.pid"
  case $grp in
    ''|*[!0-9]*) [ "$3" = index ] && unindex "$runs/$1" "$2"; return 0 ;;
  esac
  count=$((count + 1))
  candidates="${candidates}C $1 $2 $grp ${start:--} $3
"
}
for entry in "$runs"/.active/*/*; do
  [ -f "$entry" ] || continue
  run_key=${entry%/*}
  consider "${run_key##*/}" "${entry##*/}" index
done
legacy=no
if [ ! -e "$runs/.indexed" ] && [ -d "$runs" ]; then
  legacy=yes
  if [ -e "$runs/.index-since" ]; then
    written_before=$(find "$runs" -mindepth 2 -maxdepth 2 -name '*.pid' ! -newer "$runs/.index-since")
  else
    written_before=$(find "$runs" -mindepth 2 -maxdepth 2 -name '*.pid')
  fi
  while read -r pid_file; do
    [ -f "$pid_file" ] || continue
    run_dir=${pid_file%/*}; name=${pid_file##*/}; name=${name%.pid}; run_key=${run_dir##*/}
    [ -e "$runs/.active/$run_key/$name" ] && continue
    consider "$run_key" "$name" legacy
  done <<EOF_LEGACY
$written_before
EOF_LEGACY
fi
echo "examined: $count"
if [ "$count" -gt 0 ]; then
  scan=$(
    {
      printf '%s' "$candidates"
      grep -Hazx -- 'PERFLAB_PROCESS=.*' /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'
      cat /proc/[0-9]*/stat 2>/dev/null
    } | RUNS="$runs" awk '
      $1 == "C" {
        id = $2 " " $3; ids[id] = 1; grp[id] = $4; start[id] = ($5 == "-" ? "" : $5); source[id] = $6
        of_grp[$4] = of_grp[$4] SUBSEP id; next
      }
      /^\/proc\/[0-9]+\/environ:/ {
        pid = substr($0, 7); pid = substr(pid, 1, index(pid, "/") - 1)
        path = substr($0, index($0, ":PERFLAB_PROCESS=") + 17); prefix = ENVIRON["RUNS"] "/"
        if (substr(path, 1, length(prefix)) != prefix) next
        path = substr(path, length(prefix) + 1); slash = index(path, "/")
        marked[pid] = substr(path, 1, slash - 1) " " substr(path, slash + 1); next
      }
      {
        pid = $1; rest = $0; sub(/.*\) /, "", rest); split(rest, f, " ")
        if (pid in of_grp) leader_start[pid] = f[20]
        if (f[1] == "Z") next
        if ((pid in marked) && (marked[pid] in ids)) { found[marked[pid]] = found[marked[pid]] " " pid; next }
        if (f[3] in of_grp) {
          n = split(substr(of_grp[f[3]], 2), members_of, SUBSEP)
          for (i = 1; i <= n; i++) {
            member_start[members_of[i], pid] = f[20]; grouped[members_of[i], pid] = 1
          }
        }
      }
      END {
        for (key in grouped) {
          split(key, part, SUBSEP); id = part[1]; pid = part[2]; s = start[id]; leader = leader_start[grp[id]]
          if (s == "" || leader == "" || leader == s)
            if (s == "" || member_start[id, pid] + 0 >= s + 0) found[id] = found[id] " " pid
        }
        for (id in ids) {
          shown = (start[id] == "" ? "-" : start[id])
          if (id in found) print "live", source[id], id, grp[id], shown found[id]
          else print "gone", source[id], id, grp[id]
        }
      }'
  )
  while read -r kind source run_key name grp rest; do
    case $kind$source in
      live*)
        echo "leftover: $run_key $name $grp $rest"
        [ "$source" = legacy ] && index_entry "$runs/$run_key" "$name"
        ;;
      goneindex)
        first=""
        [ -f "$runs/$run_key/$name.pid" ] && read -r first < "$runs/$run_key/$name.pid"
        [ "$first" = "$grp" ] && unindex "$runs/$run_key" "$name"
        ;;
    esac
  done <<EOF_SCAN
$scan
EOF_SCAN
fi
[ "$legacy" = no ] || : > "$runs/.indexed"
exit 0
"""
)
