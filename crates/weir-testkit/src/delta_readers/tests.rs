#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn reads_parse_and_storage_options_name_the_store() {
    let value = json_read();
    let read = DeltaRead::from_json(&value).unwrap();
    assert_eq!(read.version, 2);
    assert_eq!(read.column_names(), ["id", "day"]);
    assert_eq!(read.partition_columns, ["day"]);
    assert_eq!(read.column("id"), [Value::from(1), Value::from(2)]);
    assert!(DeltaRead::from_json(&serde_json::json!({"version": 1})).is_err());

    assert!(DeltaStorage::Local.python_options().is_empty());
    let s3 = DeltaStorage::S3(DeltaS3 {
        endpoint: "http://127.0.0.1:1".into(),
        access_key_id: "k".into(),
        secret_access_key: "s".into(),
        region: "us-east-1".into(),
        allow_http: true,
        path_style: true,
    });
    let options = s3.python_options();
    assert_eq!(options["AWS_ENDPOINT_URL"], "http://127.0.0.1:1");
    assert_eq!(options["AWS_ALLOW_HTTP"], "true");
    assert_eq!(options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"], "false");
}

#[test]
fn a_missing_tool_is_a_not_run_error_naming_it() {
    let err = not_run(
        "Python deltalake",
        "`python3`",
        "No such file".into(),
        PYTHON_INSTALL,
    );
    let text = err.to_string();
    assert!(text.contains("NOT RUN"), "{text}");
    assert!(text.contains("python3-venv"), "{text}");
    assert!(text.contains("No such file"), "{text}");
}

fn json_read() -> Value {
    serde_json::json!({
        "version": 2,
        "schema": [
            {"name": "id", "type": "long", "nullable": true},
            {"name": "day", "type": "string", "nullable": true},
        ],
        "partition_columns": ["day"],
        "num_files": 2,
        "rows": [{"id": 1, "day": "a"}, {"id": 2, "day": "b"}],
    })
}

/// The full tier (docs/testing.md): the readers are installed (PyPI, Maven Central) on first use.
mod full {
    use super::*;
    use serde_json::json;
    use std::time::Instant;

    /// Makes a table with the Python deltalake writer: version 0 with two rows in two
    /// partitions, version 1 appending a row with an application transaction.
    fn make_table(uri: &str, storage: &DeltaStorage) {
        let schema = vec![
            ("id", "int64"),
            ("name", "string"),
            ("day", "string"),
            ("at", "timestamp[us, tz=UTC]"),
            ("on", "date32"),
            ("price", "decimal128(10,2)"),
        ];
        let v0 = delta_python_write(
            uri,
            &DeltaWrite {
                rows: vec![
                    json!({"id": 2, "name": "b", "day": "2024-01-02",
                           "at": "2024-01-02T03:04:05.000006Z", "on": "2024-01-02", "price": "1.50"}),
                    json!({"id": 1, "name": "a", "day": "2024-01-01",
                           "at": "2024-01-01T00:00:00Z", "on": "2024-01-01", "price": "10.00"}),
                ],
                schema: schema.clone(),
                partition_by: vec!["day"],
                ..DeltaWrite::default()
            },
            storage,
        )
        .unwrap();
        assert_eq!(v0, 0);
        let v1 = delta_python_write(
            uri,
            &DeltaWrite {
                rows: vec![json!({"id": 3, "name": null, "day": "2024-01-01",
                                  "at": null, "on": null, "price": null})],
                schema,
                partition_by: vec!["day"],
                app_transaction: Some(("weir-job-1", 7)),
                ..DeltaWrite::default()
            },
            storage,
        )
        .unwrap();
        assert_eq!(v1, 1);
    }

    fn check_version_0(read: &DeltaRead) {
        assert_eq!(read.version, 0);
        assert_eq!(
            read.column_names(),
            ["id", "name", "day", "at", "on", "price"]
        );
        assert_eq!(read.partition_columns, ["day"]);
        assert_eq!(read.num_files, 2);
        assert_eq!(read.column("id"), [json!(1), json!(2)]);
        assert_eq!(
            read.column("at"),
            [
                json!("2024-01-01T00:00:00.000000Z"),
                json!("2024-01-02T03:04:05.000006Z")
            ]
        );
        assert_eq!(
            read.column("on"),
            [json!("2024-01-01"), json!("2024-01-02")]
        );
        assert_eq!(read.column("price"), [json!("10.00"), json!("1.50")]);
        assert_eq!(read.schema[0].data_type, json!("long"));
        assert_eq!(read.schema[3].data_type, json!("timestamp"));
        assert_eq!(read.schema[5].data_type, json!("decimal(10,2)"));
    }

    fn check_version_1(read: &DeltaRead) {
        assert_eq!(read.version, 1);
        assert_eq!(read.num_files, 3);
        assert_eq!(read.column("id"), [json!(1), json!(2), json!(3)]);
        assert_eq!(read.column("name"), [json!("a"), json!("b"), Value::Null]);
    }

    #[test]
    fn the_python_reader_reads_rows_partitions_versions_and_transactions() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("table").display().to_string();
        let started = Instant::now();
        make_table(&uri, &DeltaStorage::Local);
        eprintln!(
            "weir-testkit: two deltalake writes (install included) took {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let started = Instant::now();
        let latest = delta_python_rows(&uri, None, &DeltaStorage::Local).unwrap();
        eprintln!(
            "weir-testkit: a warm Python deltalake read took {:.2} s",
            started.elapsed().as_secs_f64()
        );
        check_version_1(&latest);
        check_version_0(&delta_python_rows(&uri, Some(0), &DeltaStorage::Local).unwrap());
        let history =
            delta_python_history(&uri, &["weir-job-1", "other"], &DeltaStorage::Local).unwrap();
        assert_eq!(history.version, 1);
        assert_eq!(history.versions(), [0, 1]);
        assert_eq!(history.app_version("weir-job-1"), Some(7));
        assert_eq!(history.app_version("other"), None);
        let err = delta_python_rows(&uri, Some(5), &DeltaStorage::Local).unwrap_err();
        assert!(err.to_string().contains("failed"), "{err}");
    }

    #[test]
    fn the_python_reader_reads_from_s3() {
        let server = crate::s3::server().unwrap();
        let bucket = server.create_bucket("delta-py").unwrap();
        let storage = DeltaStorage::S3(DeltaS3::for_server(server));
        let uri = format!("s3://{bucket}/t");
        make_table(&uri, &storage);
        check_version_1(&delta_python_rows(&uri, None, &storage).unwrap());
        check_version_0(&delta_python_rows(&uri, Some(0), &storage).unwrap());
        assert_eq!(
            delta_python_history(&uri, &[], &storage)
                .unwrap()
                .versions(),
            [0, 1]
        );
    }

    #[test]
    fn spark_reads_two_versions_of_a_deltalake_table_in_one_call() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("table").display().to_string();
        make_table(&uri, &DeltaStorage::Local);
        let started = Instant::now();
        let reads = delta_spark_reads(&uri, &[0, 1], &DeltaStorage::Local).unwrap();
        eprintln!(
            "weir-testkit: Spark read two versions in {:.1} s (install included if cold)",
            started.elapsed().as_secs_f64()
        );
        assert_eq!(reads.len(), 2);
        check_version_0(&reads[0]);
        check_version_1(&reads[1]);
        // The two readers agree on everything they print.
        assert_eq!(
            reads[0],
            delta_python_rows(&uri, Some(0), &DeltaStorage::Local).unwrap()
        );
        assert_eq!(
            reads[1],
            delta_python_rows(&uri, Some(1), &DeltaStorage::Local).unwrap()
        );
        let started = Instant::now();
        let latest = delta_spark_rows(&uri, None, &DeltaStorage::Local).unwrap();
        eprintln!(
            "weir-testkit: a warm Spark read took {:.1} s",
            started.elapsed().as_secs_f64()
        );
        assert_eq!(latest, reads[1]);
    }

    #[test]
    fn spark_reads_from_s3() {
        let server = crate::s3::server().unwrap();
        let bucket = server.create_bucket("delta-spark").unwrap();
        let storage = DeltaStorage::S3(DeltaS3::for_server(server));
        let uri = format!("s3://{bucket}/t");
        make_table(&uri, &storage);
        let reads = delta_spark_reads(&uri, &[0, 1], &storage).unwrap();
        check_version_0(&reads[0]);
        check_version_1(&reads[1]);
    }
}
