#!/usr/bin/env bash
# The manual page redlock(1) as the build rendered it from the help: groff formats it without a
# warning, it has the sections a manual page is read by, and it names every command and option
# that `redlock --help` and `redlock help COMMAND` name.
#
#   test_manual_page.sh REDLOCK PAGE
set -euo pipefail

tool="$1"
page="$2"
# shellcheck source-path=SCRIPTDIR source=help_options.sh
source "$(dirname "${BASH_SOURCE[0]}")/help_options.sh"

failures=0
fail() {
  echo "test_manual_page: $*" >&2
  failures=$((failures + 1))
}

# -ww: every warning troff has (a line it cannot break or adjust, an unknown macro, ...).
warnings="$(groff -man -Tutf8 -ww -z "$page" 2>&1)"
[ -z "$warnings" ] || fail "groff warns:"$'\n'"$warnings"

# The page as a terminal shows it, as plain text (no overstriking, no escape sequences).
text="$(groff -man -Tutf8 -P-cbou "$page")"

for section in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS ENVIRONMENT "EXIT STATUS" EXAMPLES \
  "SEE ALSO"; do
  grep -qx "$section" <<<"$text" || fail "no section $section"
done
if command -v lexgrog >/dev/null; then
  # What apropos and whatis will show: the NAME line, parsed as man-db parses it.
  whatis="$(lexgrog "$page")" || fail "lexgrog cannot read the NAME section: $whatis"
fi

commands="$(help_commands "$tool")"
[ -n "$commands" ] || fail "redlock --help names no command"
for command in $commands; do
  grep -qF "redlock $command" <<<"$text" || fail "the page does not name \"redlock $command\""
  [ "$command" = help ] && continue
  options="$(help_options "$tool" "$command")"
  [ -n "$options" ] || fail "redlock help $command lists no option"
  for option in $options; do
    grep -qE -- "(^|[^-a-z])$option([^-a-z]|$)" <<<"$text" ||
      fail "the page does not name $option (of redlock $command)"
  done
done

if [ "$failures" -ne 0 ]; then
  echo "test_manual_page: $failures failure(s) in $page" >&2
  exit 1
fi
echo "test_manual_page: $page names every command and option of the help: ${commands//$'\n'/ }"
