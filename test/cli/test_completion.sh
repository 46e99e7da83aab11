#!/usr/bin/env bash
# The bash completion of redlock as the build rendered it from the help, checked against what
# `redlock --help` and `redlock help COMMAND` list: the commands at the first word, each
# command's options after it (so that an option the completion lacks fails here), file names
# after an option that takes a FILE, nothing after one that takes another value, and after "--"
# the COMMAND to run, never redlock's own options. Also that the tool accepts every option its
# help lists.
#
#   test_completion.sh REDLOCK COMPLETION
set -euo pipefail

tool="$1"
completion="$2"
# shellcheck source-path=SCRIPTDIR source=help_options.sh
source "$(dirname "${BASH_SOURCE[0]}")/help_options.sh"
# shellcheck source=/dev/null
source "$completion"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
touch "$scratch/cert.pem" "$scratch/key.pem"

failures=0
fail() {
  echo "test_completion: $*" >&2
  failures=$((failures + 1))
}

# complete WORD... : COMPREPLY for the command line "WORD..." completed at its last word, one
# candidate a line, sorted.
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="${COMP_WORDS[*]}"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _redlock redlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}"
  if [ ${#COMPREPLY[@]} -gt 0 ]; then
    printf '%s\n' "${COMPREPLY[@]}" | sort -u
  fi
}

# expect_set WHAT EXPECTED ACTUAL: both as sorted lines.
expect_set() {
  if [ "$2" != "$3" ]; then
    fail "$1: expected"$'\n'"$2"$'\n'"got"$'\n'"$3"
  fi
}

commands="$(help_commands "$tool")"
[ -n "$commands" ] || fail "redlock --help names no command"

# The first word: every command, and the tool's own options.
first="$(complete_line redlock "")"
for word in $commands --help --version; do
  grep -qx -- "$word" <<<"$first" || fail "the first word does not offer $word: $first"
done
expect_set "redlock st<TAB>" "status" "$(complete_line redlock st)"
expect_set "redlock help <TAB>" "$(grep -vx help <<<"$commands")" "$(complete_line redlock help "")"

for command in $commands; do
  [ "$command" = help ] && continue
  options="$(help_options "$tool" "$command")"
  if [ -z "$options" ]; then
    fail "redlock help $command lists no option"
    continue
  fi
  expected="$options"
  # run's options end with "--", before COMMAND. The help is read whole before grep looks at it:
  # `tool | grep -q` under pipefail fails whenever grep stops reading first and the tool is then
  # killed by SIGPIPE, which a busy machine makes likely.
  help_text="$("$tool" help "$command")"
  if grep -q "^redlock $command .* -- COMMAND" <<<"$help_text"; then
    expected="$(printf '%s\n%s\n' "$options" -- | sort -u)"
  fi
  expect_set "redlock $command -<TAB>" "$expected" "$(complete_line redlock "$command" -)"
  expect_set "redlock $command job <TAB>" "$expected" \
    "$(complete_line redlock "$command" job "")"

  # What each option takes: a file name after a FILE, nothing after any other value.
  while read -r option value; do
    [ -n "$option" ] || continue
    if [ "$value" = FILE ]; then
      expect_set "redlock $command $option $scratch/ce<TAB>" "$scratch/cert.pem" \
        "$(complete_line redlock "$command" "$option" "$scratch/ce")"
      expect_set "redlock $command $option=$scratch/ke<TAB>" "$scratch/key.pem" \
        "$(complete_line redlock "$command" "$option" = "$scratch/ke")"
    else
      expect_set "redlock $command $option <TAB> ($value)" "" \
        "$(complete_line redlock "$command" "$option" "")"
    fi
  done <<<"$(help_option_values "$tool" "$command")"

  # The tool knows every option its help lists (a value is given where one is taken; no
  # RESOURCE is, so nothing runs).
  for option in $options; do
    args=("$command" "$option")
    grep -qE -- "^$option [A-Z]" <<<"$(help_option_values "$tool" "$command")" && args+=(1)
    said="$("$tool" "${args[@]}" 2>&1 || true)"
    if grep -q "unknown option" <<<"$said"; then
      fail "redlock help $command lists $option, which redlock $command does not take"
    fi
  done
done

# After "--": the COMMAND to run and its arguments, never redlock's options.
after="$(complete_line redlock run job -- ech)"
grep -qx echo <<<"$after" || fail "redlock run job -- ech<TAB> does not offer echo: $after"
for words in "run job -- -" "run job -- ls -" "run job -- ls --" "run --ttl 5s job -- sh -c --"; do
  # shellcheck disable=SC2086
  offered="$(complete_line redlock $words)"
  if grep -qxE -- '--(ttl|nodes|wait|json|quiet|help)|-q|-h' <<<"$offered"; then
    fail "redlock $words<TAB> offers redlock's options: $offered"
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "test_completion: $failures failure(s) in $completion" >&2
  exit 1
fi
echo "test_completion: $completion completes every command and option of the help:" \
  "${commands//$'\n'/ }"
