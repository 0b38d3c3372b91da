"""The layout rules of the repository, checked on the code itself.

A fresh clone collects its tests with nothing beside it; the package touches no library
privates and plays no process games; imports point down without circles (shell to core, and
inside core/ the stage order of docs/architecture.md) and the definitions assemble; only
core/store/ runs SQL. In defs/ each file holds one role, each area wires itself and the root
only merges the areas, with one executor; what one op hands the next is what its stage
returns. Each test lists every offence as `file:line: rule` so the list can be worked
through.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "radar_pipeline"
PACKAGE_DIR = REPO_ROOT / PACKAGE

# Libraries whose private names and switches the package must not touch: their privates change
# without notice between releases, so only their public API and extension points are used.
GUARDED_LIBRARIES = frozenset({"dagster", "httpx", "httpcore", "sqlalchemy"})


def _package_files() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO_ROOT)}:{getattr(node, 'lineno', 0)}"


def _report(title: str, offences: list[str]) -> str:
    def by_file_and_line(offence: str) -> tuple[str, int, str]:
        where = re.match(r"(\S+?):(\d+):", offence)
        return (where[1], int(where[2]), offence) if where else (offence, 0, offence)

    listed = sorted(set(offences), key=by_file_and_line)
    return f"{title} ({len(listed)}):\n  " + "\n  ".join(listed)


# --- 1. a fresh clone ---------------------------------------------------------------------

# Folders whose committed files must not reach outside the repository for test data.
SELF_CONTAINED_DIRS = ("radar_pipeline", "radar_pipeline_tests", "benchmarks", ".ci")
OUTSIDE_PATH_PATTERNS = (
    re.compile(r"shared/corpus"),
    re.compile(r"parents\[\d+\]\s*/\s*[\"']shared[\"']"),
    re.compile(r"\.parent\s*/\s*[\"']shared[\"']"),
)


def _git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, f"git {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def _text_files(clone: Path) -> Iterator[Path]:
    corpus = clone / "radar_pipeline_tests" / "corpus"
    # This file names the fragments it looks for.
    this_file = clone / Path(__file__).resolve().relative_to(REPO_ROOT)
    for folder in SELF_CONTAINED_DIRS:
        for path in sorted((clone / folder).rglob("*")):
            if path.is_file() and corpus not in path.parents and path != this_file:
                yield path


def _outside_path_mentions(clone: Path) -> list[str]:
    offences = []
    for path in _text_files(clone):
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), start=1):
            for pattern in OUTSIDE_PATH_PATTERNS:
                if pattern.search(line):
                    where = f"{path.relative_to(clone)}:{lineno}"
                    offences.append(f"{where}: reaches outside the repository ({line.strip()})")
    return offences


@pytest.mark.slow
def test_fresh_clone_collects_tests_without_a_sibling_folder(tmp_path: Path) -> None:
    root = Path(_git("rev-parse", "--show-toplevel", cwd=REPO_ROOT).strip())
    clone = tmp_path / "x"
    _git("clone", "--quiet", "--no-local", str(root), str(clone), cwd=tmp_path)
    assert list(tmp_path.iterdir()) == [clone], "the clone must have nothing beside it"

    env = {**os.environ, "PYTHONPATH": str(clone)}
    env.pop("PYTEST_ADDOPTS", None)
    which = subprocess.run(
        [sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert Path(which.stdout.strip()).is_relative_to(clone), (
        f"the clone's own package must be imported, got: {which.stdout}{which.stderr}"
    )

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = proc.stdout + proc.stderr
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    collected = re.search(r"(\d+) tests? collected", summary)
    assert proc.returncode == 0, f"collection failed in a fresh clone:\n{output[-6000:]}"
    assert collected and int(collected.group(1)) > 0, f"no tests collected:\n{output[-3000:]}"
    assert "error" not in summary.lower(), f"collection errors:\n{output[-6000:]}"

    offences = _outside_path_mentions(clone)
    assert not offences, _report("committed files that read data from beside the clone", offences)


# --- 2. no library privates, no process games ---------------------------------------------


def _is_private(segment: str) -> bool:
    return segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__"))


def _import_bindings(tree: ast.Module) -> dict[str, str]:
    """Each name an import binds, mapped to the dotted path it stands for (`dg` -> `dagster`)."""
    bindings: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    bindings[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bindings[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bindings


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None when the chain does not start at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _path_rules(path: str) -> list[str]:
    """What is wrong with using the fully resolved dotted name `path`."""
    segments = path.split(".")
    problems = []
    if segments[0] in GUARDED_LIBRARIES and any(_is_private(s) for s in segments[1:]):
        # Private names change without notice between releases; use the public API.
        problems.append(f"private {segments[0]} name {path}")
    if path == "os._exit":
        # Skips finally blocks, atexit and buffered writes: shutdown must be an ordinary exit.
        problems.append("os._exit")
    if segments[0] == "gc":
        # Tuning the collector process-wide to shave a fixed cost is a game, not a design.
        problems.append(f"gc module ({path})")
    if path in {"sqlalchemy.event.listen", "sqlalchemy.event.listens_for"}:
        # A global listener reaches into the engines Dagster owns, not ours.
        problems.append(f"{path} (global SQLAlchemy event listener)")
    return problems


class _PrivateUseFinder(ast.NodeVisitor):
    def __init__(self, path: Path, tree: ast.Module) -> None:
        self.path = path
        self.bindings = _import_bindings(tree)
        self.offences: list[str] = []

    def _flag(self, node: ast.AST, rule: str) -> None:
        self.offences.append(f"{_where(self.path, node)}: {rule}")

    def _resolve(self, node: ast.expr) -> str | None:
        parts = _dotted(node)
        if parts is None:
            return None
        root = self.bindings.get(parts[0], parts[0] if parts[0] in {"os", "gc"} else None)
        return ".".join([root, *parts[1:]]) if root else None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            for problem in _path_rules(alias.name):
                self._flag(node, f"imports {problem}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0:
            for alias in node.names:
                for problem in _path_rules(f"{node.module}.{alias.name}"):
                    self._flag(node, f"imports {problem}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        resolved = self._resolve(node)
        if resolved is None:
            self.generic_visit(node)  # e.g. `call()._x`: look inside the call
            return
        for problem in _path_rules(resolved):
            self._flag(node, problem)
        # The inner links of a plain `a.b.c` chain are the same use: do not report them again.

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS" in (
            node.value
        ):
            # A private Dagster switch; the behaviour it flips is not ours to choose.
            self._flag(node, "names DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS")

    def _check_target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            owner = self._resolve(target.value)
            if owner and owner.split(".")[0] in GUARDED_LIBRARIES:
                # Assigning onto a library module or class is monkeypatching it.
                self._flag(target, f"assigns onto library object {owner}.{target.attr}")
            elif _is_private(target.attr) and not _is_self(target.value):
                # Someone else's private state: only `self`/`cls` may set their own.
                self._flag(target, f"assigns private attribute {ast.unparse(target)}")
        elif isinstance(target, ast.Subscript) and self._resolve(target.value) == "os.environ":
            self._check_env_name(target, target.slice)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_target(element)

    def _check_env_name(self, node: ast.AST, key: ast.expr | None) -> None:
        # DAGSTER_* variables other than DAGSTER_HOME are Dagster's switches, not our config.
        name = key.value if isinstance(key, ast.Constant) else None
        if isinstance(name, str) and name.startswith("DAGSTER_") and name != "DAGSTER_HOME":
            self._flag(node, f"sets Dagster switch {name} in the environment")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = self._resolve(node.func) or (
            node.func.id if isinstance(node.func, ast.Name) else None
        )
        first = node.args[0] if node.args else None
        if func in {"os.environ.setdefault", "os.putenv"}:
            self._check_env_name(node, first)
        elif func == "os.environ.update":
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    for key in arg.keys:
                        self._check_env_name(node, key)
            for keyword in node.keywords:
                if keyword.arg:
                    self._check_env_name(node, ast.Constant(keyword.arg))
        elif func == "setattr" and len(node.args) >= 2:
            name = node.args[1]
            owner = self._resolve(node.args[0])
            if owner and owner.split(".")[0] in GUARDED_LIBRARIES:
                # setattr is assignment by another name: the same monkeypatching rule.
                self._flag(node, f"setattr on library object {owner}")
            elif (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and _is_private(name.value)
                and not _is_self(node.args[0])
            ):
                self._flag(node, f"setattr of private attribute {name.value}")
        self.generic_visit(node)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in {"self", "cls"}


def test_no_private_library_attributes() -> None:
    offences = []
    for path in _package_files():
        finder = _PrivateUseFinder(path, tree := ast.parse(path.read_text(), str(path)))
        finder.visit(tree)
        offences.extend(finder.offences)
    assert not offences, _report("library privates, process games and patches", offences)


# --- 3. imports point down, without circles -----------------------------------------------


@dataclass(frozen=True)
class _Edge:
    source: str
    target: str
    where: str
    type_only: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement under `node`, at any depth, and whether it is only for types."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, type_only
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            yield from _imports(ast.Module(body=child.body, type_ignores=[]), True)
            yield from _imports(ast.Module(body=child.orelse, type_ignores=[]), type_only)
        else:
            yield from _imports(child, type_only)


def _import_targets(node: ast.stmt, module: str, is_package: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, *([base] if base else [])])
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
    ]


def _import_graph() -> tuple[set[str], list[_Edge]]:
    files = {_module_name(path): path for path in _package_files()}
    known = set(files)
    edges = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, type_only in _imports(tree):
            for target in _import_targets(node, module, path.name == "__init__.py", known):
                edges.append(_Edge(module, target, _where(path, node), type_only))
    return known, edges


def _cycles(modules: set[str], edges: list[_Edge]) -> list[list[_Edge]]:
    """One shortest import circle through each module that lies on one, deduplicated."""
    runtime: dict[str, list[_Edge]] = defaultdict(list)
    for edge in edges:
        if not edge.type_only and edge.target in modules:
            runtime[edge.source].append(edge)
    found: dict[frozenset[str], list[_Edge]] = {}
    for start in sorted(modules):
        paths: dict[str, list[_Edge]] = {start: []}
        queue = deque([start])
        while queue:
            current = queue.popleft()
            for edge in sorted(runtime[current], key=lambda e: e.target):
                if edge.target == start:
                    cycle = [*paths[current], edge]
                    found.setdefault(frozenset(e.source for e in cycle), cycle)
                    queue.clear()
                    break
                if edge.target not in paths:
                    paths[edge.target] = [*paths[current], edge]
                    queue.append(edge.target)
    return list(found.values())


def _layer_offences(edges: list[_Edge]) -> list[str]:
    offences = []
    for edge in edges:
        target_root = edge.target.split(".")[0]
        shell = (f"{PACKAGE}.defs", f"{PACKAGE}.definitions", f"{PACKAGE}.cli")
        reaches_shell = any(edge.target == s or edge.target.startswith(s + ".") for s in shell)
        if edge.source.startswith(f"{PACKAGE}.core"):
            # The domain stays plain Python: testable without Dagster, never importing upward.
            if target_root == "dagster" or target_root.startswith("dagster_") or reaches_shell:
                offences.append(f"{edge.where}: core module {edge.source} imports {edge.target}")
        elif edge.source.startswith(f"{PACKAGE}.defs") and any(
            edge.target == s or edge.target.startswith(s + ".") for s in shell[1:]
        ):
            # defs/ is assembled by definitions.py and driven by cli/, not the other way.
            offences.append(f"{edge.where}: defs module {edge.source} imports {edge.target}")
    return offences


# The layers of core/, bottom to top (docs/architecture.md, "Imports point down"), and the
# layers each may import. The base modules (the files directly in core/) rest on nothing;
# store/ rests only on them, so a second store backend needs nothing of the stages; the stage
# packages rest on store/ and may use one another; collect/ and audit/ sit on top of them.
CORE_LAYERS: dict[str, frozenset[str]] = {
    "base": frozenset({"base"}),
    "store": frozenset({"base", "store"}),
    "stage": frozenset({"base", "store", "stage"}),
    "top": frozenset({"base", "store", "stage", "top"}),
}
CORE_PACKAGES = {
    # The contract models (the JSON the CLI prints, the stored report) rest on the base
    # modules only, so every layer above can build them.
    "contract": "base",
    "store": "store",
    **dict.fromkeys(
        ("registry", "plan", "acquire", "parse", "identity", "extract", "vault"), "stage"
    ),
    **dict.fromkeys(("collect", "audit"), "top"),
}


def _core_layer(module: str) -> tuple[str | None, str]:
    """The layer of a module of core/ and the name it is placed by (None: no layer)."""
    parts = module.split(".")
    if len(parts) == 2:  # core/__init__.py
        return "base", "core"
    name = parts[2]
    if (PACKAGE_DIR / "core" / f"{name}.py").is_file():
        return "base", name
    return CORE_PACKAGES.get(name), name


def _core_order_offences(edges: list[_Edge]) -> list[str]:
    offences = []
    core = f"{PACKAGE}.core"
    for edge in edges:
        if not edge.source.startswith(core + ".") or not edge.target.startswith(core + "."):
            continue
        source, source_name = _core_layer(edge.source)
        target, target_name = _core_layer(edge.target)
        if source is None or target is None:
            unplaced = source_name if source is None else target_name
            # A new package of core/ must be given its place in the order before use.
            offences.append(f"{edge.where}: core/{unplaced} has no layer in CORE_PACKAGES")
        elif target not in CORE_LAYERS[source]:
            offences.append(
                f"{edge.where}: {source} module {edge.source} imports {target} module {edge.target}"
            )
    return offences


def _definitions_problems() -> list[str]:
    try:
        defs = importlib.import_module(f"{PACKAGE}.definitions").defs
    except Exception as exc:
        return [f"{PACKAGE}.definitions does not import: {exc!r}"]
    if not isinstance(defs, dg.Definitions):
        return [f"{PACKAGE}.definitions.defs is a {type(defs).__name__}, not dg.Definitions"]
    try:
        dg.Definitions.validate_loadable(defs)
        jobs = defs.get_repository_def().get_all_jobs()
        resolved = defs.resolve_all_job_defs()
    except Exception as exc:
        return [f"the definitions do not resolve: {exc!r}"]
    if not jobs or {job.name for job in jobs} != {job.name for job in resolved}:
        return [f"the definitions resolve to no or inconsistent jobs: {jobs} / {resolved}"]
    return []


def test_definitions_assemble_without_import_circles() -> None:
    """No circles, no upward imports between the top-level layers, definitions that load
    (the order inside core/ is the next test's)."""
    modules, edges = _import_graph()
    problems = [
        "import circle: "
        + " -> ".join(f"{edge.source} ({edge.where})" for edge in cycle)
        + f" -> {cycle[0].source}"
        for cycle in _cycles(modules, edges)
    ]
    problems += _layer_offences(edges)
    problems += _definitions_problems()
    assert not problems, _report("import circles, upward imports, definitions", problems)


def test_core_imports_follow_the_stage_order() -> None:
    """The table above, on its own: an offence names the file, the line and both layers."""
    _, edges = _import_graph()
    offences = _core_order_offences(edges)
    assert not offences, _report("imports against the stage order of core/", offences)


# --- 4. one durable write, one settings module --------------------------------------------

# The durable write (docs/architecture.md, invariant 4) is coded once: a second copy is where
# an fsync or the temp-name convention gets lost.
DURABLE_WRITE_MODULE = PACKAGE_DIR / "core" / "files.py"
DURABLE_WRITE_CALLS = frozenset({"os.link", "os.fsync", "os.fdatasync", "tempfile.mkstemp"})
# Every environment variable is read by the settings module, so README's table can list them.
SETTINGS_MODULE = PACKAGE_DIR / "core" / "config.py"
ENVIRONMENT_NAMES = frozenset({"os.environ", "os.environb", "os.getenv", "os.getenvb"})


def _uses(path: Path, wanted: frozenset[str]) -> Iterator[tuple[ast.AST, str]]:
    """Every use in `path` of a dotted name in `wanted` (`os.fsync`, `from os import fsync`)."""
    tree = ast.parse(path.read_text(), str(path))
    bindings = _import_bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in wanted:
                    yield node, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Attribute) and (parts := _dotted(node)) is not None:
            root = bindings.get(parts[0], parts[0] if parts[0] == "os" else None)
            resolved = ".".join([root, *parts[1:]]) if root else None
            if resolved in wanted:
                yield node, resolved


def test_only_core_files_makes_durable_writes() -> None:
    offences = [
        f"{_where(path, node)}: calls {name} outside core/files.py"
        for path in _package_files()
        if path != DURABLE_WRITE_MODULE
        for node, name in _uses(path, DURABLE_WRITE_CALLS)
    ]
    assert not offences, _report("durable writes coded outside core/files.py", offences)


def test_only_the_settings_module_reads_the_environment() -> None:
    offences = [
        f"{_where(path, node)}: uses {name} outside core/config.py"
        for path in _package_files()
        if path != SETTINGS_MODULE
        for node, name in _uses(path, ENVIRONMENT_NAMES)
    ]
    assert not offences, _report("environment reads outside the settings module", offences)


# The settings are built at the edge and handed down (core/config.py): `from_env` is called
# once by the `radar` command for all its work, and once on the Dagster side, where the
# resources (and the definitions' default automation status) read the environment; every
# other module takes the settings, or what it needs of them, as a parameter.
SETTINGS_READS = frozenset({"from_env", "environment"})
SETTINGS_READERS = {
    Path("radar_pipeline/cli/__init__.py"): 1,  # `main`: one Settings per command
    Path("radar_pipeline/defs/resources.py"): 1,  # `environment_settings`: runs, ticks, load
}
MAX_SETTINGS_READS = 3
DEFS_DIR = PACKAGE_DIR / "defs"
# The one module in defs/ that knows the variables' names: the resources are their fields.
DEFS_SETTINGS_MODULE = DEFS_DIR / "resources.py"


def _settings_reads(tree: ast.AST) -> list[ast.Call]:
    """The calls of `from_env(...)` / `environment(...)` (any receiver) in `tree`."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        in SETTINGS_READS
    ]


def test_the_settings_are_read_at_the_edge() -> None:
    """At most three places build the settings from the environment, each named above."""
    found: dict[Path, list[str]] = {}
    for path in _package_files():
        if path == SETTINGS_MODULE:
            continue
        calls = _settings_reads(ast.parse(path.read_text(), str(path)))
        if calls:
            found[path.relative_to(REPO_ROOT)] = [_where(path, c) for c in calls]
    offences = [
        f"{where}: builds the settings from the environment (take them as a parameter)"
        for path, wheres in found.items()
        if len(wheres) > SETTINGS_READERS.get(path, 0)
        for where in wheres
    ]
    total = sum(len(w) for w in found.values())
    assert total <= MAX_SETTINGS_READS, f"{total} reads of the settings: {found}"
    assert not offences, _report("settings read away from the edge", offences)


def test_the_settings_read_check_sees_reads() -> None:
    """The check above is not vacuous: it finds both spellings of a read."""
    tree = ast.parse("Settings.from_env()\nenvironment({})\nSettings.paths\n")
    assert len(_settings_reads(tree)) == 2


def test_no_definition_reads_a_variable_but_the_resources() -> None:
    """defs/ gets the vault, the store, the limits and the clock (`RADAR_AS_OF`) from the
    resources: no other module there imports a variable's name or reads the environment."""
    offences = []
    for path in sorted(DEFS_DIR.rglob("*.py")):
        if path == DEFS_SETTINGS_MODULE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "radar_pipeline.core.config":
                named = [a.name for a in node.names if a.name.endswith("_ENV")]
                offences += [f"{_where(path, node)}: imports {n} in defs/" for n in named]
            elif isinstance(node, ast.Constant) and node.value == "RADAR_AS_OF":
                offences.append(f"{_where(path, node)}: names RADAR_AS_OF in code")
    assert not offences, _report("settings read in defs/ outside the resources", offences)


def _readme_variables() -> dict[str, int]:
    """The variables of README's environment table, with their line numbers."""
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## Environment")
    found: dict[str, int] = {}
    for lineno, line in enumerate(lines[start + 1 :], start=start + 2):
        if line.startswith("#"):
            break
        cell = re.match(r"\|\s*`([A-Z][A-Z0-9_]*)`\s*\|", line)
        if cell:
            found[cell[1]] = lineno
    return found


def _settings_variables() -> dict[str, int]:
    """The variable names the settings module defines (`X_ENV = "NAME"`), with their lines."""
    tree = ast.parse(SETTINGS_MODULE.read_text(), str(SETTINGS_MODULE))
    found: dict[str, int] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.endswith("_ENV")
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found[node.value.value] = node.lineno
    return found


def test_readme_environment_table_is_the_settings_module() -> None:
    readme, settings = _readme_variables(), _settings_variables()
    assert readme, "README.md has no `## Environment` table"
    settings_file = SETTINGS_MODULE.relative_to(REPO_ROOT)
    offences = [
        f"README.md:{line}: {name} is not read by {settings_file}"
        for name, line in readme.items()
        if name not in settings
    ]
    offences += [
        f"{settings_file}:{line}: {name} is not in README's environment table"
        for name, line in settings.items()
        if name not in readme
    ]
    assert not offences, _report("README's environment table against the settings", offences)


# --- 5. SQL only in core/store/ -----------------------------------------------------------

STORE_DIR = PACKAGE_DIR / "core" / "store"
# Calls that run SQL on a DuckDB connection (or relation), and the store's own SQL builders.
SQL_CALLS = frozenset({"execute", "executemany", "sql", "query", "insert_rows", "unnested"})
# A string that is an SQL statement, or the start of one.
SQL_TEXT = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|WITH\s+\w+\s+AS\s*\(|"
    r"CREATE\s|DROP\s|ALTER\s+TABLE\s)"
)


def _sql_offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    offences = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in SQL_CALLS:
                offences.append(f"{_where(path, node)}: calls {name}() outside core/store/")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL_TEXT.match(node.value)
        ):
            offences.append(f"{_where(path, node)}: SQL text outside core/store/")
    return offences


def test_only_the_store_runs_sql() -> None:
    """Every statement lives in core/store/ (one module per table group): the stages call its
    typed functions, so a second backend or batched writes change one folder."""
    offences = []
    for path in _package_files():
        if STORE_DIR not in path.parents:
            offences.extend(_sql_offences(path))
    assert not offences, _report("SQL outside core/store/", offences)


def test_the_sql_check_sees_sql() -> None:
    """The check above is not vacuous: it finds the statements of a store module."""
    assert _sql_offences(STORE_DIR / "feed_state.py"), "the SQL check found nothing in the store"


# --- 5b. transactions opened only in core/store/ ------------------------------------------

# The calls that open a transaction or a connection of the store. Outside core/store/ a stage
# calls a store function that takes the Store (it opens its own transaction), or hands its
# work to `Store.atomically` / `read_only.reading` when that work must see the store and the
# vault in one piece.
TRANSACTION_CALLS = frozenset({"transaction", "read_only", "read_only_transaction"})
CONNECT_MODULES = frozenset({"duckdb", "psycopg", "psycopg2"})


def _transaction_offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    offences = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            owner = getattr(func.value, "id", None) if isinstance(func, ast.Attribute) else None
            opens = name in TRANSACTION_CALLS or (name == "connect" and owner in CONNECT_MODULES)
            if opens:
                offences.append(f"{_where(path, node)}: {name}() outside core/store/")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return offences


def test_only_the_store_opens_transactions() -> None:
    """The store owns its transactions: no module outside core/store/ opens one (or a
    connection), so where a transaction begins and ends, and how it is retried or waited for,
    is decided in one folder."""
    offences = []
    for path in _package_files():
        if STORE_DIR not in path.parents:
            offences.extend(_transaction_offences(path))
    assert not offences, _report("transactions opened outside core/store/", offences)


def test_the_transaction_check_sees_transactions() -> None:
    """The check above is not vacuous: it finds the store's own openings."""
    assert _transaction_offences(STORE_DIR / "fetch_attempts.py")
    assert _transaction_offences(STORE_DIR / "read_only.py")


# Run tags are a contract between the launchers, the sensors and the checks: spelled once.
TAGS_MODULE = PACKAGE_DIR / "defs" / "tags.py"
RUN_TAG_LITERAL = re.compile(r"^(dagster|radar)/[a-z_]+$")
# `radar/...` strings that are Obsidian note tags written into Signals and Sources, not run tags.
NOTE_TAG_PREFIXES = (
    "radar/signal",
    "radar/source",
    "radar/imported",
    "radar/added",
    "radar/folder",
)


def test_run_tags_are_spelled_once() -> None:
    offences = [
        f"{_where(path, node)}: run tag {node.value!r} outside defs/tags.py"
        for path in _package_files()
        if path != TAGS_MODULE
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and RUN_TAG_LITERAL.match(node.value)
        and not node.value.startswith(NOTE_TAG_PREFIXES)
    ]
    assert not offences, _report("run tags spelled outside defs/tags.py", offences)


# --- the JSON contract ---------------------------------------------------------------------

CONTRACT_DIR = PACKAGE_DIR / "core" / "contract"
OUTCOMES_MODULE = CONTRACT_DIR / "outcomes.py"
# A JSON shape is declared by a model of core/contract/ and written by pydantic: a method by
# these names is a shape written by hand again.
HAND_WRITTEN_JSON = re.compile(r"^(to|from)_json")
# The spellings of the outcome vocabulary (report keys, `sources try` decisions, stored
# observations, dedupe decisions). "updated", "rejected" and "deferred" are left out: they
# also name a feed's date key, a legal assessment and a skipped fetch.
OUTCOME_SPELLINGS = frozenset(
    {
        "created",
        "reused",
        "duplicate",
        "duplicates",
        "filtered",
        "outsideWindow",
        "outside-window",
        "outside_window",
        "create",
        "reuse",
        "update",
        "reject",
    }
)


def _functions(path: Path) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def test_no_json_shape_is_written_by_hand() -> None:
    offences = [
        f"{_where(path, node)}: {node.name}() writes or reads a JSON shape by hand"
        for path in _package_files()
        for node in _functions(path)
        if HAND_WRITTEN_JSON.match(node.name)
    ]
    assert not offences, _report("JSON shapes outside the contract models", offences)


def _outcome_words(path: Path) -> list[ast.Constant]:
    return [
        node
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in OUTCOME_SPELLINGS
    ]


def test_the_outcome_vocabulary_is_spelled_once() -> None:
    offences = [
        f"{_where(path, node)}: outcome {node.value!r} spelled outside contract/outcomes.py"
        for path in _package_files()
        if path != OUTCOMES_MODULE
        for node in _outcome_words(path)
    ]
    assert not offences, _report("outcome words outside their module", offences)


def test_the_contract_checks_see_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'def to_json(x):\n    return {"outsideWindow": x}\n\ndef from_json_text(x): ...\n',
        encoding="utf-8",
    )
    assert [n.name for n in _functions(sample) if HAND_WRITTEN_JSON.match(n.name)] == [
        "to_json",
        "from_json_text",
    ]
    assert [n.value for n in _outcome_words(sample)] == ["outsideWindow"]
    assert _outcome_words(OUTCOMES_MODULE)  # the module that spells them is where they are


# --- 6. the Dagster shell: one role per file, each area wires itself ----------------------

DEFS_DIR = PACKAGE_DIR / "defs"
ROOT_DEFINITIONS = PACKAGE_DIR / "definitions.py"
# A file of defs/ named for a role holds only that role's Dagster objects (defs/__init__.py);
# every other module is a helper of its area and defines none.
ROLE_FILES = frozenset(
    {"assets", "checks", "jobs", "schedules", "sensors", "partitions", "resources", "definitions"}
)
# The class `define_asset_job` returns (Dagster does not export it).
_ASSET_JOB = type(dg.define_asset_job("layout_probe"))


def _roles_of(value: object) -> frozenset[str]:
    """The role files a Dagster object may be defined in (empty: it is no Dagster object)."""
    if isinstance(value, dg.AssetChecksDefinition):  # before assets: a subclass of them
        return frozenset({"checks"})
    if isinstance(value, dg.AssetsDefinition | dg.AssetSpec):
        return frozenset({"assets"})
    if isinstance(value, dg.ScheduleDefinition):
        return frozenset({"schedules"})
    if isinstance(value, dg.SensorDefinition):
        return frozenset({"sensors"})
    if isinstance(value, dg.JobDefinition | _ASSET_JOB):
        return frozenset({"jobs"})
    if isinstance(value, dg.OpDefinition | dg.GraphDefinition):
        # The ops of a graph asset live with it; those of an op job with the job.
        return frozenset({"assets", "jobs"})
    if isinstance(value, dg.PartitionsDefinition):
        return frozenset({"partitions"})
    is_resource_class = isinstance(value, type) and issubclass(value, dg.ConfigurableResource)
    if is_resource_class or isinstance(value, dg.ResourceDefinition | dg.ConfigurableResource):
        return frozenset({"resources"})
    if isinstance(value, dg.Definitions):
        return frozenset({"definitions"})
    return frozenset()


def _top_level_names(path: Path) -> dict[str, ast.stmt]:
    """The names a module defines itself (not those it imports), with their statements."""
    found: dict[str, ast.stmt] = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = node
    return found


def _defs_modules() -> list[Path]:
    return sorted(p for p in DEFS_DIR.rglob("*.py") if p.name != "__init__.py")


def _role_offences(path: Path) -> list[str]:
    module = importlib.import_module(_module_name(path))
    offences = []
    for name, node in _top_level_names(path).items():
        roles = _roles_of(getattr(module, name, None))
        if roles and path.stem not in roles:
            where = "a helper module" if path.stem not in ROLE_FILES else f"{path.stem}.py"
            wanted = " or ".join(f"{r}.py" for r in sorted(roles))
            offences.append(f"{_where(path, node)}: {name} belongs in {wanted}, not in {where}")
    return offences


def test_each_file_of_defs_holds_one_role() -> None:
    offences = [o for path in _defs_modules() for o in _role_offences(path)]
    assert not offences, _report("Dagster objects outside their role file", offences)


def test_the_role_check_sees_roles() -> None:
    """The check above is not vacuous: it tells the roles of the objects it meets."""
    from radar_pipeline.defs.collection import assets, sensors

    assert _roles_of(assets.signals) == {"assets"}
    assert _roles_of(assets.plan) == {"assets", "jobs"}
    assert _roles_of(sensors.signal_checks_after_collection) == {"sensors"}
    assert _roles_of(dg.define_asset_job("x")) == {"jobs"}
    assert _roles_of(sensors.EVIDENCE_KEYS_AFTER_COLLECTION) == frozenset()


def _areas() -> list[Path]:
    return sorted(p.parent for p in DEFS_DIR.glob("*/__init__.py"))


def _kind_and_name(value: object) -> list[str]:
    """An asset, check, job, schedule or sensor by kind and name (nothing for the rest)."""
    if isinstance(value, dg.AssetChecksDefinition):
        return [f"check {key.to_user_string()}" for key in value.check_keys]
    if isinstance(value, dg.AssetsDefinition):
        return [f"asset {key.to_user_string()}" for key in value.keys]
    if isinstance(value, dg.AssetSpec):
        return [f"asset {value.key.to_user_string()}"]
    for kind in ("jobs", "schedules", "sensors"):
        if _roles_of(value) == {kind}:
            return [f"{kind[:-1]} {value.name}"]
    return []


def _wired(defs: dg.Definitions) -> set[str]:
    """What an area's Definitions holds."""
    held = [*(defs.assets or ()), *(defs.asset_checks or ()), *(defs.jobs or ())]
    held += [*(defs.schedules or ()), *(defs.sensors or ())]
    return {name for value in held for name in _kind_and_name(value)}


def _defined(area: Path) -> set[str]:
    """What an area's role files define."""
    found: set[str] = set()
    for path in sorted(area.glob("*.py")):
        if path.stem in ROLE_FILES - {"definitions"}:
            module = importlib.import_module(_module_name(path))
            for name in _top_level_names(path):
                found.update(_kind_and_name(getattr(module, name, None)))
    return found


def test_each_area_wires_itself() -> None:
    """Every area has a definitions.py that defines only `defs`, a dg.Definitions holding
    exactly the assets, checks, jobs, schedules and sensors its role files define."""
    offences = []
    for area in _areas():
        name = area.relative_to(REPO_ROOT)
        path = area / "definitions.py"
        if not path.is_file():
            offences.append(f"{name}: no definitions.py")
            continue
        if list(_top_level_names(path)) != ["defs"]:
            offences.append(f"{path.relative_to(REPO_ROOT)}: defines more than `defs`")
        defs = importlib.import_module(_module_name(path)).defs
        if not isinstance(defs, dg.Definitions):
            offences.append(f"{path.relative_to(REPO_ROOT)}: `defs` is no dg.Definitions")
            continue
        wired, defined = _wired(defs), _defined(area)
        offences += [f"{name}: {x} is defined but not wired" for x in sorted(defined - wired)]
        offences += [f"{name}: {x} is wired but defined elsewhere" for x in sorted(wired - defined)]
    assert not offences, _report("areas that do not wire themselves", offences)


def _root_offences(tree: ast.Module) -> list[str]:
    """What in the root definitions.py is more than a merge of the areas' `defs` and one
    Definitions of the shared resources and the executor."""
    where = ROOT_DEFINITIONS.relative_to(REPO_ROOT)
    offences: list[str] = []
    areas: dict[str, str] = {}  # the name an area's definitions module is bound to -> area
    merged: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{PACKAGE}.defs."):
            for alias in node.names:
                if alias.name == "definitions":
                    areas[alias.asname or alias.name] = (node.module or "").split(".")[-1]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            continue
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        elif (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == ["defs"]
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "dg.Definitions.merge"
        ):
            merged += _merged_areas(node.value, areas, offences, str(where))
        else:
            offences.append(f"{where}:{node.lineno}: not an import or the merge of the areas")
    wanted = sorted(area.name for area in _areas())
    if sorted(merged) != wanted:
        offences.append(f"{where}: merges {sorted(merged)}, the areas are {wanted}")
    return offences


def _merged_areas(
    merge: ast.Call, areas: dict[str, str], offences: list[str], where: str
) -> list[str]:
    merged = []
    shared = 0
    for arg in merge.args:
        parts = _dotted(arg)
        if parts is not None and len(parts) == 2 and parts[1] == "defs" and parts[0] in areas:
            merged.append(areas[parts[0]])
        elif (
            isinstance(arg, ast.Call)
            and ast.unparse(arg.func) == "dg.Definitions"
            and not arg.args
            and {k.arg for k in arg.keywords} <= {"resources", "executor"}
        ):
            shared += 1  # what every area shares: resources, and the one executor
        else:
            offences.append(f"{where}:{arg.lineno}: merges {ast.unparse(arg)}, not an area")
    if shared > 1:
        offences.append(f"{where}: more than one Definitions of shared resources")
    return merged


def test_the_root_definitions_only_merge_the_areas() -> None:
    tree = ast.parse(ROOT_DEFINITIONS.read_text(), str(ROOT_DEFINITIONS))
    offences = _root_offences(tree)
    assert not offences, _report("the root definitions.py does more than merge areas", offences)


def test_the_root_check_sees_more_than_a_merge() -> None:
    """The check above is not vacuous: a root that lists objects itself is refused."""
    listing = ast.parse(
        "import dagster as dg\nfrom radar_pipeline.defs.collection.assets import signals\n"
        "defs = dg.Definitions(assets=[signals])\n"
    )
    assert any("not an import or the merge" in o for o in _root_offences(listing))


def test_the_executor_is_set_once() -> None:
    """No job names its executor: the Definitions set it once, and every job runs in process."""
    offences = [
        f"{_where(path, node)}: executor_def set on a job"
        for path in _package_files()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.keyword) and node.arg == "executor_def"
    ]
    from radar_pipeline.definitions import defs

    jobs = defs.get_repository_def().get_all_jobs()
    offences += [f"job {j.name} runs on {j.executor_def.name}" for j in jobs]
    offences = [o for o in offences if not o.endswith(f"on {dg.in_process_executor.name}")]
    assert jobs and not offences, _report("executors set per job, or not in process", offences)


AUTOMATION = DEFS_DIR / "automation.py"


def test_every_sensor_tick_is_spelled_in_automation() -> None:
    """A sensor's interval is a constant of defs/automation.py, never a number of its own."""
    names = set(_top_level_names(AUTOMATION))
    offences = [
        f"{_where(path, node)}: minimum_interval_seconds={ast.unparse(node.value)}"
        for path in _package_files()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.keyword)
        and node.arg == "minimum_interval_seconds"
        and not (isinstance(node.value, ast.Name) and node.value.id in names)
    ]
    assert not offences, _report("sensor ticks not spelled in defs/automation.py", offences)


# --- 7. what one op hands the next travels through Dagster ---------------------------------


def _private_attributes(tree: ast.Module) -> set[str]:
    """The private attributes the classes of a module keep (`self._x = ...`, `_x: ... =`)."""
    owned: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign | ast.Assign):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    owned |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Attribute) and _is_self(node.value):
            owned.add(node.attr)
    return {name for name in owned if _is_private(name)}


def _private_reads(path: Path, tree: ast.Module, foreign: dict[str, str]) -> list[str]:
    """Uses in `path` of a private attribute another module's class keeps, on anything but
    `self`/`cls` (a hand-over that bypasses the values the stages return)."""
    return [
        f"{_where(path, node)}: reads {ast.unparse(node)}, private to {foreign[node.attr]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in foreign and not _is_self(node.value)
    ]


def _private_read_offences() -> list[str]:
    trees = {path: ast.parse(path.read_text(), str(path)) for path in _package_files()}
    owners: dict[str, set[str]] = defaultdict(set)
    for path, tree in trees.items():
        for name in _private_attributes(tree):
            owners[name].add(str(path.relative_to(REPO_ROOT)))
    offences = []
    for path, tree in trees.items():
        mine = str(path.relative_to(REPO_ROOT))
        foreign = {n: ", ".join(sorted(o)) for n, o in owners.items() if mine not in o}
        offences += _private_reads(path, tree, foreign)
    return offences


def test_no_module_reads_another_modules_private_state() -> None:
    """What the Collector's stages hand on is what they return (the fetch stage's parses
    included), never a private attribute another module reaches into; the same for every
    class of the package."""
    offences = _private_read_offences()
    assert not offences, _report("private attributes read from another module", offences)


def test_the_private_read_check_sees_a_read() -> None:
    """The check above is not vacuous: a read of a private attribute of a Collector's lock
    book from an op is found."""
    locks = PACKAGE_DIR / "core" / "plan" / "locks.py"
    assert "_held" in _private_attributes(ast.parse(locks.read_text()))
    op = ast.parse("def pages(collector):\n    return collector.locks._held, collector.run\n")
    offences = _private_reads(DEFS_DIR / "x.py", op, {"_held": "locks.py"})
    assert len(offences) == 1 and "collector.locks._held" in offences[0], offences


COLLECTOR = PACKAGE_DIR / "core" / "collect" / "collector.py"
# The stage methods the ops call in turn (defs/collection/assets.py).
COLLECTOR_STAGES = ("plan", "fetch", "parse", "dedupe", "commit", "pages")
# What a stage may keep on the Collector: the plan, to know whom a later stage's failure
# concerns (run_failure.py). Nothing a later stage reads as its input.
COLLECTOR_STAGE_STATE = frozenset({"planned"})


def _self_attributes_assigned(target: ast.expr) -> Iterator[ast.Attribute]:
    """The attributes of `self` an assignment target writes: `self.x`, `self.x[key]`, and
    those inside a tuple or list target."""
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _self_attributes_assigned(element)
        return
    if isinstance(target, ast.Starred):
        yield from _self_attributes_assigned(target.value)
        return
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and _is_self(target.value):
        yield target


def _self_writes(function: ast.FunctionDef) -> Iterator[tuple[ast.AST, str]]:
    """Each attribute of `self` a method (or a function inside it) assigns, or assigns into."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for attribute in _self_attributes_assigned(target):
                yield attribute, attribute.attr


def _stage_state_offences(tree: ast.Module) -> list[str]:
    [collector] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Collector"]
    return [
        f"{_where(COLLECTOR, node)}: Collector.{method.name} keeps self.{attr} for a later stage"
        for method in collector.body
        if isinstance(method, ast.FunctionDef) and method.name in COLLECTOR_STAGES
        for node, attr in _self_writes(method)
        if attr not in COLLECTOR_STAGE_STATE
    ]


def test_the_collector_stages_hand_on_what_they_return() -> None:
    """What one op hands the next travels as its output: a stage of the Collector returns
    what the next needs (the fetch stage's started parses included) and keeps none of it on
    the Collector, where the graph would not show it."""
    offences = _stage_state_offences(ast.parse(COLLECTOR.read_text(), str(COLLECTOR)))
    assert not offences, _report("stage hand-overs kept on the Collector", offences)


def test_the_stage_state_check_sees_a_kept_hand_over() -> None:
    """The check above is not vacuous: a fetch stage that leaves its parses on the Collector
    for the parse stage is found, both where it writes them and where it takes them."""
    kept = ast.parse(
        "class Collector:\n"
        "    def fetch(self, plan):\n"
        "        def start(result):\n"
        "            self._parsing[result.source_id] = result\n"
        "    def parse(self, plan, fetched):\n"
        "        parsing, self._parsing = self._parsing, {}\n"
    )
    offences = _stage_state_offences(kept)
    assert len(offences) == 2 and all("self._parsing" in o for o in offences), offences


# --- 8. special cases folded into mechanisms ----------------------------------------------

# The identity rule before ids were read as written (docs/architecture.md, "Vaults collected
# before") lives in one module; the rest of the package knows only an item's earlier identity.
LEGACY_MODULE = PACKAGE_DIR / "core" / "identity" / "legacy.py"
LEGACY_IMPORT = f"{PACKAGE}.core.identity.legacy"


def _legacy_names(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every name, attribute, definition, argument, keyword and import that says "legacy"."""
    for node in ast.walk(tree):
        names: list[str | None] = []
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.arg | ast.keyword):
            names.append(node.arg)
        elif isinstance(node, ast.ImportFrom):
            names += [node.module, *(a.asname or a.name for a in node.names)]
        elif isinstance(node, ast.Import):
            names += [a.asname or a.name for a in node.names]
        for name in names:
            if name and "legacy" in name.lower():
                yield node, name


def _legacy_offences(files: dict[str, str]) -> list[str]:
    """Offences against the fold, for module texts by path: outside the legacy module, one
    module may import one function from it and call that function at one point; nothing else
    may name the legacy rule."""
    offences = []
    users = []
    for where, text in files.items():
        tree = ast.parse(text)
        found = list(_legacy_names(tree))
        if not found:
            continue
        users.append(where)
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported = [
            a.asname or a.name for n in imports if n.module == LEGACY_IMPORT for a in n.names
        ]
        calls = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in imported
        ]
        uses = [n for n, _ in found if isinstance(n, ast.Name)]
        if len(imported) != 1 or len(calls) != 1 or uses != [calls[0].func]:
            offences += [
                f"{where}:{getattr(n, 'lineno', 0)}: names {name!r} (import one function of "
                "core/identity/legacy.py and call it once)"
                for n, name in found
                if not (isinstance(n, ast.ImportFrom) and n.module == LEGACY_IMPORT)
            ]
    if len(users) > 1:
        offences.append(f"{', '.join(sorted(users))}: more than one module uses the legacy rule")
    return offences


def test_the_legacy_identity_rule_lives_in_one_module() -> None:
    """ "legacy" is said in core/identity/legacy.py only; one module calls it, at one point."""
    files = {
        str(path.relative_to(REPO_ROOT)): path.read_text(encoding="utf-8")
        for path in _package_files()
        if path != LEGACY_MODULE
    }
    offences = _legacy_offences(files)
    assert not offences, _report("the legacy identity rule outside its module", offences)
    users = [where for where, text in files.items() if LEGACY_IMPORT in text]
    assert users == [f"{PACKAGE}/core/parse/items.py"], users


def test_the_legacy_check_sees_a_second_use() -> None:
    """The rule above is not vacuous: a second call, a field or a second module is found."""
    one = f"from {LEGACY_IMPORT} import legacy_keys\nkeys = legacy_keys([], links)\n"
    assert not _legacy_offences({"a.py": one})
    assert _legacy_offences({"a.py": one + "again = legacy_keys([], links)\n"})
    assert _legacy_offences({"a.py": "item.legacy_identity = None\n"})
    assert _legacy_offences({"a.py": one, "b.py": one})


# A Source's scope (production or fixture) is decided by `registry/sources.source_scope`
# alone: everything else reads `Source.scope` or what follows from it (`reads_vault`,
# `FetchRequest.from_vault`), never the sourceType or collectionMethod `fixture` again.
SCOPE_MODULE = PACKAGE_DIR / "core" / "registry" / "sources.py"
SCOPE_FUNCTION = "source_scope"


def _fixture_decisions(tree: ast.AST, allowed: ast.AST | None = None) -> list[ast.AST]:
    """Comparisons of anything but a decided scope with "fixture" (`method == "fixture"`,
    `"fixture" in (...)`) outside `allowed`, and any `is_fixture`."""
    inside = set(ast.walk(allowed)) if allowed is not None else set()

    def says_fixture(node: ast.expr) -> bool:
        items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return any(isinstance(i, ast.Constant) and i.value == "fixture" for i in items)

    def is_scope(node: ast.expr) -> bool:  # `x.scope`, or `source_scope(...)`
        if isinstance(node, ast.Call):
            node = node.func
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        return name in ("scope", SCOPE_FUNCTION)

    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if node in inside:
            continue
        operands = (node.left, *node.comparators) if isinstance(node, ast.Compare) else ()
        compared = any(map(says_fixture, operands)) and not any(map(is_scope, operands))
        named = getattr(node, "attr", None) == "is_fixture" or (
            isinstance(node, ast.FunctionDef) and node.name == "is_fixture"
        )
        if compared or named:
            found.append(node)
    return found


def test_the_fixture_scope_is_decided_in_one_place() -> None:
    offences = []
    for path in _package_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = None
        if path == SCOPE_MODULE:
            allowed = next(
                n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == SCOPE_FUNCTION
            )
            assert _fixture_decisions(allowed), f"{SCOPE_FUNCTION} decides nothing"
        offences += [
            f"{_where(path, node)}: decides fixture-ness outside {SCOPE_FUNCTION}"
            for node in _fixture_decisions(tree, allowed)
        ]
    assert not offences, _report("fixture scope decided outside source_scope", offences)


def test_the_fixture_check_sees_a_second_decision() -> None:
    for text in (
        'a = method == "fixture"',
        'a = "fixture" in (source_type, method)',
        "a = source.is_fixture",
    ):
        assert _fixture_decisions(ast.parse(text)), text
    assert not _fixture_decisions(ast.parse('a = source.scope == "fixture"'))


# "check" alone means a Source check; a Source plan and an evidence check have their own
# words (docs/architecture.md, "Glossary"). A value class of core/ or cli/ named for a check
# is one the glossary lists as a Source check's, and every name the glossary gives exists.
ARCHITECTURE_DOC = REPO_ROOT / "docs" / "architecture.md"
CODE_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)`")


def _glossary() -> dict[str, str]:
    """The glossary's rows: the word (its bold text) -> the row's "in code" cell."""
    text = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    section = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        word = re.match(r"\*\*(.+?)\*\*", cells[0]) if len(cells) == 3 else None
        if word:
            rows[word[1]] = cells[2]
    return rows


def test_check_names_one_thing_in_core_and_cli() -> None:
    rows = _glossary()
    assert {"check", "Source plan", "evidence check"} <= set(rows), sorted(rows)
    source_check = set(CODE_NAME.findall(rows["check"]))
    offences = [
        f"{_where(path, node)}: class {node.name} is named for a check but is not one of a "
        "Source check's values in the glossary"
        for folder in ("core", "cli")
        for path in sorted((PACKAGE_DIR / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and "check" in node.name.lower()
        and node.name not in source_check
    ]
    assert not offences, _report("classes named for a check outside the glossary", offences)


def test_every_name_the_glossary_gives_exists() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in _package_files())
    missing = [
        f"{word}: {name}"
        for word, cell in _glossary().items()
        for name in CODE_NAME.findall(cell)
        if not re.search(rf"\b{re.escape(name.rsplit('.', 1)[-1])}\b", source)
    ]
    assert not missing, _report("glossary names missing from the package", missing)


def _run_status_sensors(sensors: list[dg.SensorDefinition]) -> list[str]:
    return [s.name for s in sensors if isinstance(s, dg.RunStatusSensorDefinition)]


def test_no_sensor_is_a_run_status_sensor() -> None:
    """Dagster's run status sensors record an idle tick as "Sensor function returned an empty
    result"; the sensors that follow runs read them through defs/run_watch.py instead, so that
    every tick says what it saw (docs/operations.md, Automation)."""
    from radar_pipeline.definitions import defs

    @dg.run_failure_sensor(name="layout_probe_failures")
    def probe(context: dg.RunFailureSensorContext) -> None:
        """Not wired: shows the check below tells a run status sensor."""

    assert _run_status_sensors([probe]) == ["layout_probe_failures"]
    offences = _run_status_sensors(list(defs.sensors or []))
    assert not offences, _report("run status sensors (their idle tick says nothing)", offences)
