//! Built-in connectors that need no external system: the `datagen` source, which generates
//! synthetic rows, and the `blackhole` sink, which discards them. Benchmarks and tests use them to
//! drive pipelines at full speed without files or brokers.

mod blackhole;
mod datagen;
mod datagen_column;

pub use blackhole::BlackholeSinkFactory;
pub use datagen::DatagenSourceFactory;
