"""The README and the manual (docs/) stay whole without building them: the flag reference is
what its generator prints from the configs now, every page is in the navigation, every
relative link and anchor resolves, the slim compatibility page's modules and names exist at
slim's import paths, and the README stays a short front page whose first code block holds
the two set-up commands CI runs. (`sphinx-build -W -n`, in .ci/run, checks the rest.)"""
import importlib
import pathlib
import re

import pytest

from slim_deploy import aliases
from slim_deploy.image_classifier import flag_reference

from helpers import REPO

ROOT = pathlib.Path(REPO)
DOCS = ROOT / 'docs'
PAGES = sorted(DOCS.glob('*.md'))
README_MAX_LINES = 200
# Headings that get an anchor: docs/conf.py's myst_heading_anchors.
ANCHORED_LEVELS = int(re.search(r'^myst_heading_anchors = (\d+)$',
                                (DOCS / 'conf.py').read_text(), re.MULTILINE).group(1))

_FENCE = re.compile(r'^(`{3,}|~{3,}).*?^\1[ \t]*$', re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r'(`+).+?\1', re.DOTALL)
_COMMENT = re.compile(r'<!--.*?-->', re.DOTALL)
_LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
_HEADING = re.compile(r'^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$', re.MULTILINE)


def prose(text):
    """`text` (Markdown) without its code blocks, code spans and comments."""
    return _CODE_SPAN.sub('', _FENCE.sub('', _COMMENT.sub('', text)))


def anchors(path):
    """The anchors of the headings of Markdown file `path`, as GitHub and MyST name them:
    the title's text lowercased, spaces to hyphens, other punctuation dropped; a repeated
    anchor gets -1, -2, ...."""
    found = set()
    for hashes, title in _HEADING.findall(_FENCE.sub('', path.read_text())):
        if len(hashes) > ANCHORED_LEVELS:
            continue
        title = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', title).replace('`', '')
        slug = re.sub(r'[^\w\- ]', '', title.lower().replace(' ', '-'))
        unique, count = slug, 0
        while unique in found:
            count += 1
            unique = f'{slug}-{count}'
        found.add(unique)
    return found


def broken_links(path):
    """The relative links of Markdown file `path` whose file or anchor does not exist."""
    broken = []
    for target in _LINK.findall(prose(path.read_text())):
        if re.match(r'[a-z][a-z0-9+.-]*:', target):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition('#')
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f'{target}: no file {linked}')
        elif anchor and linked.suffix == '.md' and anchor not in anchors(linked):
            broken.append(f'{target}: no heading #{anchor} in {linked.name}')
    return broken


def toctree_entries(index):
    """The documents the {toctree} blocks of Markdown file `index` list."""
    entries = []
    for block in re.findall(r'^```\{toctree\}[^\n]*\n(.*?)^```', index.read_text(),
                            re.MULTILINE | re.DOTALL):
        entries += [line.strip() for line in block.splitlines()
                    if line.strip() and not line.strip().startswith(':')]
    return entries


def test_the_flag_reference_is_what_the_configs_say():
    assert (DOCS / 'flags.md').read_text() == flag_reference.reference(), (
        'docs/flags.md differs from the configs\' flags: regenerate it with '
        f'`.venv/bin/{flag_reference.COMMAND}`')


def test_every_page_is_in_the_navigation():
    listed = toctree_entries(DOCS / 'index.md')
    pages = [page.stem for page in PAGES if page.name != 'index.md']
    assert sorted(set(pages) - set(listed)) == [], 'add them to the toctree of docs/index.md'
    assert sorted(set(listed) - set(pages)) == [], 'the toctree lists pages that do not exist'


@pytest.mark.parametrize('path', [ROOT / 'README.md', *PAGES], ids=lambda path: path.name)
def test_relative_links_point_at_existing_files_and_headings(path):
    assert broken_links(path) == []


# A row of a table of docs/slim-compatibility.md: | `module` | `name`, `name`, ... | note |
_SLIM_MODULE_ROW = re.compile(r'^\| `([\w.]+)` \|(.*?)\|(.*?)\|$', re.MULTILINE)


def slim_modules():
    """{module: its public names} as docs/slim-compatibility.md lists them."""
    text = (DOCS / 'slim-compatibility.md').read_text()
    return {module: re.findall(r'`(\w+)`', names)
            for module, names, _ in _SLIM_MODULE_ROW.findall(text)}


def test_the_slim_compatibility_page_lists_slims_library():
    assert len(slim_modules()) == 54  # research/slim's library modules, model_deploy included.


@pytest.mark.parametrize('module, names', slim_modules().items())
def test_every_module_and_name_on_the_slim_compatibility_page_exists_at_slims_path(module,
                                                                                     names):
    imported = importlib.import_module(module)
    assert imported.__name__ == aliases.ELSEWHERE.get(module, f'slim_deploy.{module}')
    assert [name for name in names if not hasattr(imported, name)] == []


def test_the_readme_is_a_short_front_page():
    lines = (ROOT / 'README.md').read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f'README.md has {len(lines)} lines: keep it to {README_MAX_LINES} and move the '
        'details to a page of docs/')


def test_the_readmes_first_code_block_holds_the_two_setup_commands():
    """.ci/run runs the lines of the README's first fenced block, and wants two."""
    text = (ROOT / 'README.md').read_text()
    block = re.search(r'^```[^\n]*\n(.*?)^```', text, re.MULTILINE | re.DOTALL).group(1)
    commands = block.splitlines()
    assert len(commands) == 2 and all(command.strip() for command in commands), commands


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / 'page.md').write_text('# A page\n\n## Its part\n')
    (tmp_path / 'links.md').write_text(
        '[ok](page.md#its-part) [ok](page.md) `[code](nowhere.md)`\n'
        '[file](gone.md) [heading](page.md#no-such-part) [here](#nothing-here)\n')
    assert broken_links(tmp_path / 'links.md') == [
        f'gone.md: no file {tmp_path / "gone.md"}',
        'page.md#no-such-part: no heading #no-such-part in page.md',
        '#nothing-here: no heading #nothing-here in links.md']
