//! Event time at the sources: classifying rows against the watermark in force before them,
//! generating per-split watermarks at batch-independent points, tracking per-partition source
//! watermarks and aligning the subtasks of a source. Normalizing an event-time column to
//! milliseconds is shared with the window operator and lives in `weir-operators`.
//!
//! The watermark formula itself lives in one place, [`weir_api::watermark_for`]; this module
//! only applies it.

mod alignment;
mod classify;
mod generator;
mod partition_watermarks;
mod source_watermarks;

pub(crate) use alignment::SourceAlignment;
pub use classify::{Classification, InputTimeState, classify_rows};
pub use generator::{WatermarkCut, WatermarkGenerator};
pub use partition_watermarks::PartitionWatermarks;
pub(crate) use source_watermarks::{SourceStep, SourceWatermarks};
pub use weir_operators::event_time::event_times_ms;
