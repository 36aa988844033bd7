# shellcheck shell=bash
# Conda stand-in (architecture §9): sourced like $CONDA_ROOT/etc/profile.d/conda.sh, it defines a
# `conda` function whose `activate NAME|PREFIX` does what real activation does for our purposes:
# sets CONDA_PREFIX / CONDA_DEFAULT_ENV, puts the env's bin/ first on PATH and sources the env's
# etc/conda/activate.d/*.sh in order; `deactivate` sources deactivate.d/*.sh and undoes it.
_FAKE_CONDA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

conda() {
  local cmd="${1:-}" prefix f
  case "$cmd" in
    activate)
      if [[ "${2:-}" == */* ]]; then prefix="$2"; else prefix="$_FAKE_CONDA_ROOT/envs/${2:-base}"; fi
      if [[ ! -d "$prefix/conda-meta" ]]; then
        echo "EnvironmentNameNotFound: Could not find conda environment: ${2:-}" >&2
        return 1
      fi
      if [[ -n "${CONDA_PREFIX:-}" ]]; then conda deactivate; fi
      export CONDA_PREFIX="$prefix" CONDA_DEFAULT_ENV="${2:-}" CONDA_SHLVL=1
      export PATH="$prefix/bin:$PATH"
      for f in "$prefix"/etc/conda/activate.d/*.sh; do
        if [[ -f "$f" ]]; then
          # shellcheck source=/dev/null
          . "$f"
        fi
      done
      ;;
    deactivate)
      [[ -n "${CONDA_PREFIX:-}" ]] || return 0
      for f in "$CONDA_PREFIX"/etc/conda/deactivate.d/*.sh; do
        if [[ -f "$f" ]]; then
          # shellcheck source=/dev/null
          . "$f"
        fi
      done
      PATH="${PATH/#"$CONDA_PREFIX/bin:"/}"
      export PATH
      unset CONDA_PREFIX CONDA_DEFAULT_ENV
      export CONDA_SHLVL=0
      ;;
    *)
      echo "conda stand-in: only 'activate' and 'deactivate' are imitated (got: $*)" >&2
      return 1
      ;;
  esac
}
