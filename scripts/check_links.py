#!/usr/bin/env python3
"""Follows every relative link in README.md, CHANGELOG.md and docs/*.md, and fails on a broken
one: a file or directory that does not exist, or an anchor that names no heading of its page.

    scripts/check_links.py              from anywhere; exits 1 and lists what is broken
    scripts/check_links.py --self-test  checks the checker on pages made for it: it must find
                                        exactly their broken links, and pass their good ones

Anchors are made from headings as GitHub makes them: lower case, punctuation other than '-' and
'_' dropped, spaces turned into '-', and a repeated heading numbered -1, -2, ... Links to other
sites (http, https, mailto) are not followed: the check must not depend on the network.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)')


def prose_lines(text):
    """The lines outside fenced code, with inline code spans blanked."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r'`[^`]*`', '``', line)


def anchors_of(path):
    """The anchors the headings of the Markdown file at `path` make (not those in fenced code)."""
    seen = {}
    found = set()
    fenced = False
    with open(path, encoding='utf-8') as page:
        for line in page.read().splitlines():
            if line.lstrip().startswith('```'):
                fenced = not fenced
                continue
            heading = None if fenced else re.match(r'#{1,6} (.*)$', line)
            if not heading:
                continue
            anchor = re.sub(r'[^\w\- ]', '', heading.group(1).strip().lower()).replace(' ', '-')
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f'{anchor}-{count}')
    return found


def pages(root):
    yield os.path.join(root, 'README.md')
    yield os.path.join(root, 'CHANGELOG.md')
    docs = os.path.join(root, 'docs')
    for name in sorted(os.listdir(docs)):
        if name.endswith('.md'):
            yield os.path.join(docs, name)


def check(root):
    """The broken links of the pages under `root`, and how many relative links were followed."""
    broken = []
    checked = 0
    for page in pages(root):
        with open(page, encoding='utf-8') as source:
            text = source.read()
        for number, line in prose_lines(text):
            for target in LINK.findall(line):
                if re.match(r'[a-z][a-z0-9+.-]*:', target):
                    continue  # another site
                checked += 1
                path, _, anchor = target.partition('#')
                resolved = page
                if path:
                    resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
                where = f'{os.path.relpath(page, root)}:{number}: {target}'
                if not os.path.exists(resolved):
                    broken.append(f'{where}: no such file')
                elif anchor:
                    if not resolved.endswith('.md'):
                        broken.append(f'{where}: an anchor into a file that is not Markdown')
                    elif anchor not in anchors_of(resolved):
                        broken.append(f'{where}: no heading makes the anchor "{anchor}"')
    return broken, checked


SELF_TEST_PAGES = {
    'README.md': (
        '# Front\n\n'
        '[guide](docs/guide.md) [section](docs/guide.md#a-section-with-code) '
        '[second](docs/guide.md#twice-1) [here](#front)\n'
        '[missing](docs/missing.md) [bad anchor](docs/guide.md#no-such-heading)\n'
        '`[not a link](nowhere.md)` and [a site](https://example.com/x.md)\n'
        '```\n[in a fence](nowhere-either.md)\n```\n'),
    'CHANGELOG.md': '# Changes\n\n[back](README.md#front) [wrong](README.md#back)\n',
    'docs/guide.md': (
        '# Guide\n\n## A section with `code`\n\n## Twice\n\n## Twice\n\n'
        '[up](../README.md) [lost](../nothing.md) [third](#twice-2)\n'),
}
SELF_TEST_BROKEN = {
    'README.md:4: docs/missing.md',
    'README.md:4: docs/guide.md#no-such-heading',
    'CHANGELOG.md:3: README.md#back',
    'docs/guide.md:9: ../nothing.md',
    'docs/guide.md:9: #twice-2',
}


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for name, text in SELF_TEST_PAGES.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), 'w', encoding='utf-8') as page:
                page.write(text)
        broken, checked = check(root)
    found = {problem.rsplit(': ', 1)[0] for problem in broken}
    if found != SELF_TEST_BROKEN or checked != 11:
        print(f'check_links --self-test: found {sorted(found)} in {checked} links, expected '
              f'{sorted(SELF_TEST_BROKEN)} in 11', file=sys.stderr)
        return 1
    print(f'check_links --self-test: the {len(found)} broken links of 11 found, no other')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if sys.argv[1:]:
        print('usage: scripts/check_links.py [--self-test]', file=sys.stderr)
        return 2
    broken, checked = check(ROOT)
    for problem in broken:
        print(problem, file=sys.stderr)
    print(f'check_links: {checked} relative links, {len(broken)} broken')
    return 1 if broken else 0


if __name__ == '__main__':
    sys.exit(main())
