from __future__ import annotations

import re
from pathlib import Path

import pytest

from dev_server.settings import ENV_PREFIX, Settings, SettingsError
from tests.support import REPO


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
                                         ("DEV_SERVER_KEEP_ALIVE_S", "long"),
                                         ("DEV_SERVER_HEADER_TIMEOUT_S", "0"),
                                         ("DEV_SERVER_BODY_TIMEOUT_S", "-1"),
                                         ("DEV_SERVER_MAX_CONNECTIONS", "0"),
                                         ("DEV_SERVER_TURN_RATE_LIMIT", "many"),
                                         ("DEV_SERVER_TURN_RATE_WINDOW_S", "0")])
def test_bad_http_settings_fail_with_one_line_naming_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        Settings.load()
    assert name in str(info.value) and "\n" not in str(info.value)


def test_read_deadlines_and_the_connection_cap_are_on_and_the_turn_limit_off_by_default(monkeypatch):
    settings = Settings.load()
    assert (settings.header_timeout_s, settings.body_timeout_s, settings.max_connections) == (10, 60, 1000)
    assert settings.turn_rate_limit is None and settings.turn_rate_window_s == 60
    monkeypatch.setenv("DEV_SERVER_MAX_CONNECTIONS", "")  # empty: no cap
    monkeypatch.setenv("DEV_SERVER_TURN_RATE_LIMIT", "5")
    settings = Settings.load()
    assert settings.max_connections is None and settings.turn_rate_limit == 5


def test_every_setting_has_help_and_a_row_in_the_settings_table():
    reference = (REPO / "docs" / "configuration.md").read_text()  # the README's reference moved there
    table = reference.split("\n## Settings (environment")[1].split("\n## ")[0]
    documented = set(re.findall(r"`(DEV_SERVER_[A-Z0-9_]+)`", table))
    for name, field in Settings.model_fields.items():
        if field.validation_alias or field.exclude:  # OTEL_* and the provider variables: described as families
            continue
        variable = ENV_PREFIX + name.upper()
        assert field.description, f"{variable} has no help line in dev_server/settings.py"
        assert variable in documented, f"{variable} is missing from docs/configuration.md's settings table"
