//! Weir's plugin surface: the traits an operator, source or sink implements, the messages that
//! flow on channels, stable ids and capabilities.
//!
//! This crate depends on no implementation (no runtime, no connector, no DataFusion): a plugin
//! author depends on it alone. Everything here is used by the runtime, which owns the driving
//! loop, and by connectors, which implement [`SourceFactory`] and [`SinkFactory`].
//!
//! A minimal operator that keeps only the first column:
//!
//! ```
//! use std::sync::Arc;
//! use weir_api::{Operator, Output, Result, Error};
//! use arrow::record_batch::RecordBatch;
//!
//! struct FirstColumn;
//!
//! impl Operator for FirstColumn {
//!     fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
//!         out.emit(batch.project(&[0]).map_err(|e| Error::arrow("projecting", e))?);
//!         Ok(())
//!     }
//! }
//! ```

mod capability;
pub mod changelog;
mod column_types;
mod context;
mod duration;
mod error;
pub mod failpoint;
mod ids;
pub mod limits;
mod message;
mod operator;
mod options;
mod predicate;
mod s3;
pub mod secrets;
mod sink;
mod source;
pub mod state;
mod state_image;
mod touch;
mod watermark;

pub use capability::{Boundedness, SemanticMode, SinkCapability, SourceCapability};
pub use changelog::{ROW_KIND_COLUMN, RowKind};
pub use column_types::{ColumnUse, supports};
pub use context::{Lane, SinkStaging, StateBackendHandle, TaskContext};
pub use duration::DurationMs;
pub use error::{EXCERPT_CHARS, Error, ErrorKind, RecordLocation, Result, excerpt};
pub use ids::{
    ChannelId, EdgeId, Epoch, EventTimeMs, JobId, OperatorId, PipelineId, StateShardId,
    SubtaskIndex, TaskId, VertexId,
};
pub use message::{Barrier, Piece, StreamMessage, Watermark, WatermarkMarks};
pub use operator::{
    Emitted, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, SideOutput,
    process_in_pieces,
};
pub use options::decode_options;
pub use predicate::{
    ColumnPredicate, PruneCondition, PruneOp, SourcePredicate, prunable_type, prune_value,
};
pub use s3::{S3_SQL_KEYS, S3Options, check_path_s3, is_s3_url};
pub use sink::{PreparedSink, SinkFactory, SinkWriter};
pub use source::{
    BadRecordPolicy, ConnectorSpec, DeadLetterBuilder, PreparedSource, Reach, SourceFactory,
    SourceSplit, SplitBatch, SplitCursor, SplitRange, SplitReader, dead_letter_schema,
};
pub use touch::{AllowList, Touch};

pub use state::{
    KeyedStateStore, NamespaceRange, ScannedEntry, StateAddress, StateDescriptor, StateKind,
    StateSpec,
};
pub use state_image::{StateImage, StateRows};
pub use watermark::watermark_for;

/// Re-export of the arrow crate this API is built against, so plugins use the same version.
pub use arrow;
