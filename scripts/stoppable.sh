# Sourced by the GPU scripts: a Ctrl-C or SIGTERM stops the phase that runs and every later one. `stoppable CMD...`
# runs CMD in the background and waits for it; a signal to the script (a terminal's Ctrl-C, a session's SIGTERM)
# passes SIGTERM on to it (timeout(1) moves its command into a process group of its own, which a Ctrl-C at the
# terminal misses, and bash runs a trap only once the command it waits for has ended), and `stopping` is 1 from then
# on. `stoppable` returns CMD's exit code; a phase that sees `stopping` set starts nothing.
stopping=0
_stoppable_child=""
_stoppable_told=0
_stop_child() {
  stopping=1
  # Once per command: a Ctrl-C reaches a script started by another (same process group) and that one's trap too.
  if [[ -n $_stoppable_child ]] && ((!_stoppable_told)); then
    _stoppable_told=1
    kill -TERM "$_stoppable_child" 2>/dev/null || true
  fi
}
trap _stop_child INT TERM

stoppable() {
  local code
  "$@" &
  _stoppable_child=$! _stoppable_told=0
  wait "$_stoppable_child"
  code=$?
  # A trap ends `wait` early (128 + the signal): wait again until the command itself has ended, for its own code.
  while kill -0 "$_stoppable_child" 2>/dev/null; do
    wait "$_stoppable_child"
    code=$?
  done
  _stoppable_child=""
  return "$code"
}
