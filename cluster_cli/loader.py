"""Load an inventory file into the typed model and resolve it, with errors that name file, line and field.

PyYAML's composed node tree keeps the line of every key and value; it is kept beside the data
so that a validation error at ``node_groups[1].gpus.count`` points at the line it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from cluster_cli.cluster import Cluster, resolve
from cluster_cli.errors import InventoryError, Location, Problem, format_location
from cluster_cli.model import CLUSTER_NAME_PATTERN, NAME_PATTERN, Inventory, models_in
from cluster_cli.source_map import SourceMap

MAX_INVENTORY_BYTES = 10 * 1024 * 1024
PATTERN_MESSAGES = {
    NAME_PATTERN: "must be a name of letters, digits, '.', '_' or '-', starting and ending with a letter or digit",
    CLUSTER_NAME_PATTERN: "must be 1-40 lowercase letters, digits, '-' or '_', starting with a letter",
}


def _duplicate_keys(
    node: yaml.Node | None, path: Location = (), visited: set[int] | None = None
) -> list[tuple[Location, int, str]]:
    # An alias (*name) is the very node its anchor names: each node is checked once, or a
    # ten-line "billion laughs" document of nested aliases takes hours.
    visited = set() if visited is None else visited
    if node is None or id(node) in visited:
        return []
    visited.add(id(node))
    found: list[tuple[Location, int, str]] = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                found.append((path + (key,), key_node.start_mark.line + 1, key))
            seen.add(key)
            found.extend(_duplicate_keys(value_node, path + (key,), visited))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found.extend(_duplicate_keys(item, path + (index,), visited))
    return found


MAX_NESTING = 64
_OPENING = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSING = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _nesting_refused(file: str, line: int) -> InventoryError:
    return InventoryError([Problem(file, line, "(yaml)", f"nested more than {MAX_NESTING} levels deep")])


def _check_nesting(text: str, file: str, loader: type = yaml.SafeLoader) -> None:
    """Refuse collections nested more than MAX_NESTING deep before PyYAML's recursive pure-Python
    composer meets them (RecursionError): the parser's events, one per collection, as written (an
    alias is not walked again)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, _OPENING):
                depth += 1
                if depth > MAX_NESTING:
                    assert event.start_mark is not None  # the parser marks every event it makes
                    raise _nesting_refused(file, event.start_mark.line + 1)
            elif isinstance(event, _CLOSING):
                depth -= 1
    except yaml.YAMLError:
        return  # the composer reports it, at the same place


def _check_composed_nesting(root: yaml.Node, file: str) -> None:
    """_check_nesting's limit on the nodes libyaml composed (it refuses more than 1,000 levels
    itself, before any recursion here): the same depths, without a second parse of the text."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen: set[int] = set()
    while stack:
        node, depth = stack.pop()
        if id(node) in seen or not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            continue
        seen.add(id(node))
        if depth > MAX_NESTING:
            raise _nesting_refused(file, node.start_mark.line + 1)  # the first in document order
        children = _children(node)
        stack.extend((child, depth + 1) for child in reversed(children))


MAX_ALIAS_EXPANSION = 100_000


def _check_expansion(root: yaml.Node, file: str) -> None:
    """Refuse aliases (*name) and merge keys (<<) that repeat more than MAX_ALIAS_EXPANSION values:
    a 600-byte document of nested ``<<: [*a, *a, ...]`` otherwise expands to gigabytes.

    Depth first, each node once: the first reference to a node is where it is written, every
    later one (an alias) repeats all of it, aliases inside included.
    """
    sizes: dict[int, int] = {}  # a node's size with every alias in it expanded
    written_at: dict[int, tuple[int, int]] = {}  # node -> (its parent, its index there)
    stack: list[tuple[yaml.Node, tuple[int, int], bool]] = [(root, (0, 0), False)]
    repeated = 0
    while stack:
        node, parent, children_done = stack.pop()
        children = _children(node)
        if not children_done:
            if id(node) in sizes:
                continue  # reached through a sibling first: this reference is a repeat
            sizes[id(node)] = 1  # until its children are done: a cycle (&a [*a]) repeats nothing
            written_at[id(node)] = parent
            stack.append((node, parent, True))
            # in document order: the first reference to a node is the one written out
            pending = [(child, (id(node), index), False) for index, child in enumerate(children)]
            stack.extend(reversed(pending))
            continue
        sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
        for index, child in enumerate(children):
            if written_at[id(child)] != (id(node), index):
                repeated += sizes[id(child)]
                if repeated > MAX_ALIAS_EXPANSION:
                    message = f"aliases (*name) or merge keys (<<) repeat more than {MAX_ALIAS_EXPANSION:,} values"
                    raise InventoryError([Problem(file, _alias_line(node, index), "(yaml)", message)])


def _alias_line(parent: yaml.Node, index: int) -> int:
    """The line of a parent's child ``index``, an alias: the line of its key in a mapping."""
    if isinstance(parent, yaml.MappingNode):
        return parent.value[index // 2][0].start_mark.line + 1
    return parent.start_mark.line + 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _model_at(location: Location) -> type[BaseModel] | None:
    model: Any = Inventory
    for part in location:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            # dict keys (e.g. thresholds.h100) stand between a field and its value model
            continue
        inside = list(models_in(field.annotation))
        model = inside[0] if len(inside) == 1 else None  # a union of models: no one model to name
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _message(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    location = tuple(error["loc"])
    if kind == "extra_forbidden":
        import difflib  # only for an inventory with a mistake

        owner = _model_at(location[:-1])
        known = sorted(owner.model_fields) if owner else []
        close = difflib.get_close_matches(str(location[-1]), known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        allowed = f"; known fields: {', '.join(known)}" if known else ""
        return f"unknown field{hint}{allowed}"
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern")
        if pattern in PATTERN_MESSAGES:
            return PATTERN_MESSAGES[pattern]
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message


# libyaml's parser (PyYAML's C binding) reads a large inventory ten times faster than the pure-Python
# one and gives the same nodes and lines; a document it refuses is read again by the pure-Python
# parser, whose error messages (and positions) are the ones cluster-cli reports.
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def _compose_and_construct(text: str, file: str) -> tuple[Any, yaml.Node | None]:
    if _FAST_LOADER is not None:
        try:
            return _compose_checked(text, file, _FAST_LOADER)
        except yaml.YAMLError:
            pass
    return _compose_checked(text, file, yaml.SafeLoader)


def _compose_checked(text: str, file: str, loader: type) -> tuple[Any, yaml.Node | None]:
    if loader is not _FAST_LOADER:
        _check_nesting(text, file, loader)
    root = yaml.compose(text, Loader=loader)
    if root is None:
        return None, None
    if loader is _FAST_LOADER and "&" not in text:  # without an anchor (&name) no node is written twice
        try:
            return _build_plain(root), root
        except _Unbuilt:
            pass
    return _construct_checked(root, text, file, loader), root


def _construct_checked(root: yaml.Node, text: str, file: str, loader: type) -> Any:
    """Every check, each its own walk with the paths and lines it reports, then SafeConstructor:
    for what _build_plain leaves, and for every document the pure-Python parser reads."""
    if loader is _FAST_LOADER:
        _check_composed_nesting(root, file)
    if "&" in text:  # without an anchor (&name) there is no alias: no node is written twice
        _check_expansion(root, file)
    _check_duplicates(root, file)
    # the data is built from the composed nodes, not from a second parse of the text
    return _ReportingConstructor().construct_document(root)


class _ReportingConstructor(yaml.constructor.SafeConstructor):
    """SafeConstructor, but a value its tag's constructor cannot read (``!!int abc`` raises
    ValueError, ``!!bool maybe`` KeyError, ``!!timestamp x`` AttributeError) is a YAML error at
    its line, not a crash."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, AttributeError, TypeError, IndexError):
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            shown = node.value if isinstance(node, yaml.ScalarNode) else "this value"
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {shown!r} as {tag}", node.start_mark
            ) from None


class _Unbuilt(Exception):
    """A node _build_plain leaves to SafeConstructor and the checks: they build it or report it."""


_TAG = "tag:yaml.org,2002:"
_STR_TAG, _MAP_TAG, _SEQ_TAG = _TAG + "str", _TAG + "map", _TAG + "seq"
_SCALAR_TAGS = tuple(_TAG + name for name in ("null", "bool", "int", "float", "binary", "timestamp"))


def _build_plain(root: yaml.Node) -> Any:
    """The data SafeConstructor builds from libyaml's nodes of a document without an anchor (so
    without an alias: every node is reached once), in one walk that also refuses what
    _check_composed_nesting and _check_duplicates refuse.

    On a 10,000-node inventory those two walks and SafeConstructor, three passes in Python, cost
    more than libyaml's compose. Scalars of a tag other than str go to SafeConstructor's own
    constructor for it (YAML 1.1 ints, booleans, timestamps stay its). Anything else (nesting past
    MAX_NESTING, a duplicate key, a merge key or a ``=`` key, a key that is a collection, any other
    tag, a scalar its constructor refuses) raises _Unbuilt: the caller takes the checked path, which
    reports it at its line, or builds it, as before.
    """
    constructor = yaml.constructor.SafeConstructor()
    scalar_builders = {tag: yaml.constructor.SafeConstructor.yaml_constructors[tag] for tag in _SCALAR_TAGS}

    def scalar(node: yaml.Node) -> Any:
        if node.tag == _STR_TAG:
            return node.value
        builder = scalar_builders.get(node.tag)
        if builder is None:
            raise _Unbuilt
        try:
            return builder(constructor, node)
        except Exception as error:
            raise _Unbuilt from error

    def build(node: yaml.Node, depth: int) -> Any:
        kind = type(node)
        if kind is yaml.ScalarNode:
            return node.value if node.tag == _STR_TAG else scalar(node)
        if depth > MAX_NESTING:
            raise _Unbuilt
        if kind is yaml.MappingNode and node.tag == _MAP_TAG:
            return mapping(node, depth)
        if kind is yaml.SequenceNode and node.tag == _SEQ_TAG:
            return [build(item, depth + 1) for item in node.value]
        raise _Unbuilt

    def mapping(node: yaml.Node, depth: int) -> dict[Any, Any]:
        built: dict[Any, Any] = {}
        keys: set[str] = set()
        for key_node, value_node in node.value:
            if type(key_node) is not yaml.ScalarNode or key_node.value in keys:
                raise _Unbuilt
            keys.add(key_node.value)
            built[scalar(key_node)] = build(value_node, depth + 1)
        return built

    return build(root, 1)


def _check_duplicates(root: yaml.Node, file: str) -> None:
    """Before the mappings are built: building one puts the keys of its merge keys (<<) beside its
    own, and a key written there is meant to override the merged one, not to be lost."""
    duplicates = _duplicate_keys(root)
    if duplicates:
        raise InventoryError(
            [
                Problem(file, line, format_location(path), f"duplicate key {key!r} (the first would be lost)")
                for path, line, key in duplicates
            ]
        )


def parse_yaml(text: str, file: str) -> tuple[Any, SourceMap]:
    """Parse YAML text; raise InventoryError on syntax errors and duplicate keys."""
    data, root = _parse(text, file)
    return data, SourceMap(root)


def _parse(text: str, file: str) -> tuple[Any, yaml.Node | None]:
    try:
        return _compose_and_construct(text, file)
    except yaml.MarkedYAMLError as error:
        line, reason = _syntax_error_position(error, text)
        raise InventoryError([Problem(file, line, "(yaml)", f"invalid YAML: {reason}")]) from None
    except yaml.reader.ReaderError as error:
        # a control character; its message spans lines, its position is a character offset
        line = text.count("\n", 0, max(error.position, 0)) + 1
        code = error.character if isinstance(error.character, int) else ord(error.character)
        message = f"invalid YAML: unacceptable character #x{code:04x}: {error.reason}"
        raise InventoryError([Problem(file, line, "(yaml)", message)]) from None
    except yaml.YAMLError as error:
        raise InventoryError([Problem(file, 1, "(yaml)", f"invalid YAML: {' '.join(str(error).split())}")]) from None


def _last_line(text: str) -> int:
    return max(1, len(text.splitlines()))


def _syntax_error_position(error: yaml.MarkedYAMLError, text: str) -> tuple[int, str]:
    """The line to blame for a YAML syntax error, and the reason.

    PyYAML marks where it noticed the error. At the end of the file that is a line past the
    last one, and the cause is what was left open (a quote, a bracket): its context mark.
    """
    mark = error.problem_mark or error.context_mark
    reason = error.problem or error.context or "not valid YAML"
    at_end = mark is not None and mark.index >= len(text.rstrip())
    if at_end and error.context_mark is not None and error.context_mark is not mark and error.context:
        mark = error.context_mark
        reason = f"{error.context}: {error.problem}" if error.problem else error.context
    line = mark.line + 1 if mark else 1
    return min(line, _last_line(text)), " ".join(reason.split())


def validate_data(data: Any, source: SourceMap, file: str, document: str | None = None) -> Inventory:
    """Turn parsed YAML into the typed model; every schema problem is reported at once. With the
    ``document``'s text, its strings are searched for template markers only where it may hold one."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InventoryError([Problem(file, 1, "(top level)", f"an inventory is a mapping of fields, not {kind}")])
    templates = _template_strings(data) if document is None or _may_hold_a_template(document) else []
    problems = [
        Problem(file, source.line_of(where), format_location(where), _TEMPLATE_MESSAGE.format(_shorten(text)))
        for where, text in templates
    ]
    try:
        inventory = Inventory.model_validate(data)
    except ValidationError as error:
        problems += [
            Problem(file, source.line_of(item["loc"]), format_location(tuple(item["loc"])), _message(item))
            for item in error.errors()
        ]
    if problems:
        raise InventoryError(problems)
    return inventory


TEMPLATE_MARKERS = ("{{", "{%", "{#")
_TEMPLATE_MESSAGE = (
    "{} holds '{{{{', '{{%' or '{{#': Ansible would evaluate it as a template, on the control node"
)


def _may_hold_a_template(document: str) -> bool:
    """Whether a key or string of the YAML text may hold a marker: only where the text has one, or a
    backslash (an escape, "\\x7b\\x7b" is '{{'; or a double-quoted line joined to the next)."""
    return "\\" in document or any(marker in document for marker in TEMPLATE_MARKERS)


def _template_strings(data: Any) -> list[tuple[Location, str]]:
    """Every key and string value that would start a Jinja expression where Ansible templates it
    (``{{ lookup('pipe', 'id') }}`` runs a command), with its location; each node once."""
    found: list[tuple[Location, str]] = []
    seen: set[int] = set()
    stack: list[tuple[Location, Any]] = [((), data)]
    while stack:
        location, value = stack.pop()
        if isinstance(value, str):
            if any(marker in value for marker in TEMPLATE_MARKERS):
                found.append((location, value))
        elif isinstance(value, (dict, list)) and id(value) not in seen:
            seen.add(id(value))
            items = list(value.items() if isinstance(value, dict) else enumerate(value))
            for key, item in reversed(items):  # popped in document order: an alias's first place
                if isinstance(key, str) and any(marker in key for marker in TEMPLATE_MARKERS):
                    found.append((location + (key,), key))
                stack.append((location + (key,), item))
    return found


def _shorten(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:45] + "..." + text[-10:])


def read_inventory_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_INVENTORY_BYTES:
            raise InventoryError([Problem(str(path), 1, "(file)", f"larger than {MAX_INVENTORY_BYTES} bytes")])
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            # the line of the first byte that is not UTF-8, not line 1 of a long file
            line = data.count(b"\n", 0, error.start) + 1
            raise InventoryError([Problem(str(path), line, "(file)", "not UTF-8 text")]) from None
        # line ends as text mode reads them (universal newlines)
        return text.replace("\r\n", "\n").replace("\r", "\n")
    except OSError as error:
        raise InventoryError([Problem(str(path), 1, "(file)", f"cannot read: {error.strerror}")]) from None


def load_cluster_text(text: str, file: str) -> Cluster:
    data, source = parse_yaml(text, file)
    inventory = validate_data(data, source, file, text)
    return resolve(inventory, source, file)


def load_cluster(path: str | Path) -> Cluster:
    """Read, validate and resolve an inventory file. Raises InventoryError."""
    path = Path(path)
    return load_cluster_text(read_inventory_text(path), str(path))
