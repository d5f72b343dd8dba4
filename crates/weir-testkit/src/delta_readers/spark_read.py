# The Apache Spark (delta-spark) reader of weir-testkit. argv: the table URI, then a JSON object
# {"versions": [...], "jars": [...], "conf": {...}}; an empty `versions` reads the latest. Prints
# one JSON list, one entry per version, from a single JVM.
import json
import sys

from pyspark.sql import SparkSession


def partition_columns(spark, uri, version, quoted):
    """The partition columns of snapshot `version`, from Delta's own DeltaLog; the latest
    snapshot's (DESCRIBE DETAIL) when this Delta's getSnapshotAt is not callable."""
    try:
        jvm = spark._jvm
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
        empty = jvm.scala.Option.empty()
        for method in log.getClass().getMethods():
            if method.getName() != "getSnapshotAt":
                continue
            params = [p.getName() for p in method.getParameterTypes()]
            if params and params[0] == "long" and all(p == "scala.Option" for p in params[1:]):
                snap = log.getSnapshotAt(version, *([empty] * (len(params) - 1)))
                text = snap.metadata().partitionColumns().mkString("\u0001")
                return [c for c in text.split("\u0001") if c]
    except Exception as e:  # noqa: BLE001 - the fallback below is the answer then
        sys.stderr.write(f"weir-testkit: DeltaLog.getSnapshotAt failed: {e}\n")
    detail = spark.sql(f"DESCRIBE DETAIL delta.{quoted}").collect()[0]
    return list(detail["partitionColumns"])


def main():
    uri = sys.argv[1]
    args = json.loads(sys.argv[2])
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("weir-testkit-delta-reader")
        .config("spark.jars", ",".join(args["jars"]))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
    )
    for key, value in args.get("conf", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        quoted = "`" + uri.replace("`", "``") + "`"
        versions = args["versions"]
        if not versions:
            latest = spark.sql(f"DESCRIBE HISTORY delta.{quoted} LIMIT 1").collect()[0]
            versions = [latest["version"]]
        out = []
        for version in versions:
            df = spark.read.format("delta").option("versionAsOf", int(version)).load(uri)
            out.append(
                table_json(
                    version,
                    df.schema.jsonValue(),
                    partition_columns(spark, uri, int(version), quoted),
                    len(df.inputFiles()),
                    df.collect(),
                )
            )
        emit(out)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
