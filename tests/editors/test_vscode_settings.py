"""The VS Code extension's settings (editors/vscode/package.json) mirror the server's
(vq_lsp/settings/): the same names, defaults, types and bounds, and the server accepts the
extension's defaults without a warning. The extension's own TypeScript is unit-tested by
`npm test` in editors/vscode (node's test runner); real VS Code is not available in CI."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path

from vq_lsp import settings as server
from vq_lsp.settings.parsing import camel

VSCODE = Path(__file__).resolve().parents[2] / "editors" / "vscode"
PACKAGE = json.loads((VSCODE / "package.json").read_text())
PROPS = PACKAGE["contributes"]["configuration"]["properties"]
JSON_TYPE = {bool: "boolean", int: "integer", float: "number", str: "string"}


def client_only() -> list[str]:
    """CLIENT_ONLY from helpers.ts: the settings the extension keeps to itself."""
    src = (VSCODE / "src" / "helpers.ts").read_text()
    m = re.search(r"export const CLIENT_ONLY: readonly string\[\] = \[([^\]]*)\];", src)
    assert m, "CLIENT_ONLY not found in helpers.ts"
    return re.findall(r'"([^"]+)"', m.group(1))


def server_fields():
    """(camelCase key, dataclass field, type) of every leaf setting of the server."""
    for cls, prefix in (
        (server.Settings, ""),
        (server.DiagnosticSettings, "diagnostics."),
        (server.GrammarSettings, "grammar."),
    ):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                continue
            yield prefix + camel(f.name), f, hints[f.name]


def default_of(f: dataclasses.Field):
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


def test_every_server_setting_is_contributed_and_nothing_else():
    keys = {k.removeprefix("vqLsp.") for k in PROPS}
    assert all(k.startswith("vqLsp.") for k in PROPS)
    ours = set(client_only())
    assert ours <= keys
    assert keys - ours == {key for key, _, _ in server_fields()}


def test_defaults_types_and_bounds_match():
    for key, f, typ in server_fields():
        prop = PROPS[f"vqLsp.{key}"]
        default = default_of(f)
        if typing.get_origin(typ) is tuple:
            assert prop["type"] == "array" and prop["items"]["type"] == "string", key
            assert prop["default"] == list(default), key
            continue
        if typing.get_origin(typ) is dict:  # names to true or false
            assert prop["type"] == "object" and prop["additionalProperties"]["type"] == "boolean", key
            assert prop["default"] == default, key
            continue
        base = next(t for t in typing.get_args(typ) or (typ,) if t is not type(None))
        assert prop["type"] == JSON_TYPE[base], key
        assert prop["default"] == ("" if default is None else default), key  # "" stands for null
        lo, hi = f.metadata["lo"], f.metadata["hi"]
        assert prop.get("minimum") == lo and prop.get("maximum") == hi, key
        choices = f.metadata["choices"]
        if choices is not None and None not in choices:  # a closed list: the same enum
            assert prop["enum"] == list(choices), key
        elif choices is not None:  # every choice but null matches the pattern, and "" stands for null
            pattern = re.compile(prop["pattern"])
            assert all(pattern.fullmatch(c) for c in choices if c is not None), key
            assert pattern.fullmatch("") and not pattern.fullmatch("cuda:16") and not pattern.fullmatch("gpu"), key


def test_server_accepts_the_extension_defaults_without_warnings():
    """What serverSettings (helpers.ts) sends for the defaults parses to the server's defaults."""
    sent: dict = {}
    for name, prop in PROPS.items():
        key = name.removeprefix("vqLsp.")
        if key in client_only():
            continue
        value = None if prop["default"] == "" else prop["default"]
        node = sent
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    parsed, warnings = server.parse({"vqLsp": sent})
    assert warnings == []
    assert parsed == server.Settings()


def test_activation_covers_the_vscode_language_ids_the_server_wants():
    events = {e.removeprefix("onLanguage:") for e in PACKAGE["activationEvents"] if e.startswith("onLanguage:")}
    assert events <= set(server.Settings().file_types)
    assert {"markdown", "plaintext", "restructuredtext", "latex"} <= events


def test_package_has_what_vsce_needs():
    assert PACKAGE["main"] == "./out/extension.js" and PACKAGE["engines"]["vscode"]
    assert PACKAGE["publisher"] and PACKAGE["license"] == "MIT" and (VSCODE / "LICENSE").is_file()
    dev = PACKAGE["devDependencies"]
    assert "@vscode/vsce" in dev and "typescript" in dev
    assert PACKAGE["dependencies"]["vscode-languageclient"].startswith("^9")
    ignored = (VSCODE / ".gitignore").read_text().split()
    assert {"node_modules/", "*.vsix", "out/"} <= set(ignored)
    assert (VSCODE / "package-lock.json").is_file()
    commands = {c["command"] for c in PACKAGE["contributes"]["commands"]}
    assert commands == {"vqLsp.restartServer", "vqLsp.showCostStatistics"}
