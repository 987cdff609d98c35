# shellcheck shell=bash
# The launchers' shared command-line parsing (sourced by launch/*.sh and launch/slurm/grpo.sbatch, not run).
# A launcher defines usage(), sets its defaults and OPTIONS, pairs of flag and target: `--out OUT` takes a
# value into $OUT, `--dry-run DRY=1` is a switch that sets DRY to 1. `parse_options "$@"` then reads the
# command line: -h/--help prints usage and exits 0, `--` puts the rest into EXTRA (the recipe's own
# options), anything else (an empty value too) is one line on stderr and exit 2. A launcher may also set RENAMED, pairs of a former
# flag and its new name (`--granularity --reward_granularity`): the old one still works, with one deprecation
# line on stderr (the text recipes/shared/parser.py deprecation_note prints); a former flag beside its new one is one error
# line and exit 2 (recipes/shared/parser.py both_names).
# Commands are bash arrays run as "${CMD[@]}", never strings through `eval`: a value with spaces, quotes or `;`
# reaches the program as one unchanged argument, and `show` prints a command so that pasting it runs the same.
# shellcheck disable=SC2034  # EXTRA is read by the launcher that sources this file
parse_options() {
  EXTRA=()
  local i target noted=" " direct=" "
  [[ -v RENAMED ]] || RENAMED=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --) shift; EXTRA=("$@"); return 0 ;;
    esac
    for ((i = 0; i < ${#RENAMED[@]}; i += 2)); do
      # a former flag beside its new one: either could be the one meant (recipes/shared/parser.py both_names)
      if [[ ( "$1" == "${RENAMED[i]}" && "$direct" == *" ${RENAMED[i + 1]} "* ) ||
            ( "$1" == "${RENAMED[i + 1]}" && "$noted" == *" ${RENAMED[i]} "* ) ]]; then
        echo "error: ${RENAMED[i]} and ${RENAMED[i + 1]}: ${RENAMED[i]#--} is the former name of ${RENAMED[i + 1]#--}; give one" >&2
        exit 2
      fi
      [[ "$1" == "${RENAMED[i + 1]}" ]] && direct+="$1 "
      if [[ "$1" == "${RENAMED[i]}" ]]; then
        [[ "$noted" == *" $1 "* ]] || echo "${1#--} is deprecated: use ${RENAMED[i + 1]#--} (the old name is accepted for one more release)" >&2
        noted+="$1 "
        set -- "${RENAMED[i + 1]}" "${@:2}"; break
      fi
    done
    target=""
    for ((i = 0; i < ${#OPTIONS[@]}; i += 2)); do
      if [[ "$1" == "${OPTIONS[i]}" ]]; then target=${OPTIONS[i + 1]}; break; fi
    done
    [[ -n "$target" ]] || { echo "error: unknown option $1 (see --help)" >&2; exit 2; }
    if [[ "$target" == *=* ]]; then
      printf -v "${target%%=*}" '%s' "${target#*=}"; shift
    else
      [[ $# -ge 2 ]] || { echo "error: $1 needs a value (see --help)" >&2; exit 2; }
      # an empty value names nothing: `--out ''` planned /sft, /grpo and an export into /export
      [[ -n "$2" ]] || { echo "error: $1 needs a value, got an empty one (see --help)" >&2; exit 2; }
      printf -v "$target" '%s' "$2"; shift 2
    fi
  done
}

# need_int FLAG VAR MIN [MAX]: $VAR a whole number from MIN to MAX (no MAX: at most 9 digits), else one line and
# exit 2; $VAR is then rewritten in plain decimal. Why: bash arithmetic on "abc" or a count of 0 would otherwise fail
# later, inside accelerate or srun, with a traceback or a cryptic message; "08" is octal to bash ("value too great
# for base", then a plan built from the wrong number), and a port of 99999 reached the server.
need_int() {
  local v=${!2} max=${4:-999999999}
  if [[ "$v" =~ ^0*([0-9]{1,9})$ ]] && (( 10#${BASH_REMATCH[1]} >= $3 && 10#${BASH_REMATCH[1]} <= max )); then
    printf -v "$2" '%d' "$((10#${BASH_REMATCH[1]}))"
    return 0
  fi
  local range=">= $3 (at most 9 digits)"
  [[ -z "${4:-}" ]] || range="from $3 to $4"
  echo "error: $1 must be a whole number $range, got '$v' (see --help)" >&2; exit 2
}

# show WORD...: the command on one line, shell-quoted (a word of plain characters as it is, one without a
# single quote inside '...', any other as printf %q writes it), so a printed plan is exactly what runs.
show() {
  local w q line=""
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then q=$w
    elif [[ "$w" != *"'"* && "$w" =~ ^[[:print:]]+$ ]]; then q="'$w'"
    else printf -v q '%q' "$w"; fi
    line+="${line:+ }$q"
  done
  printf '%s\n' "$line"
}

# config_key FILE KEY: one top-level value of a recipe YAML, read by the recipes' own reader
# (recipes/shared/parser.py config_value, the reader recipes/grpo.py parses the same file with); empty when the key is
# absent or null, or when the file does not read (the recipe's own run then says why in one line). Needs $PY.
config_key() {
  "$PY" -c 'import sys; from recipes.shared.parser import config_value; print(config_value(sys.argv[1], sys.argv[2]))' "$1" "$2"
}
