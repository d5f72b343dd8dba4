//! A real Apache Kafka broker for the tests: one JVM running a KRaft broker and controller on
//! 127.0.0.1, fetched from Maven Central on first use and stopped by PID when the test process
//! ends.
//!
//! The jars (`kafka_2.13` [`KAFKA_VERSION`] and a log4j binding for its slf4j logging) are
//! fetched once with Maven into [`cache_dir`](crate::cache_dir)`("kafka-4.4.0")`; later runs
//! start without the network.
//! [`KafkaBroker::shared`] starts one broker per test binary on first use; [`KafkaBroker::start`]
//! starts a private one (for tests that stop and restart it).
//!
//! Every JVM runs under a watchdog shell whose standard input is a pipe from the test process:
//! when the pipe closes (the [`KafkaBroker`] is dropped, or the test process ends in any way,
//! SIGKILL included) the watchdog kills the JVM by PID and removes the broker's data directory.

use std::fmt;
use std::fs;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

mod tools;

use crate::error::{TestkitError, io_err};
use crate::unique_name;
use tools::{check_java, fetch_jars, run_command, tail};

/// The Apache Kafka release the tests run.
pub const KAFKA_VERSION: &str = "4.4.0";
/// The log4j binding of slf4j 1.7 that Kafka logs through (without one the broker fails
/// silently).
const LOG4J_VERSION: &str = "2.25.5";
/// The oldest Java that Kafka 4's broker runs on.
const MIN_JAVA: u32 = 17;
/// The KRaft cluster id every test broker is formatted with (each broker has its own data
/// directory, so they never meet).
const CLUSTER_ID: &str = "Caqle1EXQLmmOVF40_mkYQ";
/// How long a broker may take to open its port (it takes about 2.5 s).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the watchdog waits for a graceful shutdown before it sends SIGKILL.
const STOP_GRACE_SECS: u32 = 30;
type Result<T> = std::result::Result<T, TestkitError>;

/// One record read back from a topic.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// The partition it is in.
    pub partition: i32,
    /// Its offset in that partition.
    pub offset: i64,
    /// Its key, if it has one.
    pub key: Option<Vec<u8>>,
    /// Its value, if it has one.
    pub value: Option<Vec<u8>>,
}

impl fmt::Debug for KafkaRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn text(b: &Option<Vec<u8>>) -> Option<std::borrow::Cow<'_, str>> {
            b.as_deref().map(String::from_utf8_lossy)
        }
        f.debug_struct("KafkaRecord")
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .field("key", &text(&self.key))
            .field("value", &text(&self.value))
            .finish()
    }
}

/// A running JVM and the pipe that keeps its watchdog waiting.
struct Running {
    /// The watchdog shell (`sh`), parent of the JVM.
    watchdog: Child,
    /// The write end of the watchdog's standard input; closing it stops the broker.
    stdin: Option<ChildStdin>,
    /// The JVM's process id.
    pid: u32,
}

/// A real single-node Kafka broker (KRaft broker and controller in one JVM) on 127.0.0.1.
///
/// Dropping it kills the JVM and removes its data; the one from [`KafkaBroker::shared`] lives
/// until the test process ends, when its watchdog does the same.
pub struct KafkaBroker {
    /// The directory of the broker's jars.
    jars: PathBuf,
    /// The broker's own directory: `server.properties`, `broker.log`, `data/`.
    dir: PathBuf,
    /// The PLAINTEXT (client) port.
    port: u16,
    /// The JVM when it runs.
    running: Mutex<Option<Running>>,
}

impl fmt::Debug for KafkaBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaBroker")
            .field("bootstrap", &self.bootstrap_servers())
            .field("dir", &self.dir)
            .finish()
    }
}

impl KafkaBroker {
    /// The broker of this test binary, started on first use and shared by its tests (give each
    /// test its own topics, groups and transactional ids with [`unique_name`]). It is stopped
    /// when the test process ends. A failed start is reported to every test that asks.
    pub fn shared() -> Result<&'static KafkaBroker> {
        static SHARED: OnceLock<std::result::Result<KafkaBroker, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| KafkaBroker::start().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| TestkitError::Shared {
                server: "Kafka broker",
                message: e.clone(),
            })
    }

    /// Starts a new broker of its own, with fresh data and free ports (fetching the jars first if
    /// this machine has not yet).
    pub fn start() -> Result<KafkaBroker> {
        let java = check_java()?;
        let jars = fetch_jars()?;
        let dir = tempfile::Builder::new()
            .prefix("weir-kafka-")
            .tempdir()
            .map_err(io_err("creating the Kafka broker's directory"))?
            .keep();
        let (port, controller_port) = free_ports()?;
        let broker = KafkaBroker {
            jars,
            dir,
            port,
            running: Mutex::new(None),
        };
        let props = broker.dir.join("server.properties");
        fs::write(
            &props,
            server_properties(&broker.data_dir(), port, controller_port),
        )
        .map_err(io_err(format!("writing {}", props.display())))?;
        broker.format(java)?;
        broker.restart()?;
        Ok(broker)
    }

    /// The `bootstrap.servers` of this broker.
    pub fn bootstrap_servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A client configuration with this broker's `bootstrap.servers` set.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap_servers());
        config
    }

    /// The process id of the broker's JVM while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(|r| r.pid)
    }

    /// Whether the broker's JVM runs (it may still be starting).
    pub fn is_running(&self) -> bool {
        self.lock().is_some()
    }

    /// Stops the broker gracefully (SIGTERM, SIGKILL after 30 s) and keeps its data, so that
    /// [`KafkaBroker::restart`] brings back the same topics and records. Does nothing when it is
    /// stopped.
    pub fn stop(&self) -> Result<()> {
        self.halt("stop")
    }

    /// Kills the broker's JVM at once (SIGKILL), as a crash would, and keeps its data.
    pub fn kill(&self) -> Result<()> {
        self.halt("kill")
    }

    /// Starts the stopped broker again on the same ports with its data, and waits until it
    /// accepts connections. Does nothing when it runs.
    pub fn restart(&self) -> Result<()> {
        let mut running = self.lock();
        if running.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let mut run = self.spawn()?;
        if let Err(e) = self.wait_ready(&mut run) {
            drop(run.stdin.take());
            // The watchdog kills what is left of the JVM; its exit status tells nothing more.
            let _ = run.watchdog.wait();
            return Err(e);
        }
        eprintln!(
            "weir-testkit: Kafka broker on {} (pid {}) ready in {:.1} s",
            self.bootstrap_servers(),
            run.pid,
            started.elapsed().as_secs_f64()
        );
        *running = Some(run);
        Ok(())
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1) and returns once the
    /// controller has created it.
    ///
    /// A broker whose port is open may not have joined its own controller yet (the topic
    /// then has no broker to live on: `InvalidReplicationFactor`); that is retried for up to
    /// 30 s.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<()> {
        self.create_topic_with(topic, partitions, &[])
    }

    /// [`KafkaBroker::create_topic`] with topic configurations (e.g. `cleanup.policy`).
    pub fn create_topic_with(
        &self,
        topic: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<()> {
        let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        for (key, value) in configs {
            new_topic = new_topic.set(key, value);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let result = self.admin(&format!("creating topic {topic}"), |admin, options| {
                block_on(admin.create_topics([&new_topic], options))
            });
            match result {
                Err(TestkitError::Broker { message, .. })
                    if message.contains("Invalid replication factor")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(250));
                }
                other => return other,
            }
        }
    }

    /// Grows `topic` to `partitions` partitions in all (Kafka never removes partitions) and
    /// returns once the controller has created them.
    pub fn create_partitions(&self, topic: &str, partitions: usize) -> Result<()> {
        let grow = NewPartitions::new(topic, partitions);
        self.admin(
            &format!("growing topic {topic} to {partitions} partitions"),
            |admin, options| block_on(admin.create_partitions([&grow], options)),
        )
    }

    /// Runs one admin request (`operation` names it in errors) with generous timeouts and
    /// turns a failed per-topic result into an error.
    fn admin(
        &self,
        operation: &str,
        request: impl FnOnce(
            &AdminClient<DefaultClientContext>,
            &AdminOptions,
        ) -> rdkafka::error::KafkaResult<Vec<rdkafka::admin::TopicResult>>,
    ) -> Result<()> {
        let admin: AdminClient<DefaultClientContext> = self
            .client_config()
            .create()
            .map_err(|source| self.client_err(operation, source))?;
        let options = AdminOptions::new()
            .request_timeout(Some(Duration::from_secs(30)))
            .operation_timeout(Some(Duration::from_secs(30)));
        let results =
            request(&admin, &options).map_err(|source| self.client_err(operation, source))?;
        for result in results {
            if let Err((name, code)) = result {
                return Err(TestkitError::Broker {
                    operation: format!("{operation} ({name})"),
                    bootstrap: self.bootstrap_servers(),
                    message: code.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Every committed record of `topic`, read from the beginning of each partition by a
    /// `read_committed` consumer up to the end it sees (the last stable offset), ordered by
    /// partition and offset. Records of aborted transactions and of open ones are not in it.
    pub fn read_committed(&self, topic: &str) -> Result<Vec<KafkaRecord>> {
        self.read_committed_within(topic, Duration::from_secs(60))
    }

    /// [`KafkaBroker::read_committed`] that gives up after `timeout`.
    pub fn read_committed_within(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Vec<KafkaRecord>> {
        let operation = format!("reading topic {topic}");
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", unique_name("weir-testkit-reader"))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "earliest")
            .create()
            .map_err(|source| self.client_err(&operation, source))?;
        let metadata = consumer
            .fetch_metadata(Some(topic), timeout)
            .map_err(|source| self.client_err(&operation, source))?;
        let broker_err = |message: String| TestkitError::Broker {
            operation: operation.clone(),
            bootstrap: self.bootstrap_servers(),
            message,
        };
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Err(broker_err("the broker returned no metadata for it".into()));
        };
        if let Some(err) = found.error() {
            return Err(broker_err(format!("{err:?}")));
        }
        let mut assignment = TopicPartitionList::new();
        for partition in found.partitions() {
            assignment
                .add_partition_offset(topic, partition.id(), Offset::Beginning)
                .map_err(|source| self.client_err(&operation, source))?;
        }
        consumer
            .assign(&assignment)
            .map_err(|source| self.client_err(&operation, source))?;
        let partitions = found.partitions().len();
        let mut at_end = std::collections::BTreeSet::new();
        let mut records = Vec::new();
        let mut last_error = None;
        let deadline = Instant::now() + timeout;
        while at_end.len() < partitions {
            if Instant::now() >= deadline {
                let seen = last_error.map_or_else(String::new, |e| format!("; last error: {e}"));
                return Err(broker_err(format!(
                    "the end of {} of {partitions} partitions not reached within {timeout:?}{seen}",
                    partitions - at_end.len()
                )));
            }
            match consumer.poll(Duration::from_millis(200)) {
                None => {}
                Some(Ok(message)) => {
                    records.push(KafkaRecord {
                        partition: message.partition(),
                        offset: message.offset(),
                        key: message.key().map(<[u8]>::to_vec),
                        value: message.payload().map(<[u8]>::to_vec),
                    });
                }
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    at_end.insert(partition);
                }
                // Transient client errors (a broker still loading, a reconnect) are retried
                // until the deadline, which then names the last one.
                Some(Err(e)) => last_error = Some(e),
            }
        }
        records.sort_by_key(|r| (r.partition, r.offset));
        Ok(records)
    }

    fn client_err(&self, operation: &str, source: KafkaError) -> TestkitError {
        TestkitError::Client {
            operation: operation.to_string(),
            bootstrap: self.bootstrap_servers(),
            source,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Running>> {
        // A test that panicked while holding the lock left the state consistent (it is only
        // ever replaced whole), so a poisoned lock is used as it is.
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.join("broker.log")
    }

    fn java_command(&self, java: &str, main: &str) -> Command {
        let mut cmd = Command::new(java);
        cmd.args([
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
        ])
        .arg(self.jars.join("*"))
        .arg(main);
        cmd
    }

    /// Formats the broker's storage (KRaft refuses to start on an unformatted directory).
    fn format(&self, java: &str) -> Result<()> {
        let mut cmd = self.java_command(java, "kafka.tools.StorageTool");
        cmd.args(["format", "-t", CLUSTER_ID, "-c"])
            .arg(self.dir.join("server.properties"));
        run_command(cmd, "kafka.tools.StorageTool format")
    }

    /// Starts the JVM under its watchdog and reads the JVM's process id.
    fn spawn(&self) -> Result<Running> {
        let java = self.java_command("java", "kafka.Kafka");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(WATCHDOG)
            .arg("weir-kafka-watchdog")
            .arg(&self.dir)
            .arg(STOP_GRACE_SECS.to_string())
            .arg(java.get_program())
            .args(java.get_args())
            .arg(self.dir.join("server.properties"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C or a signal to the test's process group reaches
            // the test process only, and the watchdog then sees the pipe close.
            .process_group(0);
        let mut watchdog = cmd
            .spawn()
            .map_err(io_err("starting the Kafka broker (sh)"))?;
        let stdin = watchdog.stdin.take();
        let mut line = String::new();
        if let Some(out) = watchdog.stdout.take() {
            BufReader::new(out)
                .read_line(&mut line)
                .map_err(io_err("reading the Kafka broker's process id"))?;
        }
        let Ok(pid) = line.trim().parse::<u32>() else {
            drop(stdin);
            let _ = watchdog.wait();
            return Err(self.start_err(format!("its watchdog printed {line:?}, not a process id")));
        };
        Ok(Running {
            watchdog,
            stdin,
            pid,
        })
    }

    /// Waits until the broker port accepts a connection (the broker opens it last).
    fn wait_ready(&self, run: &mut Running) -> Result<()> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if !process_alive(run.pid) {
                return Err(self.start_err("its JVM exited".into()));
            }
            if Instant::now() >= deadline {
                return Err(self.start_err(format!("no connection within {START_TIMEOUT:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn start_err(&self, reason: String) -> TestkitError {
        let log = self.log_file();
        TestkitError::KafkaStart {
            bootstrap: self.bootstrap_servers(),
            reason,
            tail: tail_of_file(&log),
            log: log.display().to_string(),
        }
    }

    /// Tells the watchdog to `stop` or `kill` the JVM and keep the data, and waits for it.
    fn halt(&self, how: &str) -> Result<()> {
        let Some(mut run) = self.lock().take() else {
            return Ok(());
        };
        if let Some(mut stdin) = run.stdin.take() {
            // If the watchdog is gone already, so is the JVM: nothing to tell it.
            let _ = writeln!(stdin, "{how}");
        }
        run.watchdog
            .wait()
            .map_err(io_err("waiting for the Kafka broker to stop"))?;
        Ok(())
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        match running.take() {
            // Closing the pipe makes the watchdog kill the JVM and remove the directory.
            Some(mut run) => {
                drop(run.stdin.take());
                let _ = run.watchdog.wait();
            }
            None => {
                let _ = fs::remove_dir_all(&self.dir);
            }
        }
    }
}

/// The watchdog, run as `sh -c WATCHDOG name DIR GRACE JAVA ARGS...`: starts the JVM in the
/// background, prints its PID, and waits for a line on its standard input. `stop` stops the JVM
/// gracefully (SIGKILL after GRACE seconds) and `kill` kills it, both keeping DIR; the end of the
/// input (the test process closed the pipe or died) kills the JVM and removes DIR.
const WATCHDOG: &str = r#"
dir="$1"; grace="$2"; shift 2
"$@" </dev/null >>"$dir/broker.log" 2>&1 &
pid=$!
echo "$pid"
how=
read -r how
case "$how" in
stop)
    kill "$pid" 2>/dev/null
    (sleep "$grace"; kill -9 "$pid" 2>/dev/null) &
    killer=$!
    wait "$pid"
    kill "$killer" 2>/dev/null
    ;;
kill)
    kill -9 "$pid" 2>/dev/null
    wait "$pid"
    ;;
*)
    kill -9 "$pid" 2>/dev/null
    wait "$pid"
    case "$dir" in */weir-kafka-*) rm -rf "$dir" ;; esac
    ;;
esac
"#;

/// The configuration of a one-node KRaft cluster with transactions on 127.0.0.1. A restarted
/// broker registers only once the session of its killed predecessor has expired: a 4 s session
/// (Kafka's default is 9 s) brings a restart after [`KafkaBroker::kill`] from 12.6 s to 7 s.
/// The log cleaner looks for work every 200 ms (Kafka's default is 15 s), so that a test of a
/// compacted topic sees it compacted in seconds.
fn server_properties(data: &Path, port: u16, controller_port: u16) -> String {
    format!(
        "process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={data}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000
log.cleaner.backoff.ms=200
auto.create.topics.enable=false
",
        data = data.display()
    )
}

/// Two distinct free ports on 127.0.0.1 (held together while chosen, so they differ).
fn free_ports() -> Result<(u16, u16)> {
    let bind = || {
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| Ok((l.local_addr()?.port(), l)))
            .map_err(io_err("choosing a free port on 127.0.0.1"))
    };
    let (a, _la) = bind()?;
    let (b, _lb) = bind()?;
    Ok((a, b))
}

/// Whether process `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The last lines of a log file, or why it could not be read.
fn tail_of_file(path: &Path) -> String {
    match fs::read(path) {
        Ok(bytes) => tail(&String::from_utf8_lossy(&bytes)),
        Err(e) => format!("({e})"),
    }
}

/// Runs a future to completion on this thread (the admin client's futures are completed by
/// librdkafka's own threads, so they need no async runtime).
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_bind_only_loopback_and_keep_the_controller_unadvertised() {
        let props = server_properties(Path::new("/d"), 9092, 9093);
        assert!(props.contains("listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"));
        assert!(props.contains("advertised.listeners=PLAINTEXT://127.0.0.1:9092\n"));
        assert!(props.contains("controller.quorum.voters=1@127.0.0.1:9093"));
        assert!(props.contains("log.dirs=/d\n"));
    }

    #[test]
    fn process_states_are_read_from_proc() {
        assert!(process_alive(std::process::id()));
        // A child that has exited and was reaped has no /proc entry.
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(!process_alive(pid));
    }

    #[test]
    fn tails_keep_the_last_lines() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert!(t.starts_with("line 70"));
        assert!(t.ends_with("line 99"));
    }
}
