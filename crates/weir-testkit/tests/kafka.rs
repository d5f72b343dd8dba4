//! The test broker is a real Kafka: topics and their partitions, transactions hidden from `read_committed` readers
//! when aborted, data kept across a restart, and a broker that dies with its test process.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use weir_testkit::kafka::{KafkaBroker, KafkaRecord};
use weir_testkit::unique_name;

/// The first `init_transactions` waits for the transaction coordinator to load (about 1 s).
const TXN_TIMEOUT: Duration = Duration::from_secs(60);

fn broker() -> &'static KafkaBroker {
    KafkaBroker::shared().unwrap_or_else(|e| panic!("{e}"))
}

fn transactional_producer(broker: &KafkaBroker) -> BaseProducer {
    let producer: BaseProducer = broker
        .client_config()
        .set("transactional.id", unique_name("weir-testkit-txn"))
        .create()
        .expect("create producer");
    producer
        .init_transactions(TXN_TIMEOUT)
        .expect("init_transactions");
    producer
}

/// Sends `values` to `topic` round-robin over `partitions`, keyed by the value.
fn send_all(producer: &BaseProducer, topic: &str, partitions: i32, values: &[String]) {
    for (i, value) in values.iter().enumerate() {
        let partition = i32::try_from(i).expect("small index") % partitions;
        producer
            .send(
                BaseRecord::to(topic)
                    .partition(partition)
                    .key(value)
                    .payload(value),
            )
            .map_err(|(e, _)| e)
            .expect("send");
    }
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn sorted_values(records: &[KafkaRecord]) -> Vec<String> {
    let mut v: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().expect("a value")).expect("utf-8"))
        .collect();
    v.sort();
    v
}

/// The sum of the high watermarks of `topic`'s partitions: every record written, committed,
/// aborted or control marker.
fn records_in_log(broker: &KafkaBroker, topic: &str, partitions: i32) -> i64 {
    let consumer: BaseConsumer = broker.client_config().create().expect("consumer");
    (0..partitions)
        .map(|p| {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(30))
                .expect("watermarks");
            high - low
        })
        .sum()
}

#[test]
fn topics_are_created_with_their_partitions() {
    let broker = broker();
    let topic = unique_name("weir-testkit-topic");
    broker.create_topic(&topic, 4).expect("create topic");
    let consumer: BaseConsumer = broker.client_config().create().expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(&topic), Duration::from_secs(30))
        .expect("metadata");
    assert_eq!(metadata.topics().len(), 1);
    assert_eq!(metadata.topics()[0].partitions().len(), 4);
    assert!(broker.read_committed(&topic).expect("read").is_empty());
    // A second creation is refused with the broker's reason.
    let err = broker.create_topic(&topic, 4).expect_err("duplicate topic");
    assert!(err.to_string().contains(&topic), "{err}");

    // Grown to 6 partitions; shrinking is refused with the broker's reason.
    broker.create_partitions(&topic, 6).expect("grows");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metadata = consumer
            .fetch_metadata(Some(&topic), Duration::from_secs(30))
            .expect("metadata");
        if metadata.topics()[0].partitions().len() == 6 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new partitions are not listed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = broker.create_partitions(&topic, 2).expect_err("shrinking");
    assert!(err.to_string().contains("to 2 partitions"), "{err}");
}

#[test]
fn read_committed_sees_committed_transactions_and_not_aborted_ones() {
    let broker = broker();
    let topic = unique_name("weir-testkit-txn");
    broker.create_topic(&topic, 3).expect("create topic");
    let producer = transactional_producer(broker);

    let first = values("committed-a", 7);
    producer.begin_transaction().expect("begin");
    send_all(&producer, &topic, 3, &first);
    producer.commit_transaction(TXN_TIMEOUT).expect("commit");

    producer.begin_transaction().expect("begin");
    send_all(&producer, &topic, 3, &values("aborted", 5));
    producer.flush(TXN_TIMEOUT).expect("flush");
    producer.abort_transaction(TXN_TIMEOUT).expect("abort");

    let second = values("committed-b", 4);
    producer.begin_transaction().expect("begin");
    send_all(&producer, &topic, 3, &second);
    producer.commit_transaction(TXN_TIMEOUT).expect("commit");

    let records = broker.read_committed(&topic).expect("read");
    let mut expected: Vec<String> = first.iter().chain(&second).cloned().collect();
    expected.sort();
    assert_eq!(sorted_values(&records), expected);
    for r in &records {
        assert_eq!(r.key, r.value, "{r:?}");
    }
    // The aborted records were written to the log and hidden, not dropped by the client.
    assert!(
        records_in_log(broker, &topic, 3) >= 16 + 5,
        "the aborted records are in the log"
    );
}

#[test]
fn an_open_transaction_is_invisible_until_committed() {
    let broker = broker();
    let topic = unique_name("weir-testkit-open");
    broker.create_topic(&topic, 1).expect("create topic");
    let producer = transactional_producer(broker);
    producer.begin_transaction().expect("begin");
    send_all(&producer, &topic, 1, &values("pending", 3));
    producer.flush(TXN_TIMEOUT).expect("flush");
    assert!(broker.read_committed(&topic).expect("read").is_empty());
    producer.commit_transaction(TXN_TIMEOUT).expect("commit");
    assert_eq!(
        sorted_values(&broker.read_committed(&topic).expect("read")),
        values("pending", 3)
    );
}

#[test]
fn a_restarted_broker_keeps_its_topics_and_records() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    let topic = unique_name("weir-testkit-restart");
    broker.create_topic(&topic, 2).expect("create topic");
    let producer = transactional_producer(&broker);
    producer.begin_transaction().expect("begin");
    send_all(&producer, &topic, 2, &values("before", 6));
    producer.commit_transaction(TXN_TIMEOUT).expect("commit");
    drop(producer);

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port_of(&broker)));
    broker.stop().expect("stop");
    assert!(!broker.is_running());
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "a stopped broker refuses connections"
    );
    broker.restart().expect("restart");
    assert_eq!(
        sorted_values(&broker.read_committed(&topic).expect("read")),
        values("before", 6)
    );

    // After a crash (SIGKILL) too, and the broker takes new transactions.
    broker.kill().expect("kill");
    broker.restart().expect("restart after kill");
    let producer = transactional_producer(&broker);
    producer.begin_transaction().expect("begin");
    send_all(&producer, &topic, 2, &values("after", 2));
    producer.commit_transaction(TXN_TIMEOUT).expect("commit");
    let mut expected = values("before", 6);
    expected.extend(values("after", 2));
    expected.sort();
    assert_eq!(
        sorted_values(&broker.read_committed(&topic).expect("read")),
        expected
    );
}

fn port_of(broker: &KafkaBroker) -> u16 {
    let servers = broker.bootstrap_servers();
    let (_, port) = servers.rsplit_once(':').expect("host:port");
    port.parse().expect("a port")
}

/// Run by [`the_broker_dies_with_a_killed_test_process`] in a child process: starts a broker,
/// prints its PID and waits to be killed.
#[test]
#[ignore = "run in a child process by the_broker_dies_with_a_killed_test_process"]
fn child_holding_a_broker() {
    let broker = KafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    println!("BROKER_PID={}", broker.pid().expect("running"));
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn the_broker_dies_with_a_killed_test_process() {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_holding_a_broker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child test");
    let stdout = child.stdout.take().expect("stdout");
    let pid = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        // The harness prints the test's name on the same line.
        .find_map(|line| {
            line.split_once("BROKER_PID=")
                .map(|(_, pid)| pid.to_string())
        })
        .expect("the child printed the broker's PID")
        .parse::<u32>()
        .expect("a PID");
    let proc_dir = format!("/proc/{pid}");
    assert!(std::path::Path::new(&proc_dir).exists());
    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::path::Path::new(&proc_dir).exists() {
        assert!(
            Instant::now() < deadline,
            "broker {pid} outlived its test process"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
