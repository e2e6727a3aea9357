"""`__in` of integers is one array parameter (core/db/lookups.py), with Django's results."""

from chat.models import ContextEdge, Message
from tests.factories import make_edge, make_message


def test_an_integer_in_list_is_one_array_and_finds_what_in_finds(owner, thread):
    a, b, c = (make_message(thread, text) for text in ("a", "b", "c"))
    mine = Message.objects.filter(owner_id=owner.pk)
    sql, params = mine.filter(pk__in=[c.pk, a.pk, None, a.pk]).query.sql_with_params()
    assert "= ANY(%s::bigint[])" in sql and " IN " not in sql
    assert params == (owner.pk, sorted([a.pk, c.pk]))
    assert sorted(mine.filter(pk__in=[c.pk, a.pk, None]).values_list("pk", flat=True)) == [a.pk, c.pk]
    # Plain ints skip Django's per-value preparation, with the same parameters and rows.
    assert mine.filter(pk__in=(c.pk, a.pk, c.pk)).query.sql_with_params()[1] == (owner.pk, sorted([a.pk, c.pk]))
    assert sorted(mine.filter(pk__in=(c.pk, a.pk, c.pk)).values_list("pk", flat=True)) == [a.pk, c.pk]
    assert list(mine.exclude(pk__in={a.pk, c.pk}).values_list("pk", flat=True)) == [b.pk]
    # Values Django converts (a string id) are integers by then; nothing to match matches nothing.
    assert list(mine.filter(pk__in=[str(b.pk)]).values_list("pk", flat=True)) == [b.pk]
    assert not mine.filter(pk__in=[]).exists() and not mine.filter(pk__in=[None]).exists()


def test_an_id_past_bigint_matches_nothing_as_in_django(owner, thread):
    a = make_message(thread, "a")
    mine = Message.objects.filter(owner_id=owner.pk)
    # In one bigint array it would be an error (a 500 for a deletion naming it): Django's IN matches nothing.
    assert list(mine.filter(pk__in=[2**63, a.pk]).values_list("pk", flat=True)) == [a.pk]
    assert not mine.filter(pk__in=[-(2**63) - 1]).exists()


def test_a_subquery_keeps_djangos_in(owner, thread):
    a = make_message(thread, "a")
    inner = Message.objects.filter(owner_id=owner.pk, content="a").values("pk")
    query = Message.objects.filter(owner_id=owner.pk, pk__in=inner)
    assert " IN (SELECT" in str(query.query)
    assert list(query.values_list("pk", flat=True)) == [a.pk]


def test_a_foreign_key_in_list_is_one_array_and_finds_what_in_finds(owner, thread):
    a, b, c = (make_message(thread, text) for text in ("a", "b", "c"))
    make_edge(a, b)
    make_edge(b, c)
    mine = ContextEdge.objects.filter(owner_id=owner.pk)
    sql, params = mine.filter(source_id__in=[a.pk, b.pk, None], target__in=[b, c.pk]).query.sql_with_params()
    assert sql.count("= ANY(%s::bigint[])") == 2 and " IN " not in sql
    assert params == (owner.pk, sorted([a.pk, b.pk]), sorted([b.pk, c.pk]))
    # One value is equality (an owner_id__in of one owner pins its partition).
    sql, params = ContextEdge.objects.filter(owner_id__in={owner.pk}, source_id__in=[a.pk]).query.sql_with_params()
    assert '"owner_id" = %s' in sql and '"source_id" = %s' in sql and "ANY" not in sql
    assert params == (owner.pk, a.pk)
    assert list(mine.filter(source_id__in=[a.pk, b.pk], target_id__in=[c.pk]).values_list("source_id", flat=True)) == [
        b.pk
    ]
    assert list(mine.filter(source__in=[a]).values_list("target_id", flat=True)) == [b.pk]
    # Past bigint, or a subquery: Django's own IN.
    assert list(mine.filter(source_id__in=[2**63, a.pk]).values_list("target_id", flat=True)) == [b.pk]
    inner = Message.objects.filter(owner_id=owner.pk, content="b").values("pk")
    assert " IN (SELECT" in str(mine.filter(source_id__in=inner).query)
    assert list(mine.filter(source_id__in=inner).values_list("target_id", flat=True)) == [c.pk]
