"""Where the store is: flags > environment > settings file > defaults, value by value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.errors import InputError
from tenantcost.store.settings import (
    SettingsFile,
    StoreSettings,
    display_url,
    normalize_db_url,
    resolve_settings,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config" / "settings.example.yaml"


def settings_file(folder: Path, **values: str) -> Path:
    path = folder / "settings.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def test_defaults_are_a_sqlite_file_and_a_data_folder_next_to_it():
    resolved = resolve_settings(environ={})
    assert (resolved.db, resolved.data) == ("sqlite:///tenantcost.db", "tenantcost-data")
    assert (resolved.db_origin, resolved.data_origin) == ("--db default", "--data default")


def test_flags_win_over_environment_which_wins_over_the_file(tmp_path: Path):
    file = settings_file(tmp_path, db="sqlite:////file/f.db", data="/file/data")
    env = {"TENANTCOST_DB": "sqlite:////env/e.db", "TENANTCOST_DATA": "/env/data",
           "TENANTCOST_SETTINGS": str(file)}  # fmt: skip
    both = resolve_settings("sqlite:////flag/x.db", "/flag/data", None, env)
    assert (both.db, both.data, both.db_origin, both.data_origin) == (
        "sqlite:////flag/x.db", "/flag/data", "--db", "--data")  # fmt: skip
    from_env = resolve_settings(environ=env)
    assert (from_env.db, from_env.data) == ("sqlite:////env/e.db", "/env/data")
    only_file = resolve_settings(environ={"TENANTCOST_SETTINGS": str(file)})
    assert (only_file.db, only_file.data) == ("sqlite:////file/f.db", "/file/data")
    assert only_file.db_origin == f"{file}: db"
    # Per value: a flag for one, the environment for the other.
    mixed = resolve_settings(db="sqlite:////flag/x.db", environ=env)
    assert (mixed.db, mixed.data) == ("sqlite:////flag/x.db", "/env/data")


def test_settings_flag_wins_over_the_settings_variable(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = settings_file(tmp_path / "a", db="sqlite:////a.db")
    b = settings_file(tmp_path / "b", db="sqlite:////b.db")
    assert resolve_settings(settings=b, environ={"TENANTCOST_SETTINGS": str(a)}).db == (
        "sqlite:////b.db"
    )


def test_relative_paths_in_a_settings_file_are_relative_to_its_folder(tmp_path: Path):
    file = settings_file(tmp_path, db="sqlite:///store/tc.db", data="raw")
    resolved = resolve_settings(settings=file, environ={})
    assert resolved.db == f"sqlite:///{tmp_path / 'store' / 'tc.db'}"
    assert resolved.data == str(tmp_path / "raw")
    # Without data: the default folder next to the database, wherever the file put it.
    file = settings_file(tmp_path, db="sqlite:///store/tc.db")
    assert resolve_settings(settings=file, environ={}).data == str(
        tmp_path / "store" / "tenantcost-data"
    )
    # URLs are kept as they are.
    file = settings_file(tmp_path, data="s3://bucket/tc/")
    assert resolve_settings(settings=file, environ={}).data == "s3://bucket/tc/"


def test_the_example_settings_file_documents_every_field():
    resolved = resolve_settings(settings=EXAMPLE, environ={})
    assert resolved.db == f"sqlite:///{EXAMPLE.parent / 'tenantcost.db'}"
    assert resolved.data == str(EXAMPLE.parent / "tenantcost-data")
    text = EXAMPLE.read_text()
    for name in SettingsFile.model_fields:
        assert f"\n{name}: " in text and f"# {name}: " in text, name


def test_postgresql_urls_get_the_installed_driver_and_passwords_stay_hidden():
    assert normalize_db_url("postgresql://u:pw@h:5432/tc", "--db") == (
        "postgresql+psycopg://u:pw@h:5432/tc"
    )
    assert normalize_db_url("postgres://u@h/tc", "--db") == "postgresql+psycopg://u@h/tc"
    assert display_url("postgresql+psycopg://u:s3cret@h:5432/tc") == (
        "postgresql+psycopg://u:***@h:5432/tc"
    )
    resolved = resolve_settings(db="postgresql://u:pw@h/tc", environ={})
    assert resolved.data is None and resolved.sqlite_path is None
    with pytest.raises(InputError, match="no data directory"):
        resolved.require_data()


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("db: [1, 2]\n", ["settings.yaml", "db", "valid string"]),
        ("dbb: sqlite:///x.db\n", ["settings.yaml", "dbb", "unknown key"]),
        ("- db\n", ["settings.yaml", "a settings file is a mapping"]),
        ("db: 'x\n", ["settings.yaml", "not valid YAML"]),
        ("db: mysql://h/x\n", ["settings.yaml: db", "not a supported database URL"]),
    ],
)
def test_a_bad_settings_file_is_one_line(tmp_path: Path, content: str, fragments: list[str]):
    (tmp_path / "settings.yaml").write_text(content)
    with pytest.raises(InputError) as caught:
        resolve_settings(settings=tmp_path / "settings.yaml", environ={})
    line = caught.value.one_line()
    assert all(f in line for f in fragments), line


def test_the_commands_read_the_environment_and_flags(tmp_path: Path):
    """End to end: TENANTCOST_SETTINGS names a file, TENANTCOST_DB overrides its db, --db
    overrides both; each `db upgrade` creates the store it resolved to."""
    runner = CliRunner()
    file = settings_file(tmp_path, db="sqlite:///from-file.db")
    env = {"TENANTCOST_SETTINGS": str(file), "TENANTCOST_DB": None, "TENANTCOST_DATA": None}
    runs = [
        ([], env, "from-file.db"),
        ([], {**env, "TENANTCOST_DB": f"sqlite:///{tmp_path / 'from-env.db'}"}, "from-env.db"),
        (["--db", f"sqlite:///{tmp_path / 'from-flag.db'}"],
         {**env, "TENANTCOST_DB": f"sqlite:///{tmp_path / 'from-env.db'}"}, "from-flag.db"),
    ]  # fmt: skip
    for flags, environment, name in runs:
        result = runner.invoke(app, ["db", "upgrade", *flags], env=environment)
        assert result.exit_code == 0, result.output
        assert f"{tmp_path / name}: schema" in result.stdout
        assert (tmp_path / name).is_file()


def test_settings_are_a_frozen_record():
    resolved = StoreSettings("sqlite:///a.db", None, "--db", "--data default")
    with pytest.raises(AttributeError):
        resolved.db = "x"  # type: ignore[misc]
