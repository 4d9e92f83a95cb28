"""The public surface: every exported name resolves, and an application gets through a turn
with the top-level names alone."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import contextledger as cl

PACKAGES = [
    "contextledger",
    "contextledger.actors",
    "contextledger.bench",
    "contextledger.cachesim",
    "contextledger.cli",
    "contextledger.compaction",
    "contextledger.config",
    "contextledger.events",
    "contextledger.history",
    "contextledger.importers",
    "contextledger.ledger",
    "contextledger.logging",
    "contextledger.policy",
    "contextledger.prices",
    "contextledger.providers",
    "contextledger.report",
    "contextledger.request",
    "contextledger.simulation",
    "contextledger.store",
    "contextledger.strategies",
    "contextledger.testing",
    "contextledger.testing.loopback",
    "contextledger.vocabulary",
]


def test_every_package_and_public_module_is_checked() -> None:
    root = Path(cl.__file__).parent
    packages = {
        ".".join(("contextledger", *init.parent.relative_to(root).parts))
        for init in root.rglob("__init__.py")
    }
    modules = {
        f"contextledger.{path.stem}" for path in root.glob("*.py") if not path.name.startswith("_")
    }
    assert set(PACKAGES) == packages | modules - {"contextledger.__main__"}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    exported = package.__all__
    assert exported, f"{name} exports nothing"
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(package, n)]
    assert missing == []


async def test_a_turn_with_the_top_level_names_only() -> None:
    model = cl.Model(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        limits=cl.ModelLimits(context=200_000, output=32_000),
    )
    inputs = cl.RequestInputs(
        model=cl.ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        segments=cl.SystemSegments(prompt="You are a coding agent.", environment="<env>\n</env>"),
    )
    async with cl.Runtime.open(cl.MemoryStore(), model=model, config=cl.Config()) as runtime:
        session = await runtime.session("ses_api")
        user = await session.add_user("Fix the failing test in src/app.py")
        built = await session.build_request(inputs)
        assert built.request.messages[-1].role == "user"
        await session.record_assistant(
            user,
            tool_calls=[("read", {"path": "src/app.py"}, "def app(): ...")],
            usage=cl.Usage(input=1_200, output=80),
        )
        again = await session.build_request(inputs)
        assert len(again.request.messages) > len(built.request.messages)
        assert await session.replay()


def test_the_runtimes_exceptions_are_exported_at_the_top() -> None:
    """An application catches what the runtime raises with the top-level names alone."""
    import contextledger.actors as actors

    raised = {
        name
        for name in actors.__all__
        if isinstance(getattr(actors, name), type)
        and issubclass(getattr(actors, name), BaseException)
    }
    assert raised >= {"RuntimeClosed", "EmbeddedRuntimeClosed", "CompactionExhausted"}
    assert raised - set(cl.__all__) == set()


def test_every_module_inside_a_package_is_named_internal() -> None:
    """A package's ``__init__`` is its public surface; the modules behind it start with an
    underscore, so an import from one says it reaches past the API (as in trio)."""
    root = Path(cl.__file__).parent
    public = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parent != root and not path.name.startswith("_")
    ]
    assert public == []


def _docs() -> list[tuple[str, str]]:
    root = Path(cl.__file__).parents[1]
    paths = [*sorted((root / "docs").glob("*.md")), root / "README.md"]
    return [(path.name, path.read_text(encoding="utf-8")) for path in paths]


def _doc_imports() -> list[tuple[str, str, str]]:
    """Every name the docs and the README import, by ``from contextledger... import ...``
    or as a dotted ``contextledger.package._module.name``: (file and line, module, name)."""
    found = []
    for name, text in _docs():
        for match in re.finditer(r"from (contextledger[\w.]*) import (\([^)]*\)|[^\n]*)", text):
            where = f"{name}:{text.count(chr(10), 0, match.start()) + 1}"
            for imported in match[2].strip("()").replace("\n", " ").split(","):
                if imported.strip():
                    found.append((where, match[1], imported.split(" as ")[0].strip()))
        for match in re.finditer(r"`(contextledger(?:\.\w+)*\._\w+)\.(\w+)`", text):
            where = f"{name}:{text.count(chr(10), 0, match.start()) + 1}"
            found.append((where, match[1], match[2]))
    return found


def test_the_docs_import_what_they_name_from_the_public_surface() -> None:
    """Every name a doc imports exists where it imports it from, and a doc reaches into an
    internal module only for a name its package does not export."""
    assert _doc_imports(), "the docs import nothing: the pattern no longer matches them"
    missing, past_the_api = [], []
    for where, module, name in _doc_imports():
        if not hasattr(importlib.import_module(module), name):
            missing.append((where, module, name))
        public = ".".join(p for p in module.split(".") if not p.startswith("_"))
        if public != module and name in importlib.import_module(public).__all__:
            past_the_api.append((where, f"{module} -> {public}", name))
    assert missing == []
    assert past_the_api == []


def test_the_internal_modules_the_docs_name_exist() -> None:
    """A doc that says where something lives (``policy._decisions.compaction_due``) names a
    module, and a name in it, that exist."""
    root = Path(cl.__file__).parent
    packages = {init.parent.name for init in root.rglob("__init__.py") if init.parent != root}
    named, missing = 0, []
    for doc, text in _docs():
        pattern = r"`(?:contextledger\.)?([a-z_]+)\.(_[a-z_]+)((?:\.\w+)*)`"
        for match in re.finditer(pattern, text):
            if match[1] not in packages:
                continue
            named += 1
            try:
                found: object = importlib.import_module(f"contextledger.{match[1]}.{match[2]}")
            except ImportError:
                missing.append((doc, match[0]))
                continue
            for attribute in filter(None, match[3].split(".")):
                if not hasattr(found, attribute):
                    missing.append((doc, match[0]))
                    break
                found = getattr(found, attribute)
    assert named > 0
    assert missing == []


def test_no_docstring_or_doc_names_an_internal_module_without_its_underscore() -> None:
    """``policy.cadence`` for ``policy._cadence``: a name from before the modules were made
    internal, which points nowhere."""
    root = Path(cl.__file__).parent
    packages = {init.parent.name: init.parent for init in root.rglob("__init__.py")}
    texts = [(str(path.relative_to(root)), path.read_text("utf-8")) for path in root.rglob("*.py")]
    stale = []
    for where, text in [*texts, *_docs()]:
        for match in re.finditer(r"`(?:contextledger\.)?([a-z_]+)\.([a-z]\w*)", text):
            folder = packages.get(match[1])
            if folder is not None and folder != root and (folder / f"_{match[2]}.py").exists():
                stale.append((where, text.count("\n", 0, match.start()) + 1, match[0]))
    assert stale == []
