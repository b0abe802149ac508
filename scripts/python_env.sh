# Sourced by the GPU scripts from the project root (with $repo set): the Python that runs mjfleet, as the array
# `py`, and `runner`, a description for the log. MJFLEET_PYTHON forces an interpreter; otherwise `uv run --locked`
# where uv's environment is ready without a package index; otherwise python3 with this checkout's src/ on
# PYTHONPATH (an offline install).
if [[ -n ${MJFLEET_PYTHON:-} ]]; then
  py=("$MJFLEET_PYTHON"); runner="$MJFLEET_PYTHON (MJFLEET_PYTHON)"
elif command -v uv >/dev/null 2>&1 && [[ -f uv.lock ]] &&
  { [[ -z ${PYTHONPATH:-} ]] || uv sync --locked --offline --check >/dev/null 2>&1; }; then
  # PYTHONPATH (an offline site) would shadow the locked packages.
  py=(env -u PYTHONPATH uv run --locked python); runner="uv run --locked python"
else
  interpreter=$(command -v python3 || command -v python) || { echo "error: neither uv nor python3 found" >&2; exit 2; }
  py=("$interpreter"); runner="$interpreter (no uv: dependencies from PYTHONPATH)"
fi
if [[ $runner != uv* ]]; then
  export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
fi
export MUJOCO_GL=${MUJOCO_GL:-egl}
