//! Event time: normalizing event-time columns to milliseconds, classifying rows against the
//! watermark in force before them, generating per-split watermarks at batch-independent points,
//! and tracking per-partition source watermarks.
//!
//! The watermark formula itself lives in one place, [`weir_api::watermark_for`]; this module
//! only applies it.

mod alignment;
mod classify;
mod generator;
mod normalize;
mod partition_watermarks;
mod source_watermarks;

pub(crate) use alignment::SourceAlignment;
pub use classify::{Classification, InputTimeState, classify_rows};
pub use generator::{WatermarkCut, WatermarkGenerator};
pub use normalize::event_times_ms;
pub use partition_watermarks::PartitionWatermarks;
pub(crate) use source_watermarks::{SourceStep, SourceWatermarks};
