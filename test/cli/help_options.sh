# shellcheck shell=bash
# Sourced by the tests of the manual page and the completion: what `redlock help COMMAND` lists,
# read from its text here rather than by the code that renders the page and the completion, so
# that a renderer that misses something is caught.

# The commands of `redlock --help`'s usage lines ("  redlock run ...", "  redlock help ...").
help_commands() {
  "$1" --help | sed -n 's/^  redlock \([a-z][a-z]*\) .*/\1/p' | sort -u
}

# The option names that `redlock help COMMAND` lists in a table: a row starts with its names (and
# a placeholder), then two or more spaces or the end of the line.
help_options() {
  "$1" help "$2" |
    grep -E '^ {2,4}(-[a-zA-Z], )?--[a-z][-a-z]*(, --[a-z][-a-z]*)?( [A-Z][A-Z,.]*)?( {2,}|$)' |
    sed -E 's/^ +//; s/ {2,}.*//' | grep -oE -- '(^| )-{1,2}[a-zA-Z][-a-z]*' | tr -d ' ' | sort -u
}

# The options of `redlock help COMMAND` that take a value, with their placeholders: "--ttl DURATION".
help_option_values() {
  "$1" help "$2" |
    grep -E '^ {2,4}(-[a-zA-Z], )?--[a-z][-a-z]* [A-Z][A-Z,.]*( {2,}|$)' |
    sed -E 's/^ +(-[a-zA-Z], )?//; s/ {2,}.*//' | sort -u
}
