//! The one error type of the test servers.

use rdkafka::error::KafkaError;

/// What a machine needs for the Kafka tests, named in the errors.
const INSTALL_HINT: &str = "the Kafka tests start a real Apache Kafka broker and need Java 17 or \
                            newer (`java`) and Maven (`mvn`, to fetch the broker's jars once) on \
                            PATH; on Debian or Ubuntu: apt-get install openjdk-17-jre-headless maven";

/// Why a test server is not available, or what went wrong while fetching, starting or talking to
/// it. Its `Debug` output is its message, so that a test's `expect` or `?` says what to install.
#[derive(thiserror::Error)]
pub enum TestkitError {
    /// A program the broker needs is missing or too old.
    #[error("{what}: {INSTALL_HINT}")]
    MissingTool {
        /// What was found missing.
        what: String,
    },
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path or command.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A command (Maven, the storage formatter) exited unsuccessfully.
    #[error("{command} failed ({status}); its output ends with:\n{output}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The end of what it printed.
        output: String,
    },
    /// The broker did not accept connections in time, or its JVM exited.
    #[error(
        "the Kafka broker on {bootstrap} did not start: {reason}; its log {log} ends with:\n{tail}"
    )]
    KafkaStart {
        /// The broker's bootstrap servers.
        bootstrap: String,
        /// Why it is considered failed.
        reason: String,
        /// The broker's log file.
        log: String,
        /// The end of that log.
        tail: String,
    },
    /// The shared server of this test binary failed to start earlier.
    #[error("the shared {server} of this test binary failed to start: {message}")]
    Shared {
        /// Which server.
        server: &'static str,
        /// Why it failed, as the first caller was told.
        message: String,
    },
    /// The broker is stopped and cannot serve the request.
    #[error("the Kafka broker on {0} is stopped")]
    Stopped(String),
    /// A Kafka client call failed.
    #[error("Kafka {operation} on {bootstrap}: {source}")]
    Client {
        /// What was being done, with the topic.
        operation: String,
        /// The broker's bootstrap servers.
        bootstrap: String,
        /// The client's error.
        source: KafkaError,
    },
    /// The broker refused or failed a request.
    #[error("Kafka {operation} on {bootstrap}: {message}")]
    Broker {
        /// What was being done, with the topic.
        operation: String,
        /// The broker's bootstrap servers.
        bootstrap: String,
        /// What the broker answered.
        message: String,
    },

    /// A program the server needs is missing on this machine.
    #[error(
        "the S3 test server needs {what}, which is missing ({detail}); install it (Debian/Ubuntu: \
         `apt-get install python3 python3-venv python3-pip`) and run the tests again"
    )]
    S3Missing {
        /// What is missing.
        what: String,
        /// What failed.
        detail: String,
    },
    /// Creating the virtual environment or installing the packages failed.
    #[error("installing the S3 test server into `{dir}` failed: {step}: {detail}")]
    S3Install {
        /// The virtual environment's directory.
        dir: String,
        /// The step that failed.
        step: String,
        /// Its error or output.
        detail: String,
    },
    /// The server did not start.
    #[error("starting the S3 test server failed: {detail}")]
    S3Start {
        /// What went wrong, with the end of the server's log when there is one.
        detail: String,
    },
    /// A request to the server failed.
    #[error("S3 test server request `{request}` failed: {detail}")]
    S3Request {
        /// The request line.
        request: String,
        /// The error or the response's status line.
        detail: String,
    },

    /// Prometheus is not on `PATH` and Debian's package could not be fetched.
    #[error(
        "the Prometheus test was not run: Prometheus could not be installed ({detail}); install \
         it (Debian/Ubuntu: `apt-get update && apt-get install prometheus`, or let the test \
         fetch the package: `apt-get download` needs current package lists) and run it again"
    )]
    PrometheusMissing {
        /// What failed.
        detail: String,
    },
    /// The Prometheus server did not become ready.
    #[error("starting Prometheus failed: {reason}; its log ends with:\n{tail}")]
    PrometheusStart {
        /// Why it is considered failed.
        reason: String,
        /// The end of its log.
        tail: String,
    },
    /// A request to the Prometheus server failed.
    #[error("Prometheus request `{request}` failed: {detail}")]
    PrometheusRequest {
        /// The request path.
        request: String,
        /// The error or the status and body.
        detail: String,
    },

    /// `redis-server` is not on `PATH` and Debian's packages could not be fetched.
    #[error(
        "the Redis test was not run: Redis could not be installed ({detail}); install it \
         (Debian/Ubuntu: `apt-get update && apt-get install redis-server`, or let the test \
         fetch the packages: `apt-get download` needs current package lists) and run it again"
    )]
    RedisMissing {
        /// What failed.
        detail: String,
    },
    /// The Redis server did not answer, or a command to it failed.
    #[error("Redis failed: {reason}; its log ends with:\n{tail}")]
    RedisStart {
        /// What failed.
        reason: String,
        /// The end of its log.
        tail: String,
    },

    /// Chromium or chromedriver is missing and could not be installed.
    #[error(
        "the browser test was NOT RUN: headless Chromium could not be had ({detail}); install \
         Debian's packages (`apt-get install chromium chromium-driver`, giving /usr/bin/chromium \
         and /usr/bin/chromedriver; as root the test installs them itself) and run it again"
    )]
    BrowserMissing {
        /// What failed.
        detail: String,
    },
    /// chromedriver did not become ready, or the browser session could not be opened.
    #[error("starting the browser failed: {reason}; chromedriver's log ends with:\n{tail}")]
    BrowserStart {
        /// What went wrong.
        reason: String,
        /// The end of chromedriver's log.
        tail: String,
    },
    /// A WebDriver command failed.
    #[error("browser command `{command}` failed: {detail}")]
    Browser {
        /// The command, with its argument.
        command: String,
        /// The WebDriver client's error.
        detail: String,
    },
}

impl std::fmt::Debug for TestkitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Maps an I/O error to [`TestkitError::Io`] with what was being done.
pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestkitError {
    let context = context.into();
    move |source| TestkitError::Io { context, source }
}
