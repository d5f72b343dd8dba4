//! Engine integration tests: whole jobs run in-process through `weir::Engine`.
//!
//! One test binary (each links DataFusion); one module per capability.

mod bad_input;
mod checkpoints;
mod computed;
mod damaged_checkpoints;
mod delta;
mod determinism;
mod end_to_end;
mod evolution;
mod full;
mod keyed_state;
mod lanes;
mod partitions;
mod plugin_contract;
mod routing;
mod slt;
mod sql;
mod sql_references;
mod support;
mod three_run;
mod watermarks;
mod windows;
