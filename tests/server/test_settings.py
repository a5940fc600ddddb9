"""Settings: camelCase or snake_case, nested, invalid values fall back with a warning; and the
`--model` command-line flag (the server finds its model without initializationOptions)."""

from __future__ import annotations

import pytest
from pytest_lsp import ClientServerConfig

from vq_lsp.settings import DiagnosticSettings, Settings, describe, parse

from .lsp_helpers import VQ_LSP, diagnostics_for, initialize, make_client, open_doc, scores


def test_defaults_and_nested_camel_case():
    s, warnings = parse(
        {
            "vqLsp": {
                "modelPath": "/m",
                "diagnostics": {"surpriseThreshold": 3, "sentiment": False},
                "file_types": ["markdown"],
                "memoryBudgetMb": 64,
            }
        }
    )
    assert warnings == []
    assert s.model_path == "/m" and s.memory_budget_mb == 64.0 and s.file_types == ("markdown",)
    assert s.diagnostics == DiagnosticSettings(surprise_threshold=3.0, sentiment=False)
    assert s.threads == 1 and s.debounce_ms == 0  # one torch thread, no debounce timer, by default
    assert parse(None) == (Settings(), [])
    assert s.wants("markdown") and not s.wants("python")
    assert set(describe()) >= {"modelPath", "diagnostics.sentimentThreshold", "memoryBudgetMb"}


@pytest.mark.parametrize(
    "bad, name",
    [
        ({"threads": 0}, "threads"),
        ({"threads": 1.5}, "threads"),
        ({"hover": "yes"}, "hover"),
        ({"device": "tpu"}, "device"),
        ({"precision": "float16"}, "precision"),
        ({"diagnostics": {"sentimentThreshold": -1}}, "diagnostics.sentimentThreshold"),
        ({"diagnostics": "loud"}, "diagnostics"),
        ({"fileTypes": [1, 2]}, "fileTypes"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_values_fall_back_to_defaults_with_a_warning(bad, name):
    base = Settings(threads=2)
    s, warnings = parse(bad, base)
    assert len(warnings) == 1 and warnings[0].startswith(name), warnings
    assert s.hover is True and s.device is None and s.diagnostics == DiagnosticSettings()
    assert s.file_types == Settings().file_types


def test_valid_keys_survive_next_to_invalid_ones():
    s, warnings = parse({"hover": False, "threads": "many", "diagnostics": {"surprise": False, "maxSurpriseHints": -3}})
    assert not s.hover and not s.diagnostics.surprise and s.threads == 1
    assert s.diagnostics.max_surprise_hints == 50 and len(warnings) == 2


@pytest.mark.asyncio
async def test_model_from_the_command_line(model_dir):
    client = await ClientServerConfig(
        server_command=[VQ_LSP, "serve", "--model", str(model_dir)], client_factory=make_client
    ).start()
    try:
        await initialize(client, "visual-studio-code", None)
        uri = "file:///tmp/vq/cli.txt"
        open_doc(client, uri, "Fine.", version=3)
        await diagnostics_for(client, uri, 3)
        assert (await scores(client, uri))["tokens"] == 2
        await client.shutdown_session()
    finally:
        await client.stop()
