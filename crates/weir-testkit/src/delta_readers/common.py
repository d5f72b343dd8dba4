# Shared by the Delta readers of weir-testkit (delta_readers/*.py): turns a table's schema and
# rows into the JSON both readers print, so that their outputs compare directly.
#
# Values are normalised by the column's Delta type: `timestamp` as UTC ISO-8601 with a `Z`
# (`2024-01-02T03:04:05.000006Z`), `timestamp_ntz` the same without the `Z`, `date` as
# `YYYY-MM-DD`, decimals as their string, binary as base64, non-finite floats as strings, maps as
# objects with string keys (sorted), structs as objects. Rows are sorted by the JSON of every
# column, in schema order.
import base64
import datetime
import decimal
import json
import math
import sys


def fields_of(schema_json):
    """The top-level fields of a Delta (Spark JSON) schema, without their metadata."""
    return [
        {"name": f["name"], "type": f["type"], "nullable": f.get("nullable", True)}
        for f in schema_json["fields"]
    ]


def norm(value, dtype):
    if value is None:
        return None
    if isinstance(dtype, dict):
        kind = dtype.get("type")
        if kind == "struct":
            if not isinstance(value, dict):
                value = value.asDict(recursive=False)
            return {f["name"]: norm(value.get(f["name"]), f["type"]) for f in dtype["fields"]}
        if kind == "array":
            return [norm(v, dtype["elementType"]) for v in value]
        if kind == "map":
            pairs = value.items() if isinstance(value, dict) else value
            out = {}
            for k, v in pairs:
                key = norm(k, dtype["keyType"])
                key = key if isinstance(key, str) else json.dumps(key, sort_keys=True)
                out[key] = norm(v, dtype["valueType"])
            return dict(sorted(out.items()))
        return value
    if dtype == "timestamp":
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        # A naive value is UTC: the Spark reader runs its Python with TZ=UTC.
        return value.isoformat(timespec="microseconds") + "Z"
    if dtype == "timestamp_ntz":
        return value.replace(tzinfo=None).isoformat(timespec="microseconds")
    if dtype == "date":
        return value.isoformat()
    if isinstance(dtype, str) and dtype.startswith("decimal"):
        return str(decimal.Decimal(value))
    if dtype == "binary":
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def table_json(version, schema_json, partition_columns, num_files, rows):
    """The output of one read: `rows` are dicts (or Spark Rows) of the top-level columns."""
    fields = fields_of(schema_json)
    out = []
    for row in rows:
        if not isinstance(row, dict):
            row = row.asDict(recursive=False)
        out.append({f["name"]: norm(row.get(f["name"]), f["type"]) for f in fields})
    out.sort(key=lambda r: [json.dumps(r[f["name"]], sort_keys=True) for f in fields])
    return {
        "version": int(version),
        "schema": fields,
        "partition_columns": list(partition_columns),
        "num_files": int(num_files),
        "rows": out,
    }


def emit(value):
    """Prints the result on its own marked line, apart from anything a library prints."""
    sys.stdout.write("WEIR-DELTA-JSON " + json.dumps(value, sort_keys=True) + "\n")
    sys.stdout.flush()
