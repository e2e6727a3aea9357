import json
from io import StringIO

from django.core.management import call_command
from django.db import connection


def test_erasure_partition_bench_times_each_step_on_the_table_and_one_partition_and_cleans_up(
    transactional_db, tmp_path
):
    call_command(
        "dellm_bench",
        parts="erase_partition",
        erase_messages=4_000,
        erase_users=40,
        erase_partitions=4,
        out=str(tmp_path),
        stdout=StringIO(),
    )

    erase = json.loads((tmp_path / "results.json").read_text())["results"]["erase_partition"]
    assert (erase["messages"], erase["users"], erase["partitions"], erase["owner_messages"]) == (4_000, 40, 4, 100)
    # The owner's partition (the largest) holds the owners PostgreSQL hashed there: theirs and others', not all.
    assert erase["partition"].startswith("bench_erase_hashed_p")
    assert erase["owner_messages"] <= erase["partition_rows_min"] <= erase["partition_rows"] < erase["messages"]
    steps = {"vacuum_s", "reindex_s", "vacuum_full_s"}
    assert set(erase["whole"]) == set(erase["partition_steps"]) == steps
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Erasure upkeep per partition" in report
    assert "REINDEX INDEX CONCURRENTLY of the GIN index (the scrub) of one owner's partition" in report
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'bench_erase%'")
        assert cursor.fetchone()[0] == 0
