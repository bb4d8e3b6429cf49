"""Set-based helpers for the pass's hot paths (50,000 pending workloads, 2,000 nodes).

- :class:`Epoch`: a datetime column read as float seconds since the epoch, so the database does the
  conversion instead of building 100,000 Python datetimes per pass.
- :func:`insert_rows`: COPY on PostgreSQL for thousands of new rows at once.
- :func:`update_rows`: one ``UPDATE ... FROM unnest(arrays)`` on PostgreSQL (Django's bulk_update
  writes a CASE per row and field, which is ten times slower at this size); bulk_update elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.core.exceptions import EmptyResultSet
from django.db import connection, models
from django.db.models import FloatField, Func
from django.db.models.options import Options

PG_TYPES = {
    "BigAutoField": "bigint", "BigIntegerField": "bigint", "ForeignKey": "bigint", "OneToOneField": "bigint",
    "IntegerField": "integer", "PositiveIntegerField": "integer", "FloatField": "double precision",
    "CharField": "text", "TextField": "text", "DateTimeField": "timestamptz", "JSONField": "jsonb",
    "BooleanField": "boolean",
}  # fmt: skip


class Epoch(Func):
    """Seconds since the epoch (float) of a datetime column; NULL stays NULL."""

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra):  # noqa: ANN001, ANN201
        return self.as_sql(
            compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)::float8", **extra
        )

    def as_sqlite(self, compiler, connection, **extra):  # noqa: ANN001, ANN201
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)", **extra
        )


def _prepared(field: models.Field, value: object) -> object:
    if isinstance(field, models.JSONField):
        return None if value is None else json.dumps(value, cls=field.encoder)
    return field.get_db_prep_value(value, connection)


def fetch_rows(queryset: models.QuerySet) -> list[tuple]:
    """The rows of a ``values_list`` queryset as plain tuples, skipping Django's per-row converters.

    Only for columns that need no conversion (numbers, text, booleans, epoch floats); SQLite
    returns booleans as 0/1, so callers pass them through ``bool``.
    """
    compiler = queryset.query.get_compiler(using=queryset.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:  # e.g. ``pk__in=[]``: Django knows there is nothing to ask for
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _column(meta: Options[models.Model], name: str) -> models.Field:
    """The model field ``name`` stored in a column of the table (not a reverse relation)."""
    field = meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{meta.label}.{name} is a reverse relation, not a column")
    return field


def _column_name(field: models.Field) -> str:
    """The field's column (None only for a field not yet attached to a model)."""
    if field.column is None:
        raise TypeError(f"{field!r} has no column")
    return field.column


def insert_rows(model: type[models.Model], rows: Sequence[models.Model], fields: list[str]) -> None:
    """Insert new rows (``fields`` only, no ids returned): COPY on PostgreSQL, bulk_create elsewhere."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(rows, batch_size=2000)
        return
    columns = [_column(model._meta, name) for name in fields]
    names = ", ".join(_column_name(column) for column in columns)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {model._meta.db_table} ({names}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row([_prepared(column, getattr(row, column.attname)) for column in columns])


def update_rows(
    model: type[models.Model], rows: Sequence[models.Model], fields: list[str], *, key: str = "pk"
) -> None:
    """Write ``fields`` of ``rows`` (model instances whose ``key`` identifies the stored row)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_update(rows, fields, batch_size=500)
        return
    meta = model._meta
    key_field = meta.pk if key == "pk" else _column(meta, key)
    columns = [key_field, *(_column(meta, name) for name in fields)]
    arrays = [[_prepared(column, getattr(row, column.attname)) for row in rows] for column in columns]
    types = [PG_TYPES[column.get_internal_type()] for column in columns]
    # psycopg cannot send jsonb[] from Python values: send text[] and cast each element.
    sources = ", ".join(f"%s::{'text' if t == 'jsonb' else t}[]" for t in types)
    names = [_column_name(column) for column in columns]
    assignments = ", ".join(
        f"{name} = v.{name}{'::jsonb' if t == 'jsonb' else ''}"
        for name, t in zip(names[1:], types[1:], strict=True)
    )
    sql = (
        f"UPDATE {meta.db_table} AS t SET {assignments} FROM unnest({sources}) AS v({', '.join(names)}) "
        f"WHERE t.{names[0]} = v.{names[0]}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, arrays)
