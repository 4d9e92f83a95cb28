"""The package's layering: no import of the package hides under ``if TYPE_CHECKING:``, and
the architecture doc states the layers the contract enforces.

The layers themselves are import-linter contracts in ``pyproject.toml`` (``make test`` runs
``lint-imports``); those count type-checking imports too, and this keeps them visible.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import contextledger

PACKAGE = Path(contextledger.__file__).parent


def _type_checking_imports(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith(
                    "contextledger"
                ):
                    found.append(inner.module or "")
                elif isinstance(inner, ast.Import):
                    found.extend(a.name for a in inner.names if a.name.startswith("contextledger"))
    return found


def test_no_package_import_hides_under_type_checking() -> None:
    hidden = {
        str(path.relative_to(PACKAGE.parent)): imports
        for path in sorted(PACKAGE.rglob("*.py"))
        if (imports := _type_checking_imports(ast.parse(path.read_text())))
    }
    assert hidden == {}


def test_the_architecture_doc_states_the_layers_the_contract_enforces() -> None:
    """``docs/architecture.md``'s layer table, bottom to top, is the import-linter ``layers``
    contract of ``pyproject.toml``, top to bottom (``__main__`` is stated with ``cli``)."""
    root = PACKAGE.parent
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contracts["contracts"] if c["id"] == "layers"]
    enforced = [set(layer.split(" | ")) for layer in reversed(layers) if layer != "__main__"]
    doc = (root / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| \d+ \| ([^|]+) \|", doc, flags=re.MULTILINE)
    stated = [set(re.findall(r"`([a-z_]+)`", row.split("(")[0])) for row in rows]
    assert stated == enforced
