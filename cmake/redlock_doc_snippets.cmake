# The C++ code blocks of the Markdown pages (README.md, docs/*.md), taken out as sources so that
# the build compiles and links every one of them (examples/doc_snippets/CMakeLists.txt): a snippet
# that no longer compiles, or that names a library its text does not link, fails the build.
#
# The convention, checked here so that no block is skipped by accident:
#  - Every code block says its language (```cpp, ```sh, ```cmake, ```text, ...); an unlabelled
#    fence stops the configure. Blocks in cpp, c++, cxx or cc are C++ and are all compiled.
#  - A C++ block is a whole program (a translation unit with main()), unless the line right before
#    its fence is a marker, an HTML comment that Markdown does not show:
#      <!-- snippet: coroutine(locks, lease) -->
#      <!-- snippet: function(io, nodes) link redlock::prometheus prometheus-cpp::pull -->
#    "coroutine" makes the block the body of a function returning boost::asio::awaitable<void>,
#    "function" of a plain void function; the names in parentheses are its parameters, of the
#    types the fragments mean by them (the table below), and the helpers that the fragments call
#    as the reader's own work are declared in examples/doc_snippets/context.hpp. The block's
#    #include lines move to the top of the file. "link" names the targets to link besides
#    redlock::redlock: the ones the page tells its reader to link. A snippet whose targets do not
#    exist in this build (an optional dependency missing) is not built, and the configure says so.
#  - Errors point into the Markdown page (#line).

# The parameters a fragment may take, by name.
set(redlock_snippet_parameter_io "boost::asio::io_context& io")
set(redlock_snippet_parameter_locks "redlock::client& locks")
set(redlock_snippet_parameter_lease "redlock::lease& lease")
set(redlock_snippet_parameter_nodes "std::vector<redlock::node_config> nodes")
set(redlock_snippet_parameter_amount "long amount")

# Text from the page to the file: the escapes redlock_doc_snippets puts in, taken out.
function(redlock_snippet_unescape variable text)
  string(REPLACE "@b" "\\" text "${text}")
  string(REPLACE "@s" ";" text "${text}")
  string(REPLACE "@l" "[" text "${text}")
  string(REPLACE "@r" "]" text "${text}")
  string(REPLACE "@a" "@" text "${text}")
  set(${variable} "${text}" PARENT_SCOPE)
endfunction()

# Writes one snippet's source under `out_dir` and appends its record to the list `records`:
# "SOURCE|KIND|LINKS|ORIGIN", KIND program or fragment, LINKS the extra targets separated by ','.
# `marker` and `body` are still escaped (redlock_doc_snippets), so that the body's lines can be a
# list here.
function(redlock_snippet_write records out_dir page_name number first_line marker body)
  string(REGEX REPLACE "[^A-Za-z0-9]+" "_" stem "${page_name}")
  string(REGEX REPLACE "^docs_|_md$" "" stem "${stem}")
  set(name "${stem}_${number}")
  set(origin "${page_name}:${first_line}")
  set(source "${out_dir}/${name}.cpp")
  set(links "")
  if(marker STREQUAL "")
    set(kind program)
    set(content "#line ${first_line} \"${page_name}\"\n${body}")
  else()
    redlock_snippet_unescape(marker "${marker}")
    if(NOT marker MATCHES "^<!-- snippet: (coroutine|function)\\(([a-z_, ]*)\\)( link ([^>]*))? -->$")
      message(FATAL_ERROR "${origin}: the marker before this block is not \"<!-- snippet: "
                          "coroutine(NAMES) -->\" or \"<!-- snippet: function(NAMES) [link "
                          "TARGET...] -->\" (cmake/redlock_doc_snippets.cmake): ${marker}")
    endif()
    set(kind fragment)
    set(shape "${CMAKE_MATCH_1}")
    string(REPLACE "," ";" names "${CMAKE_MATCH_2}")
    string(STRIP "${CMAKE_MATCH_4}" link_text)
    if(NOT link_text STREQUAL "")
      string(REGEX REPLACE " +" "," links "${link_text}")
    endif()
    set(parameters "")
    foreach(parameter IN LISTS names)
      string(STRIP "${parameter}" parameter)
      if(parameter STREQUAL "")
        continue()
      endif()
      if(NOT DEFINED redlock_snippet_parameter_${parameter})
        message(FATAL_ERROR "${origin}: the marker names \"${parameter}\", which is none of io, "
                            "locks, lease, nodes, amount (cmake/redlock_doc_snippets.cmake)")
      endif()
      if(NOT parameters STREQUAL "")
        string(APPEND parameters ", ")
      endif()
      string(APPEND parameters "[[maybe_unused]] ${redlock_snippet_parameter_${parameter}}")
    endforeach()
    # The #include lines go before the function, each with its line number; in the body an empty
    # line keeps their place, so that one #line numbers all of it.
    set(includes "")
    set(statements "")
    string(REPLACE "\n" ";" body_lines "${body}")
    list(POP_BACK body_lines)  # the empty text after the last line break
    set(line_number ${first_line})
    foreach(line IN LISTS body_lines)
      if(line MATCHES "^[ \t]*#[ \t]*include")
        string(APPEND includes "#line ${line_number} \"${page_name}\"\n${line}\n")
        string(APPEND statements "\n")
      else()
        string(APPEND statements "${line}\n")
      endif()
      math(EXPR line_number "${line_number} + 1")
    endforeach()
    if(shape STREQUAL "coroutine")
      set(head "boost::asio::awaitable<void> doc_snippet_${name}(${parameters}) {")
      set(tail "  co_return;\n}")
    else()
      set(head "void doc_snippet_${name}(${parameters}) {")
      set(tail "}")
    endif()
    # The body sits in a block of its own, so that it may declare a name a parameter has.
    string(CONCAT content "// ${origin}\n#include \"context.hpp\"\n${includes}\n"
                  "${head}\n{\n#line ${first_line} \"${page_name}\"\n${statements}}\n${tail}\n")
  endif()
  redlock_snippet_unescape(content "${content}")
  file(WRITE "${source}.in" "${content}")
  configure_file("${source}.in" "${source}" COPYONLY)
  set(${records} ${${records}} "${source}|${kind}|${links}|${origin}" PARENT_SCOPE)
endfunction()

# redlock_doc_snippets(<records variable> <out dir> <page>...): writes every C++ block of the
# pages as a source under <out dir>, one record each (redlock_snippet_write) in the variable.
function(redlock_doc_snippets records out_dir)
  set(found "")
  foreach(page IN LISTS ARGN)
    file(RELATIVE_PATH page_name "${PROJECT_SOURCE_DIR}" "${page}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${page}")
    file(READ "${page}" text)
    # A list of lines: what CMake lists give a meaning to (';', '[', ']', '\') is escaped first,
    # and '@', the escape character, before them.
    string(REPLACE "@" "@a" text "${text}")
    string(REPLACE "\\" "@b" text "${text}")
    string(REPLACE ";" "@s" text "${text}")
    string(REPLACE "[" "@l" text "${text}")
    string(REPLACE "]" "@r" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(line_number 0)
    set(in_block FALSE)
    set(cpp FALSE)
    set(previous "")
    set(count 0)
    foreach(line IN LISTS lines)
      math(EXPR line_number "${line_number} + 1")
      if(NOT in_block)
        if(line MATCHES "^ *```(.*)$")
          string(STRIP "${CMAKE_MATCH_1}" language)
          if(language STREQUAL "")
            message(FATAL_ERROR
                    "${page_name}:${line_number}: a code block without a language; write ```cpp, "
                    "```sh, ```cmake or ```text (cmake/redlock_doc_snippets.cmake)")
          endif()
          set(in_block TRUE)
          set(cpp FALSE)
          if(language MATCHES "^(cpp|c\\+\\+|C\\+\\+|cxx|cc)$")
            set(cpp TRUE)
            math(EXPR count "${count} + 1")
            math(EXPR first_line "${line_number} + 1")
            set(marker "")
            if(previous MATCHES "^<!-- snippet")
              set(marker "${previous}")
            endif()
            set(body "")
          endif()
        endif()
      elseif(line MATCHES "^ *``` *$")
        set(in_block FALSE)
        if(cpp)
          redlock_snippet_write(found "${out_dir}" "${page_name}" ${count} ${first_line}
                                "${marker}" "${body}")
        endif()
      elseif(cpp)
        string(APPEND body "${line}\n")
      endif()
      set(previous "${line}")
    endforeach()
    if(in_block)
      message(FATAL_ERROR "${page_name}: a code block is not closed")
    endif()
  endforeach()
  set(${records} ${found} PARENT_SCOPE)
endfunction()
