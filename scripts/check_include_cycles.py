#!/usr/bin/env python3
"""Fails on any cycle of #includes inside src/, between files or between folders.

    scripts/check_include_cycles.py              from anywhere; exits 1 and prints each cycle
    scripts/check_include_cycles.py --self-test  checks the checker on trees made for it
    scripts/check_include_cycles.py --graph      prints the folder-level arrows it found

The rule, applied in every folder of src/ (src/ itself included): the folder's direct entries,
its files (a header and its source together) and its subfolders, each taken as one piece, must
include each other without a cycle.
An include from src/ops/extend.cpp of src/lock/lease.hpp is, in src/, an arrow from the piece
"ops/" to the piece "lock/"; in no deeper folder does it count. So a cycle of files in one folder
is found in that folder, and a cycle that runs through several folders is found where their paths
meet, as a cycle of folders (or of a folder and a file beside it), which is what a reader who
opens the folders one at a time would trip over.

Quoted includes are resolved as the compiler does for this project: beside the including file
first, then from src/, then from include/. Angle-bracket includes name other libraries and the
public headers; they are not edges inside src/.
"""
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = ('.hpp', '.cpp', '.h', '.ipp')


def source_files(src):
    """Paths relative to `src` of every C++ file under it, with '/' separators."""
    found = []
    for directory, _, names in os.walk(src):
        for name in names:
            if name.endswith(SOURCE_SUFFIXES):
                path = os.path.relpath(os.path.join(directory, name), src)
                found.append(path.replace(os.sep, '/'))
    return sorted(found)


def resolve(src, includer, target, known):
    """The src-relative path that `#include "target"` in `includer` names, or None if outside."""
    beside = os.path.normpath(os.path.join(os.path.dirname(includer), target)).replace(os.sep, '/')
    if beside in known:
        return beside
    rooted = os.path.normpath(target).replace(os.sep, '/')
    if rooted in known:
        return rooted
    return None


def file_edges(src):
    """(includer, included) pairs of src-relative paths, both inside src."""
    files = source_files(src)
    known = set(files)
    edges = set()
    for path in files:
        with open(os.path.join(src, path), encoding='utf-8', errors='replace') as source:
            text = source.read()
        for target in INCLUDE.findall(text):
            resolved = resolve(src, path, target, known)
            if resolved and resolved != path:
                edges.add((path, resolved))
    return edges


def piece_in(folder, path):
    """The direct entry of `folder` (a src-relative folder, '' for src/) that holds `path`; a
    header and its source file are one piece, named without their suffix."""
    rest = path[len(folder) + 1:] if folder else path
    head, _, tail = rest.partition('/')
    return head + '/' if tail else os.path.splitext(head)[0]


def folder_graphs(edges):
    """For every folder, the arrows between its direct entries that the file edges make."""
    graphs = {}
    for includer, included in edges:
        a_parts = includer.split('/')[:-1]
        b_parts = included.split('/')[:-1]
        common = []
        for a, b in zip(a_parts, b_parts):
            if a != b:
                break
            common.append(a)
        folder = '/'.join(common)
        a, b = piece_in(folder, includer), piece_in(folder, included)
        if a != b:
            graphs.setdefault(folder, {}).setdefault(a, {}).setdefault(b, []).append(
                (includer, included))
    return graphs


def cycles_of(graph):
    """Strongly connected components of more than one piece (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def problems(src):
    """One message per cycle, naming its folder, its pieces and the includes that close it."""
    messages = []
    graphs = folder_graphs(file_edges(src))
    for folder in sorted(graphs):
        graph = graphs[folder]
        for component in cycles_of(graph):
            members = set(component)
            lines = ['cycle in %s/: %s' % (('src/' + folder).rstrip('/'), ' <-> '.join(component))]
            for a in component:
                for b, includes in sorted(graph.get(a, {}).items()):
                    if b in members:
                        includer, included = sorted(includes)[0]
                        more = len(includes) - 1
                        lines.append('  %s -> %s: src/%s includes src/%s%s' % (
                            a, b, includer, included,
                            ' (and %d more)' % more if more else ''))
            messages.append('\n'.join(lines))
    return messages


def self_test():
    """The checker must find exactly the cycles of trees built to have them."""
    cases = [
        ('no cycle', {'a.hpp': '', 'b.hpp': '#include "a.hpp"\n', 'x/c.cpp': '#include "b.hpp"\n'},
         0),
        ('two files', {'a.hpp': '#include "b.hpp"\n', 'b.hpp': '#include "a.hpp"\n'}, 1),
        ('two folders', {'x/a.hpp': '#include "y/b.hpp"\n', 'y/b.hpp': '', 'y/c.cpp':
                         '#include "x/a.hpp"\n'}, 1),
        ('folder and a file beside it', {'top.hpp': '#include "x/a.hpp"\n', 'x/a.hpp': '',
                                         'x/b.cpp': '#include "../top.hpp"\n'}, 1),
        ('inside a subfolder only', {'x/a.hpp': '#include "b.hpp"\n', 'x/b.hpp':
                                     '#include "a.hpp"\n'}, 1),
        ('a header and its source', {'a.hpp': '', 'a.cpp': '#include "a.hpp"\n'}, 0),
        ('through a source file', {'a.hpp': '#include "b.hpp"\n', 'b.hpp': '', 'b.cpp':
                                   '#include "a.hpp"\n'}, 1),
        ('angle brackets are not edges', {'a.hpp': '#include <b.hpp>\n', 'b.hpp':
                                          '#include "a.hpp"\n'}, 0),
    ]
    failures = 0
    for name, tree, expected in cases:
        with tempfile.TemporaryDirectory() as src:
            for path, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(src, path)), exist_ok=True)
                with open(os.path.join(src, path), 'w', encoding='utf-8') as out:
                    out.write(text)
            found = problems(src)
            if len(found) != expected:
                failures += 1
                print('self-test "%s": expected %d cycles, found %d:\n%s' %
                      (name, expected, len(found), '\n'.join(found)))
    if failures:
        return 1
    print('check_include_cycles self-test: %d cases passed' % len(cases))
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    src = os.path.join(ROOT, 'src')
    if argv[1:] == ['--graph']:
        graphs = folder_graphs(file_edges(src))
        for folder in sorted(graphs):
            for a in sorted(graphs[folder]):
                for b in sorted(graphs[folder][a]):
                    print('src/%s: %s -> %s' % (folder, a, b) if folder else 'src: %s -> %s' %
                          (a, b))
        return 0
    if argv[1:]:
        print(__doc__)
        return 2
    found = problems(src)
    for message in found:
        print(message)
    if found:
        print('%d include cycles in src/' % len(found))
        return 1
    print('no include cycle in src/')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
