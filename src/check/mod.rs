//! Checkers: anomaly counts over the history, the final read and the replicas logs.

pub mod input;
