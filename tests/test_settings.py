from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings, SettingsError


def test_defaults():
    settings = Settings.load()
    assert (settings.gateway_port, settings.studio_port, settings.host) == (8787, 4111, "127.0.0.1")


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("DEV_SERVER_GATEWAY_PORT", "9001")
    monkeypatch.setenv("DEV_SERVER_DATA_DIR", str(tmp_path))
    settings = Settings.load()
    assert settings.gateway_port == 9001
    assert settings.resolved_data_dir == tmp_path


def test_env_file_is_read(tmp_path: Path):
    env_file = tmp_path / ".env"
    env_file.write_text("DEV_SERVER_STUDIO_PORT=5000\n")
    assert Settings.load(env_file).studio_port == 5000


@pytest.mark.parametrize("name, value", [("DEV_SERVER_GATEWAY_PORT", "eighty"),
                                         ("DEV_SERVER_STUDIO_PORT", "70000"),
                                         ("DEV_SERVER_LOG_LEVEL", "loud")])
def test_invalid_settings_fail_with_one_line_naming_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        Settings.load()
    message = str(info.value)
    assert name in message and "\n" not in message
