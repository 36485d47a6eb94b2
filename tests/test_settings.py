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


def test_http_settings_default_to_local_cors_and_a_long_keep_alive():
    settings = Settings.load()
    assert settings.cors_origin_list is None and settings.keep_alive_s == 75


def test_cors_origins_are_normalised(monkeypatch):
    monkeypatch.setenv("DEV_SERVER_CORS_ORIGINS", " https://app.example.com/ ,http://[::1]:3000")
    assert Settings.load().cors_origin_list == ("https://app.example.com", "http://[::1]:3000")
    monkeypatch.setenv("DEV_SERVER_CORS_ORIGINS", "*")
    assert Settings.load().cors_origin_list == ("*",)


@pytest.mark.parametrize("name, value", [("DEV_SERVER_CORS_ORIGINS", "example.com"),
                                         ("DEV_SERVER_CORS_ORIGINS", "https://a.example/path"),
                                         ("DEV_SERVER_CORS_ORIGINS", "*, https://a.example"),
                                         ("DEV_SERVER_CORS_ORIGINS", "https://*.example"),
                                         ("DEV_SERVER_KEEP_ALIVE_S", "0"),
                                         ("DEV_SERVER_KEEP_ALIVE_S", "long")])
def test_bad_http_settings_fail_with_one_line_naming_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        Settings.load()
    assert name in str(info.value) and "\n" not in str(info.value)
