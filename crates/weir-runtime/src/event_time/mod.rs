//! Event time: normalizing event-time columns to milliseconds, classifying rows against the
//! watermark in force before them, and tracking per-partition source watermarks.
//!
//! The watermark formula itself lives in one place, [`weir_api::watermark_for`]; this module
//! only applies it.

mod classify;
mod normalize;
mod partition_watermarks;

pub use classify::{Classification, InputTimeState, classify_rows};
pub use normalize::event_times_ms;
pub use partition_watermarks::PartitionWatermarks;
