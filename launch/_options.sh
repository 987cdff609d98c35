# The launchers' shared command-line parsing (sourced by launch/*.sh and launch/slurm/grpo.sbatch, not run).
# A launcher defines usage(), sets its defaults and OPTIONS, pairs of flag and target: `--out OUT` takes a
# value into $OUT, `--dry-run DRY=1` is a switch that sets DRY to 1. `parse_options "$@"` then reads the
# command line: -h/--help prints usage and exits 0, `--` puts the rest into EXTRA (the recipe's own
# options), anything else is one line on stderr and exit 2.
parse_options() {
  EXTRA=()
  local i target
  while [[ $# -gt 0 ]]; do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --) shift; EXTRA=("$@"); return 0 ;;
    esac
    target=""
    for ((i = 0; i < ${#OPTIONS[@]}; i += 2)); do
      if [[ "$1" == "${OPTIONS[i]}" ]]; then target=${OPTIONS[i + 1]}; break; fi
    done
    [[ -n "$target" ]] || { echo "error: unknown option $1 (see --help)" >&2; exit 2; }
    if [[ "$target" == *=* ]]; then
      printf -v "${target%%=*}" '%s' "${target#*=}"; shift
    else
      [[ $# -ge 2 ]] || { echo "error: $1 needs a value (see --help)" >&2; exit 2; }
      printf -v "$target" '%s' "$2"; shift 2
    fi
  done
}
