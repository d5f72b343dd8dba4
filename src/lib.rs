//! Weir facade
