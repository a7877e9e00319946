"""The schema revision a read needs comes without alembic: from the migrations' file names and
one query of ``alembic_version``, agreeing with what alembic itself says."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from jobhost.store import create_store_engine, current_revision, head_revision, upgrade
from jobhost.store.migrate import known_revisions


def _alembic() -> ScriptDirectory:
    config = Config()
    config.set_main_option(
        "script_location", str(Path(__file__).parents[3] / "jobhost" / "store" / "migrations")
    )
    return ScriptDirectory.from_config(config)


def test_the_revisions_read_from_file_names_are_alembics() -> None:
    scripts = _alembic()
    assert known_revisions() == {script.revision for script in scripts.walk_revisions()}
    assert head_revision() == scripts.get_current_head()


def test_the_current_revision_is_read_with_plain_sql(tmp_path: Path) -> None:
    engine = create_store_engine(f"sqlite:///{tmp_path}/store.db", create=True)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        with engine.connect() as connection:
            said = MigrationContext.configure(connection).get_current_revision()
        assert current_revision(engine) == said == head_revision()
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '0003'"))
        assert current_revision(engine) == "0003"
    finally:
        engine.dispose()
