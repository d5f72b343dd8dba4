# The Python `deltalake` reader of weir-testkit. argv: mode (`read`, `history` or `write`), the
# table URI, then a JSON object of arguments; the storage options come as JSON in the
# WEIR_DELTA_STORAGE environment variable.
import json
import os

from deltalake import DeltaTable


def storage_options():
    return json.loads(os.environ.get("WEIR_DELTA_STORAGE", "{}"))


def read(uri, args):
    dt = DeltaTable(uri, version=args.get("version"), storage_options=storage_options())
    schema = json.loads(dt.schema().to_json())
    table = dt.to_pyarrow_table()
    return table_json(
        dt.version(),
        schema,
        dt.metadata().partition_columns,
        len(dt.file_uris()),
        table.to_pylist(),
    )


def history(uri, args):
    dt = DeltaTable(uri, storage_options=storage_options())
    commits = []
    for entry in dt.history():
        commits.append(
            {
                "version": int(entry["version"]),
                "operation": entry.get("operation"),
                "timestamp": entry.get("timestamp"),
            }
        )
    commits.sort(key=lambda c: c["version"])
    # deltalake 1.x answers for one application id (`transaction_version`); older releases
    # listed them all (`transaction_versions`).
    txns = {}
    for app_id in args.get("app_ids", []):
        if hasattr(dt, "transaction_version"):
            found = dt.transaction_version(app_id)
        else:
            txn = dt.transaction_versions().get(app_id)
            found = None if txn is None else getattr(txn, "version", txn)
        if found is not None:
            txns[app_id] = int(found)
    return {"version": dt.version(), "commits": commits, "app_transactions": txns}


def arrow_type(pa, name):
    """A pyarrow type from a short name: `int64`, `string`, `date32`, `timestamp[us, tz=UTC]`."""
    if name.startswith("timestamp[") and ", tz=" in name:
        unit, tz = name[len("timestamp["):-1].split(", tz=")
        return pa.timestamp(unit, tz=tz)
    if name.startswith("decimal128("):
        p, s = name[len("decimal128("):-1].split(",")
        return pa.decimal128(int(p), int(s))
    return pa.type_for_alias(name)


def write(uri, args):
    import datetime
    import decimal

    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    columns = args.get("schema")
    rows = args["rows"]
    if columns:
        schema = pa.schema([pa.field(n, arrow_type(pa, t)) for n, t in columns])
        conv = []
        for n, t in columns:
            typ = arrow_type(pa, t)
            if pa.types.is_timestamp(typ):
                conv.append((n, lambda v: datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))))
            elif pa.types.is_date(typ):
                conv.append((n, datetime.date.fromisoformat))
            elif pa.types.is_decimal(typ):
                conv.append((n, decimal.Decimal))
        for row in rows:
            for n, f in conv:
                if row.get(n) is not None:
                    row[n] = f(row[n])
        table = pa.Table.from_pylist(rows, schema=schema)
    else:
        table = pa.Table.from_pylist(rows)
    props = None
    if args.get("app_id") is not None:
        props = CommitProperties(
            app_transactions=[Transaction(app_id=args["app_id"], version=int(args["app_version"]))]
        )
    options = storage_options()
    if options.get("AWS_ENDPOINT_URL"):
        # Commits on S3 need a conditional put (moto and S3 accept If-None-Match).
        options.setdefault("conditional_put", "etag")
    write_deltalake(
        uri,
        table,
        mode=args.get("mode", "append"),
        partition_by=args.get("partition_by") or None,
        storage_options=options,
        commit_properties=props,
    )
    return {"version": DeltaTable(uri, storage_options=storage_options()).version()}


if __name__ == "__main__":
    import sys

    mode, uri, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    emit({"read": read, "history": history, "write": write}[mode](uri, json.loads(raw)))
    # Leave without the interpreter's teardown: deltalake's I/O threads can abort the process
    # while it is torn down after an S3 read ("terminate called without an active exception"),
    # after the answer is complete.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
