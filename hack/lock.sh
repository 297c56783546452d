# Sourced by the scripts that build or install tools into the cache
# (envtest.sh, peers.sh, chromium.sh): one build at a time, and a build
# that waits for another says who holds the lock and keeps saying it.
#
# take_lock NAME FILE: takes the lock FILE on fd 9, waiting for its holder.
# The holder's pid and command are written beside it (FILE.holder): the
# lock file itself is truncated by every run that opens it. While it
# waits, a line each minute (AUTHVAULT_LOCK_REPORT seconds, for tests)
# names the holder again, and says when it is stopped (Ctrl-Z: it holds
# the lock until resumed or killed) or gone.
take_lock() {
  local name=$1 file=$2 every=${AUTHVAULT_LOCK_REPORT:-60} start=$SECONDS
  exec 9>"$file"
  if ! flock -n 9; then
    echo "$name: waiting for another build of these binaries, $(lock_holder "$file")" >&2
    # flock's exit for a timeout is 75 (-E): any other failure (no locks
    # on this filesystem, a bad AUTHVAULT_LOCK_REPORT) ends the build, as
    # a plain flock's would, rather than loop.
    local rc
    until flock -E 75 -w "$every" 9; do
      rc=$?
      [ "$rc" = 75 ] || return "$rc"
      echo "$name: still waiting after $((SECONDS - start)) s, $(lock_holder "$file")" >&2
    done
  fi
  # Only information for a build that waits: a holder file that cannot be
  # written (another user's) does not stop this one. Not for others to
  # read: a command line may hold what its user typed.
  { (umask 077 && printf '%s\t%s\n' "$$" "$(lock_command $$) (started by: $(lock_command $PPID))" >"$file.holder"); } 2>/dev/null || true
}

# lock_command PID: the command line of PID, cut to 120 bytes, or
# "unknown".
lock_command() {
  local args
  args=$(ps -o args= -p "$1" 2>/dev/null) || args=
  args=${args:0:120}
  echo "${args:-unknown}"
}

# lock_holder FILE: who holds FILE, as its holder file says, and its state.
lock_holder() {
  local pid command state
  if ! IFS=$'\t' read -r pid command <"$1.holder" 2>/dev/null || [ -z "$pid" ]; then
    echo "held by a process that did not say who it is (an older script)"
    return
  fi
  state=$(ps -o stat= -p "$pid" 2>/dev/null) || state=
  # A ps without -p (BusyBox) says nothing: a live holder is not gone.
  [ -z "$state" ] && kill -0 "$pid" 2>/dev/null && state=alive
  case $state in
    "") echo "held by pid $pid, which is gone (the lock is free once its children end): $command" ;;
    T*) echo "held by pid $pid, STOPPED (resume it with fg, or kill it): $command" ;;
    *) echo "held by pid $pid: $command" ;;
  esac
}
