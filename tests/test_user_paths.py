"""User-level paths (inference/paths.py): platformdirs folders with environment overrides, and
models found by name. `vq-train export --install NAME` puts a model in the user model folder;
the server's modelPath and `vq-lsp score --model` then accept NAME; a bad name is a clear error
that lists what is installed."""

from __future__ import annotations

import json

import platformdirs
import pytest

import inference
from inference import paths
from training import cli as train_cli
from vq_lsp.documents.store import Documents
from vq_lsp.scoring import command
from vq_lsp.settings import Settings


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    folder = tmp_path / "user-models"
    monkeypatch.setenv(paths.MODELS_ENV, str(folder))
    return folder


def test_folders_come_from_platformdirs_unless_overridden(monkeypatch, tmp_path):
    monkeypatch.delenv(paths.MODELS_ENV, raising=False)
    monkeypatch.delenv(paths.CACHE_ENV, raising=False)
    assert paths.models_dir() == platformdirs.user_data_path("vq-lsp") / "models"
    assert paths.snapshot_dir() == platformdirs.user_cache_path("vq-lsp") / "snapshots"
    monkeypatch.setenv(paths.MODELS_ENV, str(tmp_path / "m"))
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "c"))
    assert paths.models_dir() == tmp_path / "m" and paths.snapshot_dir() == tmp_path / "c" / "snapshots"


def test_the_test_run_keeps_out_of_the_users_folders():
    """conftest.py points both folders at a temporary folder for the whole run (servers included)."""
    assert paths.models_dir() != platformdirs.user_data_path("vq-lsp") / "models"
    assert paths.cache_dir() != platformdirs.user_cache_path("vq-lsp")


@pytest.mark.parametrize(
    "name, ok",
    [
        ("mine", True),
        ("imdb-v2.1_small", True),
        ("../x", False),
        ("a/b", False),
        ("..", False),
        ("", False),
        (".hidden", False),
        ("x" * 65, False),
    ],
)
def test_model_names(name, ok):
    assert paths.is_model_name(name) == ok


def test_export_install_then_load_by_name_everywhere(tiny_model_dir, user_models, tmp_path, capsys):
    code = train_cli.main(
        ["export", "--model", str(tiny_model_dir), "--out", str(tmp_path / "out"), "--install", "mine"]
    )
    assert code == 0
    assert "installed as 'mine'" in capsys.readouterr().out
    target = user_models / "mine"
    assert sorted(p.name for p in target.iterdir()) == [
        "card.json",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    assert paths.installed_models() == ["mine"] and paths.resolve_model("mine") == target
    model = inference.load_model("mine", device="cpu")
    assert model.path == target

    # the server's modelPath setting
    docs = Documents(Settings(model_path="mine", device="cpu"))
    assert str(target) in docs.load_model()

    # vq-lsp score --model NAME gives the same rows as the folder path
    (tmp_path / "revs").mkdir()
    for i, text in enumerate(["A fine film.\n", "A fine, fine film.\n"]):
        (tmp_path / "revs" / f"r{i}.txt").write_text(text)
    capsys.readouterr()
    assert command.main([str(tmp_path / "revs"), "--model", "mine"]) == 0
    by_name = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert command.main([str(tmp_path / "revs"), "--model", str(tiny_model_dir)]) == 0
    by_path = [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    def strip(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows if r["type"] == "revision"]

    assert len(by_name) == 3 and strip(by_name) == strip(by_path)


def test_install_replaces_a_model_of_the_same_name(tiny_model_dir, user_models, tmp_path):
    from training.export import install

    install(tiny_model_dir, "mine")
    (user_models / "mine" / "stale.txt").write_text("from the old install")
    install(tiny_model_dir, "mine")
    assert not (user_models / "mine" / "stale.txt").exists()
    assert sorted(p.name for p in user_models.iterdir()) == ["mine"]  # no half-way copies left


def test_an_unknown_name_lists_the_installed_ones(tiny_model_dir, user_models, capsys):
    from training.export import install

    install(tiny_model_dir, "alpha")
    install(tiny_model_dir, "beta")
    with pytest.raises(inference.ModelLoadError, match=r"no installed model named 'gamma'.*alpha, beta"):
        inference.load_model("gamma")
    assert command.main(["--model", "gamma", str(tiny_model_dir)]) == 2
    err = capsys.readouterr().err
    assert "vq-lsp score: error:" in err and "alpha, beta" in err and "Traceback" not in err
    docs = Documents(Settings(model_path="gamma", device="cpu"))
    with pytest.raises(inference.ModelLoadError, match="alpha, beta"):
        docs.load_model()
    assert "alpha, beta" in docs.model_error


def test_no_models_installed_says_none(user_models):
    with pytest.raises(inference.ModelLoadError, match=r"installed in .*user-models: none.*--install NAME"):
        inference.load_model("anything")


def test_a_path_wins_over_a_name_and_a_missing_path_says_so(tiny_model_dir, user_models, tmp_path, monkeypatch):
    from training.export import install

    install(tiny_model_dir, "here")
    (tmp_path / "here").mkdir()  # a folder of that name in the working folder: the path is used
    monkeypatch.chdir(tmp_path)
    with pytest.raises(inference.ModelLoadError, match="config.json"):
        inference.load_model("here")
    with pytest.raises(inference.ModelLoadError, match=r"nowhere/model: model folder not found"):
        inference.load_model(tmp_path / "nowhere" / "model")


@pytest.mark.parametrize("bad", ["a/b", "..", "-x"])
def test_install_refuses_a_bad_name(tiny_model_dir, user_models, tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as e:
        train_cli.main(["export", "--model", str(tiny_model_dir), "--out", str(tmp_path / "o"), f"--install={bad}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --install" in err and "not a model name" in err
    assert not user_models.exists()
