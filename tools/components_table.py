"""Write the README's table of supported tokenizer.json components from gputok's registries.

Each stage's registry (``normalizers.NORMALIZERS``, ``pre_tokenizers.PRE_TOKENIZERS``,
``tokenizer.MODELS``, ``processors.POST_PROCESSORS``, ``decoders.DECODERS``) gives the types, the
options come from the fields the loader checks (``_validate.COMPONENT_FIELDS`` / ``MODEL_FIELDS``),
the notes from the first sentence of each class's docstring, and ``_components.NOT_SUPPORTED`` the
types still refused. ``python tools/components_table.py`` rewrites README.md between the markers;
``tests/test_components.py`` checks that the README holds what this writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- components-table: start (tools/components_table.py writes this) -->", "<!-- components-table: end -->"


def _first_sentence(cls) -> str:
    doc = " ".join((cls.__doc__ or "").split())
    doc = re.sub(r":(?:class|func|mod|data|meth):`~?([^`]+)`", r"`\1`", doc).replace("``", "`")
    match = re.match(r"(.+?\.)(?:\s|$)", doc)
    return (match.group(1) if match else doc).replace("|", "\\|")


def table() -> str:
    sys.path.insert(0, str(ROOT))
    from gputok import _components, _validate, decoders, normalizers, pre_tokenizers, processors, tokenizer

    rows = ["| stage | type | options read | notes |", "|---|---|---|---|"]

    def add(stage: str, registry: dict, fields: dict) -> None:
        for kind in sorted(registry):
            options = ", ".join(f"`{name}`" for name in fields.get(kind, {})) or "-"
            note = _first_sentence(registry[kind])
            refused = _components.NOT_SUPPORTED_OPTIONS.get(stage, {}).get(kind)
            note += f" Not supported: {refused}." if refused else ""
            rows.append(f"| {stage} | `{kind}` | {options} | {note} |")
        for kind, reason in sorted(_components.NOT_SUPPORTED.get(stage, {}).items()):
            rows.append(f"| {stage} | `{kind}` | - | **not supported yet**: {reason} |")

    add("normalizer", normalizers.NORMALIZERS, _validate.COMPONENT_FIELDS["normalizer"])
    add("pre_tokenizer", pre_tokenizers.PRE_TOKENIZERS, _validate.COMPONENT_FIELDS["pre_tokenizer"])
    add("model", tokenizer.MODELS, _validate.MODEL_FIELDS)
    add("post_processor", processors.POST_PROCESSORS, _validate.COMPONENT_FIELDS["post_processor"])
    add("decoder", decoders.DECODERS, _validate.COMPONENT_FIELDS["decoder"])
    return "\n".join(rows)


def readme_with_table(readme: str) -> str:
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{table()}\n{END}{after}"


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(readme_with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
